package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// mcpOptions are the inputs of `codeagent mcp`.
type mcpOptions struct {
	Manifest  string
	DataDir   string
	Backend   string
	AllowWeak bool
	Backends  *backendFlags // --image and the kubernetes backend's settings
	Provider  *providerFlags
	Egress    ceilingFlags
	Getenv    func(string) string
	setFlags  map[string]bool
}

func cmdMCP(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("mcp", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent mcp [flags]\n\nServe the sandbox, the checker and the agent as MCP tools over stdio (standard\ninput and output carry the protocol; logs go to standard error). See docs/MCP.md.\nExit status: 0 when the client leaves, 2 for usage or configuration errors, 125 when\nthe sandbox could not be set up, 1 otherwise.\n\nflags:")
		printFlags(fs)
	}
	o := mcpOptions{Getenv: os.Getenv}
	fs.StringVar(&o.Manifest, "manifest", "", "manifest: the tools and languages offered, their limits, the policy and run limits")
	fs.StringVar(&o.DataDir, "data-dir", "", "data directory for the audit log (default $XDG_DATA_HOME/codeagent)")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	o.Provider = addProviderFlags(fs)
	o.Egress.register(fs)
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	o.setFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.setFlags[f.Name] = true })
	if err := serveMCP(ctx, o, s); err != nil {
		return exitCodeFor(s.err, err)
	}
	return exitOK
}

// serveMCP serves one MCP session on the process's standard streams until
// the client closes them or ctx ends.
func serveMCP(ctx context.Context, o mcpOptions, s stdio) error {
	logger := newLogger(s.err)
	var m *manifest.Manifest
	getenv := o.Getenv
	backend := o.Backend
	if o.Manifest != "" {
		var err error
		if m, err = manifest.Load(o.Manifest); err != nil {
			return usageError{err}
		}
		if m.Agent.Backend != "" && !o.setFlags["backend"] {
			backend = m.Agent.Backend
		}
		getenv = manifestEnv(m, o.Getenv)
	}
	deps := mcpserver.Deps{Manifest: m, Logger: logger}
	if cfg, err := o.Provider.resolve(getenv); err != nil {
		deps.ModelError = err.Error()
	} else {
		deps.Model = &cfg
		deps.Secrets = []string{o.Getenv(llm.EnvOpenAIKey), o.Getenv(llm.EnvAnthropicKey)}
	}
	dataDir, err := resolveDataDir(o.DataDir, o.Getenv)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	sb, err := openBackend(backend, o.Backends.options(backends.Options{AllowWeakIsolation: o.AllowWeak, Warm: 2, WarmPython: 1, Logger: logger}))
	if errors.Is(err, backends.ErrUnknown) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer sb.Close() // after the server: its programs are gone by then
	km := app.NewKernels(app.KernelsConfig{Sandbox: sb, Logger: logger}, nil)
	defer km.Close() // after the server, before the sandbox
	deps.Store, deps.Sandbox, deps.Kernels = st, sb, km
	deps.Envs = app.Envs(dataDir, sb, backend, logger)
	resolve, err := o.Egress.resolveMap()
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Config{Version: buildVersion(), EgressCeiling: o.Egress.ceiling,
		EgressMaxBytes: o.Egress.maxBytes, EgressResolve: resolve, EgressCACerts: o.Egress.ca.pem}, deps)
	if err != nil {
		return usageError{err}
	}
	defer srv.Close()
	t := &mcp.IOTransport{Reader: io.NopCloser(s.in), Writer: nopWriteCloser{s.out}}
	if err := srv.Run(ctx, t); err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// nopWriteCloser leaves standard output open when the transport closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
