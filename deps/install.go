package deps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/internal/nofollow"
	"github.com/codeagent/codeagent/sandbox"
)

// Where an environment appears in a program's sandbox, and the variable
// that puts it first on Python's path (the image's packages stay after it).
const (
	PythonPath = sandbox.BindRoot + "/python"
	wheelsPath = sandbox.BindRoot + "/wheels"
)

// InstallLimits are an install's default limits: pip resolves and unpacks
// in memory, and an environment is bigger than a program's outputs.
func InstallLimits() sandbox.Limits {
	return sandbox.Limits{WallTime: 10 * time.Minute, CPUTime: 10 * time.Minute, Memory: 1 << 30,
		Disk: 2 << 30, FileSize: 1 << 30, Processes: 64, Output: 1 << 20}
}

// InstallError is an install that did not succeed: pip's or npm's error
// lines, which name the package (not found, no wheel, a conflict), or the
// reason the install could not run.
type InstallError struct {
	Message string
	Output  string // the tail of pip's or npm's output
	// Unreachable says that the index or registry could not be reached
	// (refused, timed out, a TLS failure): Message says which and why.
	Unreachable bool
}

func (e *InstallError) Error() string { return "install dependencies: " + e.Message }

// installTmp is the install's temporary directory, in its workspace.
const installTmp = ".tmp"

// installSpec is the sandbox.Spec that installs r (normalised) into the
// workspace dir: pip, from the index (the only host the sandbox may reach)
// or from the wheelhouse bound read-only with no network at all, into
// dir/site, with a report of what it installed in dir/report.json.
func installSpec(r Request, dir string, lim sandbox.Limits) (sandbox.Spec, error) {
	// pip builds the environment in TMPDIR and moves it into --target:
	// on the same file system, a rename (the kubernetes backend's /tmp is
	// another, and copying there fails).
	// Two retries: an index that does not answer is said in seconds.
	cmd := []string{"sh", "-c", `mkdir -p "$TMPDIR" && exec "$@"`, "pip", "python3", "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
		"--no-cache-dir", "--no-warn-script-location", "--progress-bar", "off", "--retries", "2",
		"--target", sandbox.WorkspacePath + "/site", "--report", sandbox.WorkspacePath + "/report.json"}
	if !r.AllowSource {
		cmd = append(cmd, "--only-binary", ":all:")
	}
	spec := sandbox.Spec{Workspace: dir, Limits: lim,
		Files: []sandbox.File{{Path: "/code/requirements.txt", Data: []byte(strings.Join(r.Python, "\n") + "\n")}},
		Env: map[string]string{"PIP_CONFIG_FILE": "/dev/null", "PYTHONNOUSERSITE": "1", "HOME": "/tmp",
			"TMPDIR": sandbox.WorkspacePath + "/" + installTmp}}
	if r.FindLinks != "" {
		cmd = append(cmd, "--no-index", "--find-links", wheelsPath)
		spec.Binds = []sandbox.Bind{{Source: r.FindLinks, Path: wheelsPath}}
	} else {
		rules, err := allowRules(r.IndexURL)
		if err != nil {
			return spec, err
		}
		cmd = append(cmd, "--index-url", r.IndexURL)
		spec.Network = &sandbox.Network{Allow: rules, CACerts: r.CACerts}
	}
	spec.Command = append(cmd, "-r", "/code/requirements.txt")
	return spec, nil
}

// install runs the install of r into the empty directory dir with sb and
// returns what it installed: pip's packages, then npm's, each install in
// a sandbox of its own that reaches only its own index.
func install(ctx context.Context, sb sandbox.Sandbox, r Request, dir string, lim sandbox.Limits) ([]Package, error) {
	var pkgs []Package
	if len(r.Python) > 0 {
		spec, err := installSpec(r, dir, lim)
		if err != nil {
			return nil, err
		}
		res, err := sb.Run(ctx, spec)
		if err != nil && spec.Network != nil && errors.Is(err, sandbox.ErrInvalidSpec) {
			// A backend without network (kubernetes): a wheelhouse still works.
			return nil, fmt.Errorf("install dependencies from %s: %w; install from a directory of wheels instead (--find-links, find_links)", r.IndexURL, err)
		}
		if err != nil {
			return nil, fmt.Errorf("install dependencies: %w", err)
		}
		if res.Status != sandbox.StatusOK {
			return nil, installError("index", r.IndexURL, res, pipError)
		}
		if pkgs, err = readReport(dir); err != nil {
			return nil, err
		}
	}
	if len(r.JavaScript) > 0 {
		spec, err := npmSpec(r, dir, lim)
		if err != nil {
			return nil, err
		}
		res, err := sb.Run(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("install dependencies: %w", err)
		}
		if res.Status != sandbox.StatusOK {
			return nil, installError("npm registry", r.NPMRegistry, res, npmError)
		}
		js, err := readNPMLock(dir)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, js...)
	}
	return pkgs, nil
}

// installError is the error of a failed install from the index or
// registry at url (empty for a wheelhouse): that it could not be reached,
// why, or the installer's own error (see unreachable).
func installError(what, url string, res sandbox.Result, own func(string, sandbox.Result) string) *InstallError {
	out := string(res.Stderr)
	e := &InstallError{Output: tail(out+string(res.Stdout), 4000)}
	if url != "" {
		e.Message = unreachable(what, url, res.Egress, out+"\n"+string(res.Stdout))
		e.Unreachable = e.Message != ""
	}
	if e.Message == "" {
		e.Message = own(out, res)
	}
	return e
}

// pipError is the message of a failed install: pip's ERROR lines, or the
// sandbox's verdict when there are none (a timeout, the memory limit).
func pipError(stderr string, res sandbox.Result) string {
	var lines []string
	all := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range all {
		if l, ok := strings.CutPrefix(strings.TrimSpace(l), "ERROR: "); ok {
			lines = append(lines, l)
		}
	}
	if len(lines) == 1 && lines[0] == "Exception:" {
		// pip's own failure: the traceback's last line says what.
		lines[0] = "pip failed: " + strings.TrimSpace(all[len(all)-1])
	}
	if m := pipNoMatch(stderr); m != "" {
		return m
	}
	if len(lines) > 0 {
		return tail(strings.Join(lines, "; "), 1000)
	}
	if res.Message != "" {
		return res.Message
	}
	return fmt.Sprintf("pip ended with status %s (exit code %d): %s", res.Status, res.ExitCode, tail(strings.TrimSpace(stderr), 500))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Package is one installed distribution, as pip's report or npm's lock
// file has it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// SHA256 is the hash of the archive it came from, when the index
	// gave it.
	SHA256 string `json:"sha256,omitempty"`
	URL    string `json:"url,omitempty"`
	// Integrity is an npm package's Subresource Integrity ("sha512-...").
	Integrity string `json:"integrity,omitempty"`
	// Lang is "javascript" for an npm package, "" for Python's.
	Lang string `json:"lang,omitempty"`
}

// readReport reads pip's installation report (pip install --report) in
// the install's workspace dir, which its sandbox wrote: by descriptor,
// following no link, a regular file of at most 16 MiB.
func readReport(dir string) ([]Package, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("install dependencies: %w", err)
	}
	fd, err := nofollow.Open(d, "report.json", nofollow.How{Flags: unix.O_RDONLY | unix.O_NONBLOCK})
	unix.Close(d)
	if err != nil {
		return nil, fmt.Errorf("install dependencies: pip's report: %w", err)
	}
	f := os.NewFile(uintptr(fd), "report.json")
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("install dependencies: pip's report is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("install dependencies: pip's report: %w", err)
	}
	var rep struct {
		Install []struct {
			DownloadInfo struct {
				URL         string `json:"url"`
				ArchiveInfo struct {
					Hash   string            `json:"hash"`
					Hashes map[string]string `json:"hashes"`
				} `json:"archive_info"`
			} `json:"download_info"`
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, errors.New("install dependencies: pip's report is not JSON")
	}
	out := make([]Package, 0, len(rep.Install))
	for _, in := range rep.Install {
		p := Package{Name: in.Metadata.Name, Version: in.Metadata.Version, URL: in.DownloadInfo.URL,
			SHA256: in.DownloadInfo.ArchiveInfo.Hashes["sha256"]}
		if h, ok := strings.CutPrefix(in.DownloadInfo.ArchiveInfo.Hash, "sha256="); ok && p.SHA256 == "" {
			p.SHA256 = h
		}
		out = append(out, p)
	}
	return out, nil
}
