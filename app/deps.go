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
// ask to have installed: requirements and an index, never a directory of
// the host's.
type DependenciesRequest struct {
	Python            []string `json:"python"`
	IndexURL          string   `json:"index_url,omitempty"`
	AllowSourceBuilds bool     `json:"allow_source_builds,omitempty"`
}

// ClientDependencies checks a client's request for language: Python only,
// requirements codeagent installs, and an index the door's network bounds
// let it reach (the install is the only execution that reaches it). Nil
// asks for nothing. Errors are of class Invalid, or Forbidden for an
// index beyond the bounds.
func ClientDependencies(d *DependenciesRequest, language string, b NetworkBounds) (deps.Request, error) {
	if d == nil || len(d.Python) == 0 {
		if d != nil && d.IndexURL != "" {
			return deps.Request{}, invalidf("dependencies.index_url needs dependencies.python")
		}
		return deps.Request{}, nil
	}
	if language != "python" {
		return deps.Request{}, invalidf("dependencies are for Python programs; this one is %s", language)
	}
	r, err := deps.Request{Python: d.Python, IndexURL: d.IndexURL, AllowSource: d.AllowSourceBuilds}.Normalize()
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
func AuditDependencies(rec *session.Recorder, lease *deps.Lease) error {
	pkgs := make([]map[string]string, len(lease.Packages))
	for i, p := range lease.Packages {
		pkgs[i] = map[string]string{"name": p.Name, "version": p.Version, "sha256": p.SHA256}
	}
	source := lease.Request.IndexURL
	if lease.Request.FindLinks != "" {
		source = "find-links " + lease.Request.FindLinks
	}
	if err := rec.Audit("dependencies", map[string]any{"env": lease.Key, "installed": lease.Installed,
		"requirements": lease.Request.Python, "index": source, "packages": pkgs}); err != nil {
		return &session.AuditError{Err: err}
	}
	return nil
}
