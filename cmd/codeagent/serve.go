package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/server"
)

// envAPIKeys holds comma-separated name:token API keys for serve.
const envAPIKeys = "CODEAGENT_API_KEYS"

// serveOptions are the inputs of `codeagent serve`.
type serveOptions struct {
	Addr            string
	AllowedHosts    []string
	DataDir         string
	KeysFile        string
	NoToken         bool
	MaxUpload       int64
	MaxUploadFiles  int
	SessionMaxBytes int64
	SessionMaxFiles int
	Workers         int
	Queue           int
	Rate            float64
	Warm            int
	WarmPython      int
	MaxKernels      int
	KernelIdle      time.Duration
	KernelMemory    int64
	Backend         string
	AllowWeak       bool
	ShutdownTimeout time.Duration
	ApprovalTimeout time.Duration
	Provider        *providerFlags
	Review          *reviewFlags
	Egress          ceilingFlags
	Backends        *backendFlags
	Getenv          func(string) string
}

func cmdServe(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("serve", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent serve [flags]\n\nServe the HTTP API (/v1, described at /v1/openapi.yaml) and the web page (/).\nAPI keys (name:token) come from --keys-file and "+envAPIKeys+". Without keys the\nserver listens only on a loopback address and makes a token at each start, which every\nrequest needs: it prints the page's address with the token, and keeps the token in\nDATA/"+tokenFileName+" (mode 0600) for programs: curl -H \"Authorization: Bearer $(cat DATA/"+tokenFileName+")\".\n"+
			"Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 2 for usage or configuration errors,\n"+
			"125 when the sandbox could not be set up, 1 otherwise; HTTP statuses: docs/SERVER.md#errors.\n\nflags:")
		printFlags(fs)
	}
	o := serveOptions{Getenv: os.Getenv, MaxUpload: 100 << 20, SessionMaxBytes: server.DefaultSessionMaxBytes}
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.Func("allowed-hosts", "names besides its address under which clients reach the server, e.g. a reverse proxy's\n"+
		"public name: host or host:port, comma-separated; other Host and Origin headers are refused", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				o.AllowedHosts = append(o.AllowedHosts, h)
			}
		}
		return nil
	})
	fs.StringVar(&o.DataDir, "data-dir", "", "data directory for sessions and the audit log (default $XDG_DATA_HOME/codeagent)")
	fs.StringVar(&o.KeysFile, "keys-file", "", "API keys: one name:token per line, or JSON {\"name\": \"token\"}")
	fs.BoolVar(&o.NoToken, "no-token", false, "without API keys, make no token: then any user or program of this machine may use the\n"+
		"server (read every session's files, run code); only for a single-user machine")
	sizeVar(fs, &o.MaxUpload, "max-upload", boundUpload, "largest uploaded file")
	fs.IntVar(&o.MaxUploadFiles, "max-upload-files", server.DefaultMaxUploadFiles, "most files in one upload request")
	sizeVar(fs, &o.SessionMaxBytes, "session-max-size", boundUpload, "largest total size of a session's workspace, API and MCP")
	fs.IntVar(&o.SessionMaxFiles, "session-max-files", server.DefaultSessionMaxFiles, "most files and directories in a session's workspace, API and MCP")
	fs.IntVar(&o.Workers, "workers", 0, "executions at once (default 2 × CPUs)")
	fs.IntVar(&o.Queue, "queue", 0, "executions that may wait for a worker before 429 (default 4 × workers)")
	fs.Float64Var(&o.Rate, "rate", 20, "requests per second per API key (bursts of 5 s)")
	fs.IntVar(&o.Warm, "warm", 2, "sandboxes kept started ahead")
	fs.IntVar(&o.WarmPython, "warm-python", -1, "most warm interpreters kept (Python with pandas, numpy and matplotlib imported), as many as the\n"+
		"last minute asked for, at least 1 (namespace backend as root; about 90 MB each; -1: one per CPU\n"+
		"within 1/16 of the available memory)")
	fs.IntVar(&o.MaxKernels, "max-kernels", 0, "live kernels at most, then the least recently used idle one ends (default 4 × CPUs)")
	durationVar(fs, &o.KernelIdle, "kernel-idle-timeout", kernel.DefaultIdleTimeout, boundProgramTime, "end a kernel that ran no cell for this long")
	sizeVar(fs, &o.KernelMemory, "kernel-memory", boundMemory, "memory limit of each kernel over its life (default 512MiB)")
	o.Backends = addSandboxFlags(fs, &o.Backend, &o.AllowWeak)
	durationVar(fs, &o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, boundShutdown, "how long running executions may take to finish at shutdown")
	durationVar(fs, &o.ApprovalTimeout, "approval-timeout", 10*time.Minute, boundApproval,
		"how long a run waits for an approval, then rejects the program")
	o.Provider = addProviderFlags(fs)
	o.Review = addReviewFlags(fs)
	o.Egress.register(fs)
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	if err := serve(ctx, o, s); err != nil {
		return exitCodeFor(s.err, err)
	}
	return exitOK
}

// loadKeys reads the keys of --keys-file and the environment.
func loadKeys(file string, getenv func(string) string) (server.Keys, error) {
	var keys server.Keys
	if file != "" {
		b, err := readSmallFile(file, 1<<20)
		if err != nil {
			return nil, usagef("--keys-file: %w", err)
		}
		if keys, err = server.ParseKeys(b); err != nil {
			return nil, usagef("--keys-file %s: %w", file, err)
		}
	}
	if v := getenv(envAPIKeys); v != "" {
		env, err := server.ParseKeysEnv(v)
		if err != nil {
			return nil, usagef("%s: %w", envAPIKeys, err)
		}
		keys = append(keys, env...)
	}
	if err := keys.Validate(); err != nil {
		return nil, usageError{err}
	}
	return keys, nil
}

// isLoopback reports whether addr (host:port) listens only on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serve(ctx context.Context, o serveOptions, s stdio) error {
	if _, err := o.Egress.resolveMap(); err != nil {
		return err // before the data directory is locked
	}
	keys, token, err := serveAuth(o)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.Getenv("CODEAGENT_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
	dataDir, err := resolveDataDir(o.DataDir, o.Getenv)
	if err != nil {
		return err
	}
	lock, err := lockServe(dataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	scfg, err := serveConfig(o, dataDir, keys, token)
	if err != nil {
		return err
	}
	deps, err := serveModels(o, logger)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	sb, err := openBackend(o.Backend, o.Backends.options(backends.Options{AllowWeakIsolation: o.AllowWeak, Warm: o.Warm,
		WarmPython: o.WarmPython, Logger: logger}))
	if errors.Is(err, backends.ErrUnknown) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer sb.Close() // removes the sandboxes started ahead
	// One execution queue and one set of metrics for the API, its runs and
	// cells, and MCP at /mcp (the order of sandbox.Stack).
	execs := app.NewExecutions(sb, scfg.Workers, scfg.QueueLength)
	deps.Store, deps.Sandbox, deps.Executions = st, sb, execs
	// One set of kernels for the API and MCP, under one cap; ended after
	// the servers, before the sandbox.
	deps.Kernels = app.NewKernels(app.KernelsConfig{Sandbox: sb, Limits: scfg.KernelLimits,
		Max: scfg.MaxKernels, IdleTimeout: scfg.KernelIdleTimeout, Logger: logger}, execs)
	defer deps.Kernels.Close()
	mcpSrv, err := mcpserver.New(mcpserver.Config{Version: buildVersion(), SessionMaxBytes: o.SessionMaxBytes,
		SessionMaxFiles: o.SessionMaxFiles, EgressCeiling: scfg.EgressCeiling, EgressMaxBytes: scfg.EgressMaxBytes,
		EgressResolve: scfg.EgressResolve, EgressCACerts: scfg.EgressCACerts}, mcpserver.Deps{Sandbox: execs.Sandbox("mcp", true), Store: st,
		Model: deps.Model, ModelError: deps.ModelError, Secrets: deps.Secrets, Logger: logger, Kernels: deps.Kernels,
		Envs: app.Envs(dataDir, execs.Sandbox("install", true), o.Backend, logger)})
	if err != nil {
		return err
	}
	defer mcpSrv.Close() // before sb.Close: its sessions' workspaces and runs go first
	deps.MCP = mcpSrv
	srv, err := server.New(scfg, deps)
	if err != nil {
		return err
	}
	return listenAndServe(ctx, o, s, serving{srv: srv, mcp: mcpSrv, lock: lock, logger: logger, dataDir: dataDir, keys: len(keys), token: token})
}

// serveAuth checks how clients are to authenticate: API keys (required
// beyond loopback), or else a token made now unless --no-token.
func serveAuth(o serveOptions) (keys server.Keys, token string, err error) {
	if keys, err = loadKeys(o.KeysFile, o.Getenv); err != nil {
		return nil, "", err
	}
	if len(keys) == 0 && !isLoopback(o.Addr) {
		return nil, "", usagef("refusing to listen on %s without API keys: give --keys-file or %s (name:token), or listen on 127.0.0.1", o.Addr, envAPIKeys)
	}
	if o.NoToken && len(keys) > 0 {
		return nil, "", usagef("--no-token is for a server without API keys")
	}
	if len(keys) == 0 && !o.NoToken {
		if token, err = newToken(); err != nil {
			return nil, "", err
		}
	}
	return keys, token, nil
}

// serveConfig is the server's configuration from the flags, validated.
func serveConfig(o serveOptions, dataDir string, keys server.Keys, token string) (server.Config, error) {
	scfg := server.Config{DataDir: dataDir, Keys: keys, LocalToken: token, AllowedHosts: o.AllowedHosts, MaxUpload: o.MaxUpload,
		MaxUploadFiles: o.MaxUploadFiles, SessionMaxBytes: o.SessionMaxBytes, SessionMaxFiles: o.SessionMaxFiles,
		Workers: o.Workers, QueueLength: o.Queue, RatePerSecond: o.Rate, RateBurst: max(1, int(o.Rate*5)),
		KernelLimits: sandbox.Limits{Memory: o.KernelMemory}, MaxKernels: o.MaxKernels, KernelIdleTimeout: o.KernelIdle,
		EgressCeiling: o.Egress.ceiling, EgressMaxBytes: o.Egress.maxBytes, EgressCACerts: o.Egress.ca.pem, Backend: o.Backend,
		ApprovalTimeout: o.ApprovalTimeout}
	var err error
	if scfg.EgressResolve, err = o.Egress.resolveMap(); err != nil {
		return scfg, err
	}
	if err := scfg.Validate(); err != nil {
		return scfg, usageError{err}
	}
	return scfg, nil
}

// serveModels resolves the model and the reviewer. A server without a
// usable model still starts (its runs fail, saying why); a bad reviewer
// setting is an error.
func serveModels(o serveOptions, logger *slog.Logger) (server.Deps, error) {
	deps := server.Deps{Logger: logger}
	if cfg, err := o.Provider.resolve(o.Getenv); err != nil {
		deps.ModelError = err.Error()
		logger.Warn("no usable model: runs will fail until one is configured", "err", err)
	} else {
		deps.Model = &cfg
		deps.Secrets = []string{o.Getenv(llm.EnvOpenAIKey), o.Getenv(llm.EnvAnthropicKey)}
		logger.Info("model", "provider", describeProvider(cfg))
	}
	var err error
	if deps.Review, err = o.Review.resolve(deps.Model, o.Getenv); err != nil {
		return deps, err
	}
	if deps.Review != nil && deps.Review.Model != "" {
		logger.Info("reviewer", "provider", describeProvider(*deps.Review))
	}
	return deps, nil
}

// serving is what listenAndServe serves and says.
type serving struct {
	srv     *server.Server
	mcp     *mcpserver.Server
	lock    *serveLock
	logger  *slog.Logger
	dataDir string
	keys    int
	token   string
}

// listenAndServe listens on o.Addr, says where and how to authenticate
// (writing the token file, removed at the end), serves until ctx ends and
// then shuts down, letting executions finish for o.ShutdownTimeout.
func listenAndServe(ctx context.Context, o serveOptions, s stdio, v serving) error {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return usagef("listen: %w", err)
	}
	hs := &http.Server{Handler: v.srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(v.logger.Handler(), slog.LevelWarn)}
	tokenFile := filepath.Join(v.dataDir, tokenFileName)
	auth := "no API keys and no token (--no-token): any local user or program may use it"
	switch {
	case v.keys > 0:
		auth = fmt.Sprintf("%d API key(s)", v.keys)
	case v.token != "":
		if err := writeTokenFile(tokenFile, v.token); err != nil {
			ln.Close()
			return err
		}
		defer removeTokenFile(tokenFile, v.token)
		auth = "a token made at this start, in " + tokenFile
	}
	base := "http://" + ln.Addr().String()
	v.lock.note("pid %d, listening on %s", os.Getpid(), base)
	fmt.Fprintf(s.err, "codeagent serve: listening on %s (%s; data in %s)\n", base, auth, v.dataDir)
	if v.token != "" {
		fmt.Fprintf(s.err, "codeagent serve: open %s  (programs: curl -H \"Authorization: Bearer $(cat %s)\" %s/v1/...)\n",
			server.TokenURL(base, v.token), shellWord(tokenFile), base)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	v.logger.Info("shutting down: letting executions finish", "timeout", o.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	httpDone := make(chan error, 1)
	_ = v.mcp.Close() // ends MCP streams, which would hold Shutdown until its timeout
	go func() { httpDone <- hs.Shutdown(sctx) }()
	serr := v.srv.Shutdown(sctx)
	if herr := <-httpDone; herr != nil {
		_ = hs.Close()
		serr = errors.Join(serr, herr)
	}
	if serr != nil {
		v.logger.Warn("shutdown incomplete: stopped what was still running", "err", serr)
	}
	return nil
}

// boundApproval bounds --approval-timeout.
var boundApproval = durationBounds{min: time.Second, max: 24 * time.Hour}

// tokenFileName is the file of the data directory holding the token of a
// server without API keys while it runs.
const tokenFileName = "serve-token"

// newToken makes the token of a server without API keys: 32 random bytes
// in hex. A new one at each start, as Jupyter does: a token that leaked
// (a screenshot, a shell history, a browser's history) dies with the
// server, and programs read the current one from the token file.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeTokenFile puts token in path, readable only by this user: it is
// written to a new file (O_EXCL, mode 0600) renamed over path, so whatever
// was planted at path (a symbolic link, a hard link to another file) is
// replaced, never followed or written through, and a reader never sees
// half a token.
func writeTokenFile(path, token string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+tokenFileName+"-*")
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	tmp := f.Name()
	if err = f.Chmod(0o600); err == nil {
		_, err = f.WriteString(token)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}

// removeTokenFile removes the token file at shutdown, unless it is no
// longer this server's (another server of the same data directory
// replaced it).
func removeTokenFile(path, token string) {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return
	}
	if b, err := readSmallFile(path, 1024); err == nil && string(b) == token {
		os.Remove(path)
	}
}

var plainWord = lazyre.New(`^[A-Za-z0-9_./+:@%=-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
