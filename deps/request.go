// Package deps installs the Python and JavaScript packages programs need:
// once per set of requirements, in a sandbox of its own whose only network
// is the index (or npm registry) named, into a content-addressed
// environment under the data directory that executions then bind
// read-only (sandbox.Spec.Binds) and find on PYTHONPATH or NODE_PATH,
// offline. The image's own packages (pandas, numpy) stay importable below
// it.
//
// A Request names the requirements and where they come from; Store.Ensure
// returns its environment, installing it first when no earlier request
// made it; Store.List, Remove and Prune manage what is kept, under a size
// cap with least-recently-used eviction.
package deps

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
)

// DefaultIndexURL is the Python Package Index's simple API, the index of a
// request that names none.
const DefaultIndexURL = "https://pypi.org/simple/"

// Bounds of a request.
const (
	MaxRequirements   = 100
	MaxRequirementLen = 200
)

// ErrInvalid is wrapped by the errors of a request that cannot be
// installed as given (a malformed requirement, an index that is not an
// http(s) URL); the caller's usage error.
var ErrInvalid = errors.New("invalid dependencies")

// Request is a set of Python requirements and JavaScript packages, and
// where they come from; one environment holds both.
type Request struct {
	// Python are requirement specifiers, one each, as in a requirements
	// file: a project name, extras, version specifiers ("pandas>=2",
	// "seaborn==0.13.2"). Options, URLs and paths are refused.
	Python []string `json:"python"`
	// IndexURL is a PEP 503 simple index; "" is DefaultIndexURL.
	IndexURL string `json:"index_url,omitempty"`
	// FindLinks is a host directory of wheels: the install then uses it
	// alone, with no index and no network.
	FindLinks string `json:"find_links,omitempty"`
	// AllowSource lets a source distribution build (its setup script
	// runs inside the install's sandbox), and npm packages' install
	// scripts run likewise; wheels only, and no scripts, otherwise.
	AllowSource bool `json:"allow_source,omitempty"`
	// JavaScript are npm specs: a name, optionally @ a version, range or
	// tag ("left-pad", "lodash@4.17.21", "@scope/pkg@^1"). URLs, git,
	// files, paths and aliases are refused.
	JavaScript []string `json:"javascript,omitempty"`
	// NPMRegistry is the npm registry's URL; "" is DefaultNPMRegistry.
	NPMRegistry string `json:"npm_registry,omitempty"`
	// CACerts are PEM certificates of authorities the installer trusts
	// besides its sandbox's own (an index behind a private authority).
	// They decide whom the install trusts, not what it installs: they are
	// not part of the environment's key.
	CACerts []byte `json:"-"`
}

// Empty reports whether r asks for nothing.
func (r Request) Empty() bool { return len(r.Python) == 0 && len(r.JavaScript) == 0 }

// requirementRe is what a requirement may be: a PEP 508 name, extras, and
// version specifiers, with no URL, path, marker or option.
var requirementRe = lazyre.New(`^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])` +
	`(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?` +
	`((===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+(,(===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+)*)?$`)

var nameRun = lazyre.New(`[-_.]+`)

// NormalizeName is a project name as PEP 503 compares them.
func NormalizeName(name string) string {
	return strings.ToLower(nameRun.ReplaceAllString(name, "-"))
}

// normalizeRequirement checks one requirement and returns it canonical:
// no spaces, the name normalised, extras and specifiers sorted.
func normalizeRequirement(req string) (string, error) {
	s := strings.Join(strings.Fields(req), "")
	if s == "" {
		return "", fmt.Errorf("%w: an empty requirement", ErrInvalid)
	}
	if len(s) > MaxRequirementLen || !requirementRe.MatchString(s) {
		return "", fmt.Errorf("%w: %q is not a requirement codeagent installs: a project name with optional extras and version specifiers (pkg, pkg==1.2, pkg[extra]>=1,<2); no options, URLs, paths or markers", ErrInvalid, req)
	}
	end := strings.IndexAny(s, "[=!<>~")
	if end < 0 {
		end = len(s)
	}
	name, rest := NormalizeName(s[:end]), s[end:]
	extras := ""
	if strings.HasPrefix(rest, "[") {
		i := strings.IndexByte(rest, ']')
		ex := strings.Split(strings.ToLower(rest[1:i]), ",")
		sort.Strings(ex)
		extras, rest = "["+strings.Join(slices.Compact(ex), ",")+"]", rest[i+1:]
	}
	if rest != "" {
		spec := strings.Split(rest, ",")
		sort.Strings(spec)
		rest = strings.Join(slices.Compact(spec), ",")
	}
	return name + extras + rest, nil
}

// ProjectName is the normalised project name of a requirement.
func ProjectName(req string) (string, error) {
	n, err := normalizeRequirement(req)
	if err != nil {
		return "", err
	}
	if i := strings.IndexAny(n, "[=!<>~"); i >= 0 {
		n = n[:i]
	}
	return n, nil
}

// ParseRequirements reads a requirements file (pip's format, the subset
// codeagent installs: one requirement a line, # comments, blank lines).
func ParseRequirements(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if _, err := normalizeRequirement(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out, sc.Err()
}

// Normalize checks r and returns it canonical: requirements and npm
// specs normalised, sorted and without duplicates, the index URL made
// explicit when there are Python requirements (none with FindLinks,
// which becomes absolute), the registry when there are npm packages.
func (r Request) Normalize() (Request, error) {
	if len(r.Python) > MaxRequirements || len(r.JavaScript) > MaxRequirements {
		return r, fmt.Errorf("%w: %d requirements and %d npm packages: at most %d each", ErrInvalid, len(r.Python), len(r.JavaScript), MaxRequirements)
	}
	out := Request{AllowSource: r.AllowSource, CACerts: r.CACerts}
	if len(r.JavaScript) > 0 {
		js, err := normalizeNPM(r.JavaScript)
		if err != nil {
			return r, err
		}
		out.JavaScript, out.NPMRegistry = js, r.NPMRegistry
		if out.NPMRegistry == "" {
			out.NPMRegistry = DefaultNPMRegistry
		}
		if _, _, err := urlHost(out.NPMRegistry, "npm registry"); err != nil {
			return r, err
		}
		if len(r.Python) == 0 {
			// The index concerns Python alone.
			return out, nil
		}
	}
	for _, req := range r.Python {
		n, err := normalizeRequirement(req)
		if err != nil {
			return r, err
		}
		out.Python = append(out.Python, n)
	}
	sort.Strings(out.Python)
	out.Python = slices.Compact(out.Python)
	if r.FindLinks != "" {
		if r.IndexURL != "" {
			return r, fmt.Errorf("%w: give an index URL or a directory of wheels (find-links), not both", ErrInvalid)
		}
		abs, err := filepath.Abs(r.FindLinks)
		if err == nil {
			// The user's own links are followed here, once: the install
			// binds the directory they lead to.
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return r, fmt.Errorf("%w: find-links: %v", ErrInvalid, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return r, fmt.Errorf("%w: find-links %s is not a directory", ErrInvalid, r.FindLinks)
		}
		out.FindLinks = abs
		return out, nil
	}
	out.IndexURL = r.IndexURL
	if out.IndexURL == "" {
		out.IndexURL = DefaultIndexURL
	}
	if _, _, err := urlHost(out.IndexURL, "index URL"); err != nil {
		return r, err
	}
	return out, nil
}

// urlHost returns the host and port of an index's or registry's URL
// (what names it), which must be http or https without user information.
func urlHost(raw, what string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("%w: %s %q: an http or https URL, without credentials, query or fragment", ErrInvalid, what, raw)
	}
	host, port = u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return host, port, nil
}

// AllowRules are the egress rules of an install from r's index (none from
// a wheelhouse) and npm registry: what a door with a ceiling checks
// against it. r must be normalised.
func (r Request) AllowRules() ([]string, error) {
	var rules []string
	if len(r.Python) > 0 && r.FindLinks == "" {
		ix, err := allowRules(r.IndexURL)
		if err != nil {
			return nil, err
		}
		rules = append(rules, ix...)
	}
	if len(r.JavaScript) > 0 {
		reg, err := registryRules(r.NPMRegistry)
		if err != nil {
			return nil, err
		}
		rules = append(rules, reg...)
	}
	return rules, nil
}

// registryRules are the egress rules of an install from the npm registry
// at raw: its host and port (npm's registry serves its tarballs too).
func registryRules(raw string) ([]string, error) {
	host, port, err := urlHost(raw, "npm registry")
	if err != nil {
		return nil, err
	}
	return []string{net.JoinHostPort(host, port)}, nil
}

// allowRules are the egress rules of an install from the index at raw: its
// host and port and, for the Python Package Index, the host its files are
// served from. An IP literal is listed as such, the only way the egress
// proxy lets a program reach an address by number (a loopback index
// included).
func allowRules(raw string) ([]string, error) {
	host, port, err := urlHost(raw, "index URL")
	if err != nil {
		return nil, err
	}
	rules := []string{net.JoinHostPort(host, port)}
	if host == "pypi.org" {
		rules = append(rules, net.JoinHostPort("files.pythonhosted.org", port))
	}
	return rules, nil
}

// Key is the content address of r's environment on platform (the
// interpreter and machine the environment is for): a hash of r
// normalised, and, with FindLinks, of the wheels' names, sizes and
// modification times, so that a changed wheelhouse makes a new
// environment. r must be normalised.
func (r Request) Key(platform string) (string, error) {
	type keyed struct {
		Request
		Platform string   `json:"platform"`
		Wheels   []string `json:"wheels,omitempty"`
	}
	k := keyed{Request: r, Platform: platform}
	if r.FindLinks != "" {
		ents, err := os.ReadDir(r.FindLinks)
		if err != nil {
			return "", fmt.Errorf("find-links: %w", err)
		}
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				k.Wheels = append(k.Wheels, fmt.Sprintf("%s %d %d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
			}
		}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}
