package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
)

// EnvStore is the store of dependency environments (package deps), for
// the doors.
type EnvStore = deps.Store

// EnvRequest is a checked request for an environment.
type EnvRequest = deps.Request

// Envs is the store of dependency environments under the data directory
// dataDir, installed with sb (a door's sandbox, with its egress layer)
// for the backend named: environments are per backend, whose interpreter
// they are built for.
func Envs(dataDir string, sb sandbox.Sandbox, backend string, log *slog.Logger) *deps.Store {
	if backend == "" || backend == "auto" {
		backend = "namespace"
	}
	return &deps.Store{Dir: filepath.Join(dataDir, "envs"), Sandbox: sb, Platform: platform(backend, hostPython), Logger: log}
}

// hostPython is the interpreter the namespace backend's programs run: the
// host's, seen read-only.
const hostPython = "/usr/bin/python3"

// platform names what an environment is built for: the backend, the
// machine and, for the namespace backend, the host's Python by its
// versioned name (python3.11), so that an upgrade of the host's Python
// installs anew rather than reusing packages compiled for the old one.
// The images' interpreters come with the image.
func platform(backend, python string) string {
	p := backend + "/" + runtime.GOARCH
	if backend == "namespace" {
		if real, err := filepath.EvalSymlinks(python); err == nil {
			p += "/" + filepath.Base(real)
		}
	}
	return p
}

// DependenciesRequest is what a client of a door (the HTTP API, MCP) may
// ask to have installed: requirements and an index, npm packages and a
// registry, never a directory of the host's.
type DependenciesRequest struct {
	Python            []string `json:"python,omitempty"`
	IndexURL          string   `json:"index_url,omitempty"`
	AllowSourceBuilds bool     `json:"allow_source_builds,omitempty"`
	JavaScript        []string `json:"javascript,omitempty"`
	NPMRegistry       string   `json:"npm_registry,omitempty"`
}

// ClientDependencies checks a client's request for language: Python
// requirements for Python programs, npm packages for JavaScript ones,
// each of a form codeagent installs, from an index or registry the door's
// network bounds let it reach (the install is the only execution that
// reaches it). Nil asks for nothing. Errors are of class Invalid, or
// Forbidden for an index or registry beyond the bounds.
func ClientDependencies(d *DependenciesRequest, language string, b NetworkBounds) (deps.Request, error) {
	if d == nil {
		return deps.Request{}, nil
	}
	if d.IndexURL != "" && len(d.Python) == 0 {
		return deps.Request{}, invalidf("dependencies.index_url needs dependencies.python")
	}
	if d.NPMRegistry != "" && len(d.JavaScript) == 0 {
		return deps.Request{}, invalidf("dependencies.npm_registry needs dependencies.javascript")
	}
	if len(d.Python) == 0 && len(d.JavaScript) == 0 {
		return deps.Request{}, nil
	}
	if len(d.Python) > 0 && language != "python" {
		return deps.Request{}, invalidf("dependencies.python are for Python programs; this one is %s", language)
	}
	if len(d.JavaScript) > 0 && language != "javascript" {
		return deps.Request{}, invalidf("dependencies.javascript are for JavaScript programs; this one is %s", language)
	}
	r, err := deps.Request{Python: d.Python, IndexURL: d.IndexURL, AllowSource: d.AllowSourceBuilds,
		JavaScript: d.JavaScript, NPMRegistry: d.NPMRegistry}.Normalize()
	if err != nil {
		return r, invalidf("dependencies: %v", err)
	}
	rules, err := r.AllowRules()
	if err == nil {
		_, err = Network(NetworkRequest{Allow: rules}, b)
	}
	if err != nil {
		return r, err
	}
	r.CACerts = b.Trust()
	return r, nil
}

// EnsureDependencies returns the environment of req from envs, installed
// first when need be, and records in rec (when set) what it holds: each
// package with its version and hash, and the index. The caller releases
// the lease once its executions are over.
func EnsureDependencies(ctx context.Context, envs *deps.Store, req deps.Request, rec *session.Recorder) (*deps.Lease, error) {
	lease, err := envs.Ensure(ctx, req)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if err := AuditDependencies(rec, lease); err != nil {
			lease.Release()
			return nil, err
		}
	}
	return lease, nil
}

// AuditDependencies writes lease's record: what cannot be recorded does
// not run (a *session.AuditError).
func AuditDependencies(rc *session.Recorder, lease *deps.Lease) error {
	pkgs := make([]map[string]string, len(lease.Packages))
	for i, p := range lease.Packages {
		pkgs[i] = map[string]string{"name": p.Name, "version": p.Version}
		if p.Lang == "javascript" {
			pkgs[i]["lang"], pkgs[i]["integrity"] = p.Lang, p.Integrity
		} else {
			pkgs[i]["sha256"] = p.SHA256
		}
	}
	rec := map[string]any{"env": lease.Key, "installed": lease.Installed, "packages": pkgs}
	if r := lease.Request; len(r.Python) > 0 {
		rec["requirements"], rec["index"] = r.Python, r.IndexURL
		if r.FindLinks != "" {
			rec["index"] = "find-links " + r.FindLinks
		}
	}
	if r := lease.Request; len(r.JavaScript) > 0 {
		rec["javascript"], rec["npm_registry"] = r.JavaScript, r.NPMRegistry
	}
	if err := rc.Audit("dependencies", rec); err != nil {
		return &session.AuditError{Err: err}
	}
	return nil
}
