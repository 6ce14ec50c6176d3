// Package docker is codeagent's second sandbox backend: one Docker container
// per execution, created through the Docker Engine API, with no network, a
// read-only root, a size-limited /tmp, memory (socket buffers included), CPU
// and process limits, no capabilities, no-new-privileges, a uid no host
// account uses (one per container when codeagent is root), and the
// engine's default seccomp profile with allow lists for socket families,
// the native ABI and file modes.
//
// A warm pool keeps containers started ahead for each limits class, so that
// an execution only pays for an exec into a running container; every
// container serves one execution and is then destroyed. A spec with Binds
// gets a container created for it instead, its directories mounted
// read-only, which no later spec takes. The workspace is staged: copied
// into a host directory that the container has mounted at /workspace, and
// what the program changed is copied back when it ends, with the owners and
// modes package wsperm gives. docs/ARCHITECTURE.md explains the design.
package docker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/hostids"
)

// DefaultImage is the image built by images/build-offline.sh and
// images/Dockerfile.
const DefaultImage = "codeagent-sandbox:latest"

// CodePath is the only directory where Spec.Files may be placed: a
// container's mounts are fixed when it is created, before the files exist.
const CodePath = "/code"

// Config configures the backend.
type Config struct {
	// Image runs the programs; DefaultImage when empty. It needs bash,
	// env and prlimit (coreutils, util-linux) besides the runtimes, and GNU
	// find when codeagent is not root.
	Image string
	// Host is the engine's address (unix:///var/run/docker.sock, ...);
	// empty means DOCKER_HOST or the default socket. The engine must see
	// this host's file system: the workspace is staged through bind mounts.
	Host string
	// Warm is how many idle containers to keep started per limits class;
	// 0 creates each container on demand (cold).
	Warm int
	// IdleTimeout drops the warm containers of a limits class that has not
	// been used for that long; default 10 minutes.
	IdleTimeout time.Duration
	// CheckInterval is how often idle containers are checked and crashed
	// ones replaced; default 10 seconds.
	CheckInterval time.Duration
	// HostUID is the user and group id programs run as, on the host as in
	// the container (the engine maps no ids): 2,000,000,000 (backendkit.DefaultHostUID) when
	// 0. Run by root, it is the first of backendkit.HostUIDCount ids, and
	// each container takes one of its own (package hostids), so that
	// concurrent sandboxes share no per-user kernel quota; run by another
	// user, every container runs as HostUID itself. New refuses ids that
	// an account, group or subordinate range of this host uses.
	HostUID int
	// AllowWeakIsolation runs programs even where a limit cannot be
	// enforced: on cgroup v1 without root, socket buffers are not limited.
	AllowWeakIsolation bool
	// StateDir holds the staging directories; default os.TempDir().
	StateDir string
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
	// PlainStaging stages workspaces in plain directories even where each
	// could have a file system of its own, of the disk limit's size (which
	// needs root, loop devices and mke2fs; see stagingfs_linux.go).
	PlainStaging bool
}

// Backend runs programs in Docker containers.
type Backend struct {
	cfg   Config
	log   *slog.Logger
	cli   *client.Client
	ids   *hostids.Pool // the host uids of containers, when root; nil: every one runs as cfg.HostUID
	root  bool          // codeagent runs as root: staged files are given to the uid
	v1    bool          // the engine uses cgroup v1, where socket memory needs its own limit
	owner string        // io.codeagent.owner of everything this backend creates
	pool  *pool
	// remove removes a container (removeContainer; tests make it fail).
	remove func(ctx context.Context, id string) error

	weakOnce sync.Once // warns once of weak isolation
	// staging: boxes get staging file systems (see stagingfs_linux.go).
	staging atomic.Bool
	trust   *backendkit.ImageTrust // what the image trusts, learnt once
}

var _ sandbox.Sandbox = (*Backend)(nil)

// apiTimeout bounds each engine call outside of a program's run.
const apiTimeout = 30 * time.Second

// New connects to the engine, checks the image, removes leftovers of
// earlier crashed processes and starts the warm pool. It returns a
// *sandbox.SetupError when no engine answers or the image is missing.
func New(cfg Config) (*Backend, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 10 * time.Second
	}
	if cfg.HostUID == 0 {
		cfg.HostUID = backendkit.DefaultHostUID
	}
	root := os.Geteuid() == 0
	var ids *hostids.Pool
	if root {
		err := backendkit.CheckHostUIDRange(cfg.HostUID, backendkit.HostUIDCount)
		if err == nil {
			ids, err = hostids.Open(hostids.Dir, cfg.HostUID, backendkit.HostUIDCount)
		}
		if err != nil {
			return nil, &sandbox.SetupError{Reason: "docker host uids", Err: err}
		}
	} else if err := backendkit.CheckHostUID(cfg.HostUID); err != nil {
		return nil, &sandbox.SetupError{Reason: "docker host uid", Err: err}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = os.TempDir()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli, err := Connect(cfg.Host)
	if err != nil {
		return nil, &sandbox.SetupError{Reason: "Docker client", Err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := Ping(ctx, cli); err != nil {
		_ = cli.Close()
		return nil, &sandbox.SetupError{Reason: "no Docker engine reachable (start one with scripts/start-dockerd.sh, or set DOCKER_HOST)", Err: err}
	}
	if _, err := cli.ImageInspect(ctx, cfg.Image); err != nil {
		_ = cli.Close()
		return nil, &sandbox.SetupError{Reason: fmt.Sprintf("image %s not found (build it with images/build-offline.sh, or docker build -t %s images/)", cfg.Image, cfg.Image), Err: err}
	}
	if !Local(cfg.Host) {
		log.Warn("docker: the engine looks remote; workspaces are staged through bind mounts of this host's directories, which it may not see", "host", cli.DaemonHost())
	}
	b := &Backend{cfg: cfg, log: log, cli: cli, owner: ownerID(), root: root, ids: ids, trust: &backendkit.ImageTrust{Image: cfg.Image}}
	b.remove = b.removeContainer
	if b.v1, err = socketMemoryCharged(ctx, cli, cfg.Host); err != nil {
		_ = cli.Close()
		return nil, &sandbox.SetupError{Reason: "socket memory", Err: err}
	}
	b.useStagingFS()
	if n, err := b.sweep(ctx); err != nil {
		log.Warn("docker: removing leftovers of earlier runs", "err", err)
	} else if n > 0 {
		log.Info("docker: removed leftovers of earlier runs", "containers", n)
	}
	p, err := newPool(b)
	if err != nil {
		_ = cli.Close()
		return nil, &sandbox.SetupError{Reason: "state directory", Err: err}
	}
	b.pool = p
	if cfg.Warm > 0 {
		p.prime(classOf(sandbox.DefaultLimits(), cfg))
	}
	return b, nil
}

// Connect returns a client for the engine at host ("" for DOCKER_HOST or
// the default socket), negotiating the API version on first use.
func Connect(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	return client.New(opts...)
}

// Ping checks that the engine answers.
func Ping(ctx context.Context, cli *client.Client) error {
	_, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return fmt.Errorf("ping %s: %w", cli.DaemonHost(), err)
	}
	return nil
}

// Close removes every container and directory the backend created and
// waits for its background work. Run must not be called after it.
func (b *Backend) Close() error {
	err := b.pool.close()
	if cerr := b.cli.Close(); err == nil {
		err = cerr
	}
	return err
}

// TrustStore implements sandbox.Truster: the image's bundle, read in a
// container once.
func (b *Backend) TrustStore(ctx context.Context) (sandbox.TrustStore, error) {
	return b.trust.Get(ctx, b.Run)
}

// Run implements sandbox.Sandbox.
func (b *Backend) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return backendkit.RunChecked(ctx, spec, "docker", validate, b.execute)
}

func validate(spec sandbox.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	for _, f := range spec.Files {
		if !strings.HasPrefix(f.Path, CodePath+"/") {
			return fmt.Errorf("%w: file path %q: the docker backend places files under %s/ only", sandbox.ErrInvalidSpec, f.Path, CodePath)
		}
	}
	return nil
}

// Local reports whether host (as in Config.Host, or DOCKER_HOST when empty)
// is an engine on this machine, whose bind mounts see our files.
func Local(host string) bool {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		return true
	}
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	return u.Scheme == "unix" || u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1"
}

// writeFiles places spec's files in dir, the host side of CodePath.
func writeFiles(dir string, files []sandbox.File) error {
	for _, f := range files {
		p := filepath.Join(dir, strings.TrimPrefix(f.Path, CodePath+"/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("place %s: %w", f.Path, err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return fmt.Errorf("place %s: %w", f.Path, err)
		}
	}
	return nil
}

// StagingDir is the host directory that holds the staging directories of
// this backend's containers; the conformance suite measures it.
func (b *Backend) StagingDir() string { return b.pool.dir }
