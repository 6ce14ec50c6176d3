// Package server is codeagent's HTTP API and web page: sessions with their
// workspace files, agent runs streamed as Server-Sent Events, one-shot
// executions in the sandbox, health and Prometheus metrics.
//
// A Server is built from a Config and its dependencies (store, sandbox,
// model, logger); Handler returns the http.Handler to serve. Every request
// is authenticated by API key or the local token (or belongs to the
// anonymous owner when neither is configured), rate limited per key,
// bounded in body size and time, and logged without secrets; a panic
// becomes a 500.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// Config is how a Server behaves. Zero fields take the defaults.
type Config struct {
	// DataDir holds the workspaces of API sessions, under DataDir/server.
	DataDir string
	// Keys are the API keys; empty means a single anonymous owner (only
	// sensible on a loopback address, which cmd/codeagent enforces).
	Keys Keys
	// LocalToken, on a server without Keys, is the anonymous owner's
	// token, required of every API request (what `codeagent serve` makes
	// at start): as Authorization: Bearer TOKEN, or as the cookie the page
	// gets by opening TokenURL (see auth.go). Empty, with no Keys, anyone
	// who reaches the server may use it (serve --no-token).
	LocalToken string
	// AllowedHosts are names besides its own address under which clients
	// reach the server (a reverse proxy's public name): host or host:port,
	// a host without a port matching any port. Requests whose Host, or
	// browser requests whose Origin, names anything else are refused (see
	// guard.go).
	AllowedHosts []string
	// MaxBody bounds JSON request bodies (default 1 MiB); MaxExecBody the
	// body of /v1/exec with its files (default 16 MiB); MaxUpload one
	// uploaded file (default 100 MiB).
	MaxBody, MaxExecBody, MaxUpload int64
	// MaxUploadFiles bounds the files of one upload request (default
	// 100); SessionMaxBytes and SessionMaxFiles a session's workspace: the
	// total size of its files and the number of its entries (default
	// 1 GiB and 10 000). Uploads beyond them are refused with 413 and
	// store nothing.
	MaxUploadFiles  int
	SessionMaxBytes int64
	SessionMaxFiles int
	// Workers is how many executions run at once (default 2 × CPUs);
	// QueueLength how many more may wait (default 4 × Workers). A full
	// queue answers 429 with Retry-After.
	Workers, QueueLength int
	// RatePerSecond and RateBurst bound each key's requests (default 20
	// and 100).
	RatePerSecond float64
	RateBurst     int
	// ExecMaxLimits caps what a /v1/exec request may ask for; zero fields
	// take MaxLimits' values. Runs use the sandbox defaults.
	ExecMaxLimits sandbox.Limits
	// RequestTimeout bounds an ordinary request (default 30 s);
	// UploadTimeout an upload (default 10 min); RunTimeout an agent run
	// (default 30 min).
	RequestTimeout, UploadTimeout, RunTimeout time.Duration
	// RunExecsPerMinute bounds a run's executions, as in `codeagent run`
	// (default 10, see sandbox/ratelimit).
	RunExecsPerMinute int
	// MaxIterations is a run's default attempt budget (default 5).
	MaxIterations int
	// KernelLimits bound each session's kernel over its life (zero
	// fields take the kernel package's DefaultLimits); MaxKernels caps the live
	// kernels (default 4 per CPU: then the least recently used idle one is
	// evicted, and with none idle a cell gets 429); KernelIdleTimeout ends
	// an idle kernel (default 10 min).
	KernelLimits      sandbox.Limits
	MaxKernels        int
	KernelIdleTimeout time.Duration
	// Backend names the sandbox backend, whose interpreter dependency
	// environments are built for ("" is the namespace backend).
	Backend string
	// EgressCeiling is the widest network a request may ask for: every
	// host of a /v1/exec request's or a run's network.allow must be within
	// it (see egress.Within). Empty, the default, allows no network.
	EgressCeiling []string
	// EgressMaxBytes caps a request's network.max_bytes (default
	// sandbox.DefaultEgressBytes); EgressResolve maps names to addresses
	// for every network (tests: serve --egress-resolve).
	EgressMaxBytes int64
	EgressResolve  map[string]string
	// EgressCACerts are PEM certificates of authorities that every
	// program with a network and every install trusts besides the
	// sandbox's own (serve --ca-cert): the operator's; a client cannot
	// add any.
	EgressCACerts []byte
	// ApprovalTimeout is how long an approval of a run started with
	// "approve" waits for its decision before it expires as a rejection
	// (default 10 min).
	ApprovalTimeout time.Duration
}

// The defaults of the upload cap and the session quotas.
const (
	DefaultMaxUploadFiles  = 100
	DefaultSessionMaxBytes = 1 << 30
	DefaultSessionMaxFiles = 10000
)

// Validate checks what withDefaults cannot repair: negative sizes and
// counts, and allowed hosts that are not host[:port].
func (c Config) Validate() error {
	for _, v := range []struct {
		name string
		v    int64
	}{{"MaxBody", c.MaxBody}, {"MaxExecBody", c.MaxExecBody}, {"MaxUpload", c.MaxUpload},
		{"MaxUploadFiles", int64(c.MaxUploadFiles)}, {"SessionMaxBytes", c.SessionMaxBytes},
		{"SessionMaxFiles", int64(c.SessionMaxFiles)}, {"Workers", int64(c.Workers)}, {"QueueLength", int64(c.QueueLength)}} {
		if v.v < 0 {
			return fmt.Errorf("server: %s must not be negative", v.name)
		}
	}
	if c.LocalToken != "" && len(c.Keys) > 0 {
		return errors.New("server: a local token is for a server without API keys")
	}
	if c.LocalToken != "" && !localToken.MatchString(c.LocalToken) {
		return errors.New("server: the local token must be 32 to 256 letters, digits, '-' or '_'")
	}
	for _, h := range c.AllowedHosts {
		if err := validAllowedHost(h); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	if err := app.CheckCeiling(c.EgressCeiling); err != nil {
		return fmt.Errorf("server: egress ceiling: %w", err)
	}
	if c.EgressMaxBytes < 0 {
		return errors.New("server: EgressMaxBytes must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxBody, 1<<20)
	def(&c.MaxExecBody, 16<<20)
	def(&c.MaxUpload, 100<<20)
	def(&c.SessionMaxBytes, DefaultSessionMaxBytes)
	if c.MaxUploadFiles <= 0 {
		c.MaxUploadFiles = DefaultMaxUploadFiles
	}
	if c.SessionMaxFiles <= 0 {
		c.SessionMaxFiles = DefaultSessionMaxFiles
	}
	c.Workers, c.QueueLength = app.QueueSize(c.Workers, c.QueueLength)
	if c.RatePerSecond <= 0 {
		c.RatePerSecond = 20
	}
	if c.RateBurst <= 0 {
		c.RateBurst = 100
	}
	c.ExecMaxLimits = app.MaxLimits().Overlay(c.ExecMaxLimits)
	durs := []struct {
		v *time.Duration
		d time.Duration
	}{{&c.RequestTimeout, 30 * time.Second}, {&c.UploadTimeout, 10 * time.Minute}, {&c.RunTimeout, 30 * time.Minute},
		{&c.ApprovalTimeout, 10 * time.Minute}}
	for _, x := range durs {
		if *x.v <= 0 {
			*x.v = x.d
		}
	}
	if c.MaxIterations <= 0 {
		c.MaxIterations = 5
	}
	if c.EgressMaxBytes == 0 {
		c.EgressMaxBytes = sandbox.DefaultEgressBytes
	}
	return c
}

// Deps are what a Server works with. Store and Sandbox are required.
type Deps struct {
	Store   *store.Store
	Sandbox sandbox.Sandbox
	// Checker is the static checker of runs; nil builds one with the
	// default policy. NetChecker checks runs with a network; nil builds one
	// from Policy (nil: the default) with HTTP clients allowed.
	Checker    *safety.Checker
	NetChecker *safety.Checker
	Policy     *safety.Policy
	// Model configures the provider of runs; nil means no model, and runs
	// then fail at once with ModelError in their done event.
	Model      *llm.Config
	ModelError string
	// Review is the reviewer model's endpoint and key (app.ResolveReview):
	// a run is reviewed when it or Review names a model. Nil: runs cannot
	// be reviewed.
	Review *llm.Config
	// Secrets are redacted from everything a run shows (API keys).
	Secrets []string
	// MCP, when set, is served at /mcp behind the same keys; MCP sessions
	// are owned by the key that opened them.
	MCP MCPHandler
	// Kernels runs the sessions' kernels; nil makes them from the Config,
	// under Executions (closed by Shutdown). Share them with MCP so that
	// one cap and one queue hold.
	Kernels *app.Kernels
	// Executions are the Sandbox under the execution queue; nil makes them
	// from the Config's Workers and QueueLength. Share them with MCP (its
	// Sandbox from Executions.Sandbox) so that one queue and one set of
	// metrics hold for every door; Shutdown closes their queue.
	Executions *app.Executions
	Logger     *slog.Logger
}

// MCPHandler is an MCP server to serve at /mcp (mcpserver.Server): its
// HTTP handler, with owner naming the API key of each request.
type MCPHandler interface {
	HandlerWithOwner(owner func(*http.Request) string) http.Handler
}

// Server serves the API and the page. Create it with New.
type Server struct {
	cfg        Config
	deps       Deps
	log        *slog.Logger
	auth       *authenticator
	executions *app.Executions
	envs       *app.EnvStore // dependency environments (docs/DEPENDENCIES.md)
	metrics    *Metrics
	runs       *runRegistry
	// uploadLocks gives each session's uploads their turn (quotas).
	uploadLocks sessionLocks
	agents      *app.Runs // the agent runs' assembly, with the checkers of runs with and without a network
	kernels     *app.Kernels
	redact      *app.Redactor // secrets out of the cells kept (the runs' secrets)
	ownKernels  bool
	handler     http.Handler

	// ctx is cancelled by Shutdown, with errShuttingDown as its cause;
	// runs derive from it.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	mu       sync.Mutex
	draining bool          // set by Shutdown: no new executions or runs
	execs    int           // executions of /v1/exec under way
	idle     chan struct{} // closed when draining and execs reaches 0
}

// New returns a Server. It fails only when the default checker cannot be
// built.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Store == nil || deps.Sandbox == nil {
		return nil, errors.New("server: a store and a sandbox are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// Resolved once ("" is the working directory): the sessions'
	// workspaces are created beneath it without following links.
	dataDir, err := workspace.MkdirAll(cfg.DataDir, 0o700)
	if err != nil {
		return nil, fmt.Errorf("server: data directory %s: %w", cfg.DataDir, err)
	}
	cfg.DataDir = dataDir
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, deps: deps, log: log}
	checkers := &app.Checkers{Plain: deps.Checker, Net: deps.NetChecker, Policy: func() (*safety.Policy, error) { return deps.Policy, nil }}
	if err := checkers.Open(nil); err != nil {
		return nil, fmt.Errorf("server: checker: %w", err)
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.idle = make(chan struct{})
	s.metrics = newMetrics()
	if s.executions = deps.Executions; s.executions == nil {
		s.executions = app.NewExecutions(deps.Sandbox, cfg.Workers, cfg.QueueLength)
	}
	s.envs = app.Envs(cfg.DataDir, s.executions.Sandbox("install", true), cfg.Backend, log)
	keys := cfg.Keys
	if cfg.LocalToken != "" {
		keys = Keys{{Name: Anonymous, Token: cfg.LocalToken}}
	}
	s.auth = newAuthenticator(keys, cfg.RatePerSecond, cfg.RateBurst)
	s.runs = newRunRegistry()
	secrets := append([]string{}, deps.Secrets...)
	for _, k := range keys { // the API keys' tokens, or the local token
		secrets = append(secrets, k.Token)
	}
	if deps.Review != nil && deps.Review.APIKey != "" {
		secrets = append(secrets, deps.Review.APIKey)
	}
	modelError := "start codeagent serve with --base-url and --model (or --provider and an API key)"
	if deps.ModelError != "" {
		modelError += ": " + deps.ModelError
	}
	kept := secrets
	if deps.Model != nil {
		kept = append([]string{deps.Model.APIKey}, secrets...)
	}
	s.redact = app.NewRedactor(kept...)
	s.agents = &app.Runs{Store: deps.Store, Model: deps.Model, ModelError: modelError, Secrets: secrets, Logger: log,
		Checkers: checkers}
	if s.kernels = deps.Kernels; s.kernels == nil {
		s.kernels = app.NewKernels(cfg.kernelsConfig(deps.Sandbox, log), s.executions)
		s.ownKernels = true
	}
	s.recover()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// workspaceDir is where an owner's session keeps its files.
func (s *Server) workspaceDir(owner, id string) string {
	return filepath.Join(s.cfg.DataDir, s.workspaceRel(owner, id))
}

func (s *Server) workspaceRel(owner, id string) string {
	return path.Join("server", owner, id, "workspace")
}

// sessionWorkspace creates or opens a session's workspace beneath the data
// directory without following any link: each component is the server's
// own, so a link there was planted (by a program whose workspace held the
// data directory) and is refused.
func (s *Server) sessionWorkspace(owner, id string) (*workspace.Workspace, error) {
	return workspace.NewBeneath(s.cfg.DataDir, s.workspaceRel(owner, id))
}

// Shutdown drains the server: executions waiting in the queue are
// refused (503), agent runs are canceled at once with the shutdown as
// their recorded cause (each sends its done event to its streams), and
// executions of /v1/exec under way may finish until ctx ends. The caller
// stops the HTTP server from accepting first (http.Server.Shutdown, which
// then waits for the handlers) and closes the sandbox after.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		if s.execs == 0 {
			close(s.idle)
		}
	}
	s.mu.Unlock()
	s.executions.Queue().Close(errDraining)
	s.cancel(errShuttingDown)
	runs := make(chan struct{})
	go func() {
		s.runs.wait()
		close(runs)
	}()
	for _, c := range []<-chan struct{}{runs, s.idle} {
		select {
		case <-c:
		case <-ctx.Done():
			return fmt.Errorf("server: shutdown: %w", ctx.Err())
		}
	}
	if s.ownKernels {
		s.kernels.Close()
	}
	s.agents.Checkers.Close()
	return nil
}

// beginExec counts an execution of /v1/exec, or refuses it when the
// server is shutting down.
func (s *Server) beginExec() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return errDraining
	}
	s.execs++
	return nil
}

func (s *Server) endExec() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs--; s.execs == 0 && s.draining {
		close(s.idle)
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}
