package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
)

// Installer gives a run's Python and JavaScript programs their
// dependencies: what the door declared up front (base, installed by
// Start) and what a Python program declares on its first line
// (agent.Installer), the latter only for projects the allow list names (the manifest's permissions.install; "*"
// any). Each environment it takes is audited. Close releases it.
type Installer struct {
	envs  *deps.Store
	base  deps.Request
	allow []string // normalised project names, or "*"
	// granted are projects a person approved for this run (see
	// agent.PackageGranter); they end with the installer.
	granted []string

	mu    sync.Mutex
	lease *deps.Lease
	rec   *session.Recorder
	err   error // the first audit failure
}

// NewInstaller returns an installer of base (possibly empty) from envs,
// programs allowed to declare the projects of allow.
func NewInstaller(envs *deps.Store, base deps.Request, allow []string) *Installer {
	in := &Installer{envs: envs, base: base}
	for _, a := range allow {
		if a == "*" {
			in.allow = []string{"*"}
			break
		}
		in.allow = append(in.allow, deps.NormalizeName(a))
	}
	return in
}

// Start installs base, when it names anything.
func (in *Installer) Start(ctx context.Context) error {
	if in.base.Empty() {
		return nil
	}
	lease, err := in.envs.Ensure(ctx, in.base)
	if err != nil {
		return err
	}
	in.swap(lease)
	return nil
}

// Lease is the environment programs get now, or nil.
func (in *Installer) Lease() *deps.Lease {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lease
}

func (in *Installer) swap(l *deps.Lease) {
	in.mu.Lock()
	old, rec := in.lease, in.rec
	in.lease = l
	in.mu.Unlock()
	old.Release()
	if rec != nil && l != nil {
		in.record(rec, l)
	}
}

// audit starts recording each environment taken in rec, the current one
// first.
func (in *Installer) audit(rec *session.Recorder) {
	in.mu.Lock()
	in.rec = rec
	l := in.lease
	in.mu.Unlock()
	if l != nil {
		in.record(rec, l)
	}
}

func (in *Installer) record(rec *session.Recorder, l *deps.Lease) {
	if err := AuditDependencies(rec, l); err != nil {
		in.mu.Lock()
		if in.err == nil {
			in.err = err
		}
		in.mu.Unlock()
	}
}

// Installed names what programs get now ("seabird 1.0"), for the model.
func (in *Installer) Installed() []string {
	l := in.Lease()
	if l == nil {
		return nil
	}
	out := make([]string, len(l.Packages))
	for i, p := range l.Packages {
		out[i] = p.Name + " " + p.Version
	}
	return out
}

// Allowed says what programs may declare, for the model; "" nothing.
func (in *Installer) Allowed() string {
	switch {
	case len(in.allow) == 0:
		return ""
	case in.allow[0] == "*":
		return "any package of the index"
	}
	return strings.Join(in.allow, ", ")
}

// Install installs reqs (a program's declaration) with the base
// requirements, each project within the allow list; the environment is
// then the one every program of the run gets.
func (in *Installer) Install(ctx context.Context, reqs []string) ([]string, error) {
	r := in.base
	r.Python = append(slices.Clone(in.base.Python), reqs...)
	norm, err := r.Normalize()
	if err != nil {
		return nil, err
	}
	for _, q := range reqs {
		name, err := deps.ProjectName(q)
		if err != nil {
			return nil, err
		}
		if !in.allows(name) {
			return nil, fmt.Errorf("%s may not be installed here (the manifest's permissions.install does not list it)", name)
		}
	}
	lease, err := in.envs.Ensure(ctx, norm)
	if err != nil {
		return nil, err
	}
	in.swap(lease)
	in.mu.Lock()
	aerr := in.err
	in.mu.Unlock()
	if aerr != nil {
		return nil, &session.AuditError{Err: aerr}
	}
	return in.Installed(), nil
}

// allows reports whether project name may be declared: listed, or
// granted in the run.
func (in *Installer) allows(name string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return (len(in.allow) > 0 && (in.allow[0] == "*" || slices.Contains(in.allow, name))) || slices.Contains(in.granted, name)
}

// Outside implements agent.PackageGranter: the projects of reqs neither
// listed nor granted (a malformed one is left to Install to refuse).
func (in *Installer) Outside(reqs []string) []string {
	var out []string
	for _, q := range reqs {
		if name, err := deps.ProjectName(q); err == nil && !in.allows(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Grant implements agent.PackageGranter: names may be installed for the
// rest of this run; nothing is written where another run would see it.
func (in *Installer) Grant(names []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, n := range names {
		if n = deps.NormalizeName(n); !slices.Contains(in.granted, n) {
			in.granted = append(in.granted, n)
		}
	}
}

// Sandbox is sb with the installer's current environment given to every
// Python and JavaScript program.
func (in *Installer) Sandbox(sb sandbox.Sandbox) sandbox.Sandbox { return installing{sb, in} }

// Close releases the environment.
func (in *Installer) Close() { in.swap(nil) }

type installing struct {
	sandbox.Sandbox
	in *Installer
}

func (w installing) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if l := w.in.Lease(); l != nil && len(spec.Command) > 0 && (spec.Command[0] == "python3" || spec.Command[0] == "node") {
		l.Apply(&spec)
	}
	return w.Sandbox.Run(ctx, spec)
}
