// Package mcpserver offers codeagent's sandbox, static checker and agent as
// Model Context Protocol tools, built on the official Go SDK: execute_code,
// check_code, run_task, and list_files, read_file and write_file on a
// workspace of each MCP session.
//
// A Server is built from a Config and its dependencies (sandbox, store,
// model, manifest, logger). Run serves one session over a transport
// (`codeagent mcp` uses stdio); Handler serves streamable HTTP for the HTTP
// server to mount behind its API keys. Every argument is validated before
// anything runs, executions are rate limited per MCP session and audited
// like the CLI's, and a session's workspace is removed when it ends.
package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// Config is how a Server behaves. Zero fields take the defaults.
type Config struct {
	// Name and Version identify the server to clients (default codeagent, dev).
	Name, Version string
	// WorkDir holds the sessions' workspaces (default os.TempDir()).
	WorkDir string
	// MaxLimits caps the limits a call may ask for; zero fields take
	// MaxLimits' values. A manifest's tool limits are caps too.
	MaxLimits sandbox.Limits
	// MaxCode bounds code and tests (default 1 MiB); MaxFile one file
	// written or read (default 10 MiB); MaxFiles the files of one call
	// (default 100). A task's text is at most app.MaxTaskLen at every door.
	MaxCode, MaxFile int64
	MaxFiles         int
	// MaxImage bounds one image returned as content (default 2 MiB),
	// MaxImages their number per result (default 8) and MaxImageTotal
	// their total size (default 8 MiB).
	MaxImage, MaxImageTotal int64
	MaxImages               int
	// ExecsPerMinute bounds the executions of each MCP session (default:
	// the manifest's executions_per_minute, or 10).
	ExecsPerMinute int
	// MaxIterations is run_task's default attempt budget (default: the
	// manifest's max_iterations, or 5); calls may ask for at most agent.MaxIterationsCeiling.
	MaxIterations int
	// RunTimeout bounds one run_task (default 30 min).
	RunTimeout time.Duration
	// SessionTimeout closes an idle HTTP session and removes its workspace
	// (default 30 min).
	SessionTimeout time.Duration
	// MaxRequestBody bounds one HTTP request (default 32 MiB).
	MaxRequestBody int64
	// SessionMaxBytes and SessionMaxFiles bound a session's workspace as
	// write_file and the files of execute_code and run_task fill it: the
	// total size of its files and the number of its entries (default
	// 1 GiB and 10 000, as the HTTP API's sessions).
	SessionMaxBytes int64
	SessionMaxFiles int
	// EgressCeiling is the widest network a call's allow_hosts may ask
	// for (see egress.Within); empty, the default, allows no network. A
	// manifest's permissions.network narrows it. EgressMaxBytes caps each
	// execution's bytes (0: sandbox.DefaultEgressBytes); EgressResolve maps
	// names to addresses (tests: --egress-resolve).
	EgressCeiling  []string
	EgressMaxBytes int64
	EgressResolve  map[string]string
	// EgressCACerts are PEM certificates of authorities that programs
	// with a network and installs trust besides the sandbox's own (the
	// operator's --ca-cert; a client cannot add any).
	EgressCACerts []byte
}

func (c Config) withDefaults(m *manifest.Manifest) Config {
	if c.Name == "" {
		c.Name = "codeagent"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.WorkDir == "" {
		c.WorkDir = os.TempDir()
	}
	c.MaxLimits = app.MaxLimits().Overlay(c.MaxLimits)
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64(&c.MaxCode, 1<<20)
	def64(&c.MaxFile, 10<<20)
	def64(&c.MaxImage, 2<<20)
	def64(&c.MaxImageTotal, 8<<20)
	def64(&c.MaxRequestBody, 32<<20)
	def64(&c.SessionMaxBytes, 1<<30)
	def(&c.SessionMaxFiles, 10000)
	def(&c.MaxFiles, 100)
	def(&c.MaxImages, 8)
	if m != nil {
		def(&c.ExecsPerMinute, m.Agent.Limits.ExecutionsPerMinute)
		def(&c.MaxIterations, m.Agent.Limits.MaxIterations)
	}
	def(&c.ExecsPerMinute, 10)
	def(&c.MaxIterations, 5)
	if c.RunTimeout <= 0 {
		c.RunTimeout = 30 * time.Minute
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 30 * time.Minute
	}
	return c
}

// Deps are what a Server works with. Sandbox is required.
type Deps struct {
	// Sandbox runs the programs; the Server does not close it.
	Sandbox sandbox.Sandbox
	// Store receives the audit records; nil means no audit log.
	Store *store.Store
	// Checker is the static checker; nil builds one from the manifest's
	// policy (or the default policy), closed by Close.
	Checker *safety.Checker
	// Model configures run_task's provider; nil means run_task is not
	// offered (ModelError says why, in the log).
	Model      *llm.Config
	ModelError string
	// Manifest, when set, decides which tools and languages are offered,
	// their limits, the policy and the run limits.
	Manifest *manifest.Manifest
	// Secrets are redacted from everything run_task shows.
	Secrets []string
	// Kernels runs execute_code's cells with keep_state, one kernel per
	// MCP session; nil means keep_state is refused. The Server does not
	// close it.
	Kernels *app.Kernels
	// Envs installs and keeps execute_code's dependencies; nil means
	// dependencies are refused.
	Envs   *app.EnvStore
	Logger *slog.Logger
}

// Server is codeagent's MCP server. Create it with New; Close it when done.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	mcp     *mcp.Server
	checker *safety.Checker
	runs    *app.Runs // run_task's runs, with the checkers of programs with and without a network
	langs   []string  // languages execute_code and run_task accept

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*sessionState
	closed   bool
	ended    sync.WaitGroup // session cleanups under way
}

// New builds the MCP server with the tools the manifest allows.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Sandbox == nil {
		return nil, errors.New("mcpserver: a sandbox is required")
	}
	cfg = cfg.withDefaults(deps.Manifest)
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, deps: deps, log: log, sessions: map[*mcp.ServerSession]*sessionState{}}
	policy := func() (*safety.Policy, error) { return app.ManifestPolicy(deps.Manifest) }
	checkers := &app.Checkers{Plain: deps.Checker, Policy: policy}
	if err := checkers.Open(policy); err != nil {
		return nil, err
	}
	s.checker = checkers.Plain
	s.langs = allowedLanguages(deps.Manifest)
	s.runs = &app.Runs{Store: deps.Store, Model: deps.Model, ModelError: deps.ModelError, Secrets: deps.Secrets, Logger: log,
		Checkers: checkers}
	// The workspaces of MCP sessions a dead process left (kill -9).
	if n, err := workspace.SweepTemp(cfg.WorkDir, workspacePrefix); err != nil {
		log.Warn("remove the MCP workspaces of a process that died", "err", err)
	} else if n > 0 {
		log.Info("removed the MCP workspaces of a process that died", "workspaces", n)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Version: cfg.Version}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.mcp.AddReceivingMiddleware(s.recoverPanics)
	if err := s.addTools(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

const instructions = "codeagent runs code in a kernel-enforced sandbox (no network unless a call's allow_hosts names " +
	"hosts within the server's egress ceiling; the session's workspace is " +
	"its working directory), checks code statically, and turns tasks into working code with its agent. " +
	"Files written with write_file or passed in files are in the workspace for later calls of the same session."

// MCP returns the underlying SDK server.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session over t until the client leaves or ctx ends. The
// session's runs are cancelled and its workspace removed before it returns.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	s.endAll()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Close cancels what still runs, waits for it and removes every session's
// workspace. The Server must not be used afterwards.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.endAll()
	s.runs.Checkers.Close()
	return nil
}

// recoverPanics turns a panic in a handler into an internal error, so that
// one bad call never takes the server down.
func (s *Server) recoverPanics(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in MCP handler", "method", method, "panic", p, "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		return next(ctx, method, req)
	}
}
