package deps

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// DefaultNPMRegistry is the npm registry of a request that names none.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// Where a JavaScript environment appears in a program's sandbox; node's
// require finds bare names on NODE_PATH.
const (
	JavaScriptPath = sandbox.BindRoot + "/js"
	NodePath       = JavaScriptPath + "/node_modules"
)

// npmSpecRe is what an npm spec may be: a package name, scoped or not,
// and optionally @ a version, a range or a tag. No URL, git, file:, path
// or alias (npm:) fits: neither ':' nor '/' after the name, nor '#'.
var npmSpecRe = lazyre.New(`^(@[a-z0-9][a-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*` +
	`(@[A-Za-z0-9^~<>=*|][A-Za-z0-9.^~<>=*|+ -]*)?$`)

// npmFileRe is a version npm would take for a tarball's file name.
var npmFileRe = lazyre.New(`(?i)\.(tgz|tar|tar\.gz)$`)

// normalizeNPMSpec checks one npm spec and returns it canonical: trimmed,
// with single spaces in a range.
func normalizeNPMSpec(spec string) (string, error) {
	s := strings.Join(strings.Fields(spec), " ")
	if s == "" {
		return "", fmt.Errorf("%w: an empty npm package", ErrInvalid)
	}
	if len(s) > MaxRequirementLen || !npmSpecRe.MatchString(s) || npmFileRe.MatchString(s) {
		return "", fmt.Errorf("%w: %q is not an npm package codeagent installs: a name with an optional version, range or tag (pkg, pkg@1.2.3, pkg@^1.2, @scope/pkg@1); no URLs, git, files, paths or aliases", ErrInvalid, spec)
	}
	return s, nil
}

// NPMName is the package name of an npm spec.
func NPMName(spec string) (string, error) {
	s, err := normalizeNPMSpec(spec)
	if err != nil {
		return "", err
	}
	if i := strings.Index(s[1:], "@"); i >= 0 {
		s = s[:i+1]
	}
	return s, nil
}

// normalizeNPM checks, sorts and deduplicates specs; a package named
// twice with different versions is refused.
func normalizeNPM(specs []string) ([]string, error) {
	byName := map[string]string{}
	for _, spec := range specs {
		s, err := normalizeNPMSpec(spec)
		if err != nil {
			return nil, err
		}
		name, _ := NPMName(s)
		if prev, ok := byName[name]; ok && prev != s {
			return nil, fmt.Errorf("%w: npm package %s given twice (%q and %q)", ErrInvalid, name, prev, s)
		}
		byName[name] = s
	}
	out := make([]string, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// ParsePackageJSON reads the "dependencies" of a package.json as npm
// specs (devDependencies and the rest are not installed).
func ParsePackageJSON(r io.Reader) ([]string, error) {
	var pj struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&pj); err != nil {
		return nil, fmt.Errorf("%w: package.json: %v", ErrInvalid, err)
	}
	var out []string
	for name, version := range pj.Dependencies {
		spec := name
		if v := strings.TrimSpace(version); v != "" {
			spec += "@" + v
		}
		s, err := normalizeNPMSpec(spec)
		if err != nil {
			return nil, fmt.Errorf("package.json dependencies: %w", err)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// npmCommand is the command an install runs npm as.
var npmCommand = "npm"

// npmMissing is the exit code of an install whose image has no npm.
const npmMissing = 127

// npmSpec is the sandbox.Spec that installs r's JavaScript packages
// (normalised) into the workspace dir, below js/: npm from the registry
// (the only host the sandbox may reach), no install scripts unless
// r.AllowSource, no configuration of the host's.
func npmSpec(r Request, dir string, lim sandbox.Limits) (sandbox.Spec, error) {
	rules, err := registryRules(r.NPMRegistry)
	if err != nil {
		return sandbox.Spec{}, err
	}
	args := []string{"install", "--prefix", sandbox.WorkspacePath + "/js", "--registry", r.NPMRegistry,
		"--no-audit", "--no-fund", "--no-bin-links", "--no-update-notifier", "--cache", "/tmp/npm-cache", "--loglevel", "error"}
	if !r.AllowSource {
		args = append(args, "--ignore-scripts")
	}
	args = append(args, r.JavaScript...)
	// sh says when the image has no npm (Docker's has node alone), and
	// unsets NO_PROXY, which names loopback: npm's agent would go direct
	// to a registry on the host's loopback (it ignores npm's noproxy
	// setting there), where the sandbox's own loopback has nothing.
	script := `command -v "$0" >/dev/null 2>&1 || { echo "npm is not in the sandbox image" >&2; exit ` +
		fmt.Sprint(npmMissing) + `; }; unset NO_PROXY no_proxy; exec "$0" "$@"`
	return sandbox.Spec{Workspace: dir, Limits: lim, Network: &sandbox.Network{Allow: rules, CACerts: r.CACerts},
		Command: append([]string{"sh", "-c", script, npmCommand}, args...),
		Env: map[string]string{"HOME": "/tmp", "npm_config_userconfig": "/dev/null", "npm_config_globalconfig": "/tmp/no-global-npmrc",
			"npm_config_update_notifier": "false",
			// A registry that does not answer fails in seconds.
			"npm_config_fetch_retries": "1", "npm_config_fetch_retry_mintimeout": "1000", "npm_config_fetch_retry_maxtimeout": "5000"}}, nil
}

// npmError is the message of a failed npm install: npm's error lines,
// which name the package, or the reason it could not run.
func npmError(stderr string, res sandbox.Result) string {
	if res.ExitCode == npmMissing && strings.Contains(stderr, "npm is not in the sandbox image") {
		return "npm is not in the sandbox image of this backend: JavaScript dependencies need an image with npm (the namespace backend uses the host's)"
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(l, "npm error ")
		if !ok {
			rest, ok = strings.CutPrefix(l, "npm ERR! ")
		}
		rest = strings.TrimSpace(rest)
		if !ok || !strings.Contains(rest, " ") || strings.HasPrefix(rest, "A complete log of this run") ||
			strings.Contains(rest, "install from a") || strings.Contains(rest, "tarball, folder, http url") {
			continue // a bare code, the log's path, advice to install what codeagent refuses
		}
		lines = append(lines, rest)
	}
	if len(lines) > 0 {
		return tail(strings.Join(lines, "; "), 1000)
	}
	if res.Message != "" {
		return res.Message
	}
	return fmt.Sprintf("npm ended with status %s (exit code %d): %s", res.Status, res.ExitCode, tail(strings.TrimSpace(stderr), 500))
}

// readNPMLock reads what npm installed from the lock file it keeps in
// node_modules, in the install's workspace dir, which its sandbox wrote:
// by descriptor, following no link, a regular file of at most 16 MiB.
func readNPMLock(dir string) ([]Package, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("install dependencies: %w", err)
	}
	fd, err := nofollow.Open(d, "js/node_modules/.package-lock.json", nofollow.How{Flags: unix.O_RDONLY | unix.O_NONBLOCK})
	unix.Close(d)
	if err != nil {
		return nil, fmt.Errorf("install dependencies: npm's lock file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "package-lock.json")
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("install dependencies: npm's lock file is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("install dependencies: npm's lock file: %w", err)
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Resolved  string `json:"resolved"`
			Integrity string `json:"integrity"`
			Link      bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, errors.New("install dependencies: npm's lock file is not JSON")
	}
	keys := make([]string, 0, len(lock.Packages))
	for k := range lock.Packages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Package, 0, len(keys))
	for _, k := range keys {
		p := lock.Packages[k]
		i := strings.LastIndex(k, "node_modules/")
		if i < 0 || p.Link {
			continue
		}
		name := k[i+len("node_modules/"):]
		if name == "" || path.Clean(name) != name {
			continue
		}
		out = append(out, Package{Name: name, Version: p.Version, URL: p.Resolved, Integrity: p.Integrity, Lang: "javascript"})
	}
	return out, nil
}
