package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

//go:embed isolation.py
var isolationSource string

// Check is one finding of the isolation probe: what a program in a sandbox
// Pod tried, and whether it was refused as the conformance suite requires.
type Check struct {
	Name   string // io_uring_setup, ptrace, unshare, keyctl, bpf, i386, processes, proc, token, network
	OK     bool
	Detail string
}

// Isolation is what the probe found in Pods of one template.
type Isolation struct {
	RuntimeClass   string // the Pods' runtimeClassName, "" for the node's default
	SeccompProfile string // a Localhost profile, or RuntimeDefault
	// Note says how the two were chosen when Config left them empty.
	Note   string
	Checks []Check
}

// Failed lists the checks that failed, each as its detail.
func (iso Isolation) Failed() []string {
	var out []string
	for _, c := range iso.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return out
}

// IsolationError is the refusal of a backend whose Pods run weaker than
// the conformance suite requires.
type IsolationError struct{ Isolation Isolation }

func (e *IsolationError) Error() string {
	iso := e.Isolation
	rc := iso.RuntimeClass
	if rc == "" {
		rc = "the node's default"
	}
	return fmt.Sprintf("runtime class %s, seccomp %s: %s; install codeagent's seccomp profile and runtime class on "+
		"the nodes (docs/KUBERNETES.md, \"Isolation\"), name others that refuse these, or accept weaker isolation "+
		"with --allow-weak-isolation", rc, iso.SeccompProfile, strings.Join(iso.Failed(), "; "))
}

// isoKey is what of a Pod's template can change what the probe sees: the
// process limit. The image, runtime class and seccomp profile are the
// backend's; memory, disk and CPU limits do not bear on the checks.
type isoKey int

// isoState is the probe of one template: done closes when iso or err is set.
type isoState struct {
	done chan struct{}
	iso  Isolation
	err  error // the probe could not run (not cached)
}

// maxIsoStates bounds the probes remembered; past it they are forgotten and
// run again when needed.
const maxIsoStates = 64

// probeTimeout bounds the probe program.
const probeTimeout = 60 * time.Second

// isolation returns what the probe found for Pods with the process limit of
// lim, running it once per template (concurrent callers wait for the one
// probe). A probe that could not run is not remembered.
func (b *Backend) isolation(ctx context.Context, lim sandbox.Limits) (Isolation, error) {
	key := isoKey(lim.WithDefaults().Processes)
	b.isoMu.Lock()
	st, ok := b.iso[key]
	if !ok {
		if len(b.iso) >= maxIsoStates {
			clear(b.iso)
		}
		st = &isoState{done: make(chan struct{})}
		b.iso[key] = st
		go func() {
			st.iso, st.err = b.probe(context.Background(), int(key))
			if st.err != nil {
				b.isoMu.Lock()
				if b.iso[key] == st {
					delete(b.iso, key)
				}
				b.isoMu.Unlock()
			}
			close(st.done)
		}()
	}
	b.isoMu.Unlock()
	select {
	case <-st.done:
		return st.iso, st.err
	case <-ctx.Done():
		return Isolation{}, ctx.Err()
	}
}

// gate is the isolation a run gets: nil to run, the weaknesses written in
// its result when Config.AllowWeakIsolation accepted them, or the refusal.
func (b *Backend) gate(ctx context.Context, lim sandbox.Limits) ([]string, error) {
	iso, err := b.isolation(ctx, lim)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "check the isolation of sandbox Pods", Err: err}
	}
	failed := iso.Failed()
	if len(failed) == 0 {
		return nil, nil
	}
	if !b.cfg.AllowWeakIsolation {
		// The reason is what a server's client sees: the checks' names.
		var names []string
		for _, c := range iso.Checks {
			if !c.OK {
				names = append(names, c.Name)
			}
		}
		return nil, &sandbox.SetupError{Reason: "kubernetes sandbox Pods are weaker than required (" + strings.Join(names, ", ") +
			" not refused; see codeagent doctor --backend kubernetes)", Err: &IsolationError{Isolation: iso}}
	}
	return failed, nil
}

// probe runs isolation.py in a Pod of the default class with the given
// process limit. When the seccomp profile was chosen by default and the
// node does not have it, it falls back to RuntimeDefault and probes again.
func (b *Backend) probe(ctx context.Context, processes int) (Isolation, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout+probeTimeout)
	defer cancel()
	for {
		iso, err := b.probeOnce(ctx, processes)
		if err == nil || !errors.Is(err, errSeccompProfile) || !b.autoSeccomp.CompareAndSwap(true, false) {
			return iso, err
		}
		b.log.Warn("kubernetes: codeagent's seccomp profile is not on the node; trying RuntimeDefault", "profile", autoSeccompProfile, "err", err)
		b.setSeccomp(SeccompRuntimeDefault, fmt.Sprintf("%s is not installed on the node: RuntimeDefault instead", autoSeccompProfile))
	}
}

func (b *Backend) probeOnce(ctx context.Context, processes int) (Isolation, error) {
	b.probes.Add(1)
	rc, profile, note := b.template()
	iso := Isolation{RuntimeClass: rc, SeccompProfile: profile, Note: note}
	arg, _ := json.Marshal(map[string]any{"processes": processes, "connect": b.probeTargets()})
	lim := sandbox.DefaultLimits()
	lim.Processes, lim.WallTime, lim.CPUTime, lim.Output = processes, probeTimeout, probeTimeout, 1<<20
	ws, err := os.MkdirTemp("", "codeagent-probe-")
	if err != nil {
		return iso, fmt.Errorf("the probe's workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	spec := sandbox.Spec{Command: []string{"python3", "-I", "-S", "-c", isolationSource, string(arg)}, Workspace: ws, Limits: lim}
	// A Pod of its own, not the pool's: no class is warmed before its
	// probe passed.
	bx, err := b.createBox(ctx, classOf(lim))
	if err != nil {
		return iso, err
	}
	res, err := (&execution{b: b, bx: bx, spec: spec, lim: lim}).run(ctx)
	b.pool.release(bx)
	if err != nil {
		return iso, err
	}
	done := -1
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		var line struct {
			Check  string
			OK     bool
			Detail string
			Done   *int
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Done != nil {
			done = *line.Done
		} else if line.Check != "" {
			iso.Checks = append(iso.Checks, Check{Name: line.Check, OK: line.OK, Detail: line.Detail})
		}
	}
	if done != len(iso.Checks) || done == 0 {
		return iso, fmt.Errorf("the isolation probe did not finish (%s, exit %d): %s", res.Status, res.ExitCode, tail(res.Stderr, 600))
	}
	return iso, nil
}

// probeTargets are addresses a sandbox Pod must not reach: the API
// server's, unless it is a loopback address (the Pod's own loopback is
// not the host's).
func (b *Backend) probeTargets() []string {
	u, err := url.Parse(b.rest.Host)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	var out []string
	ips, _ := net.DefaultResolver.LookupIPAddr(context.Background(), u.Hostname())
	for _, ip := range ips {
		if !ip.IP.IsLoopback() && len(out) < 4 {
			out = append(out, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strconv.Quote(string(b))
}

// errSeccompProfile marks a Pod whose container could not be created
// because the node lacks its Localhost seccomp profile.
var errSeccompProfile = errors.New("the node has no such seccomp profile")

// template returns the Pods' runtime class, seccomp profile and how they
// were chosen.
func (b *Backend) template() (rc, profile, note string) {
	b.tmplMu.Lock()
	defer b.tmplMu.Unlock()
	profile = b.cfg.SeccompProfile
	if profile == "" {
		profile = SeccompRuntimeDefault
	}
	return b.cfg.RuntimeClass, profile, b.tmplNote
}

func (b *Backend) setSeccomp(profile, note string) {
	b.tmplMu.Lock()
	defer b.tmplMu.Unlock()
	b.cfg.SeccompProfile = profile
	b.tmplNote = strings.TrimPrefix(b.tmplNote+"; "+note, "; ")
}

// Isolation runs the probe (or returns its remembered result) for Pods
// with the default limits: what codeagent doctor --backend kubernetes
// prints.
func (b *Backend) Isolation(ctx context.Context) (Isolation, error) {
	return b.isolation(ctx, sandbox.DefaultLimits())
}
