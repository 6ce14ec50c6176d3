// Package namespace is codeagent's Linux sandbox backend. Each execution gets
// fresh user, PID, mount, network, IPC, UTS and cgroup namespaces, a minimal
// read-only root, a seccomp filter, no capabilities, and memory and process
// limits from a cgroup of its own.
//
// The namespaces and mounts are set up by bubblewrap (bwrap), a small,
// widely audited setuid-free helper from the distribution; this package adds
// the seccomp filter, cgroups, rlimits, output capture, the workspace disk
// watcher and the verdict. docs/ARCHITECTURE.md explains the choice.
package namespace

import "log/slog"

// Config configures the backend.
type Config struct {
	// Bwrap is the path of the bubblewrap binary; empty means "bwrap" from PATH.
	Bwrap string
	// AllowWeakIsolation lets the backend run where a mechanism is missing
	// (no cgroup for memory and process limits while running as root), with
	// rlimits as the only fallback. Off by default: the backend fails closed.
	AllowWeakIsolation bool
	// HostUID is the first of the backendkit.HostUIDCount host uids (and
	// gids) programs run as when codeagent runs as root, one per
	// concurrent sandbox; 0 means 2,000,000,000 (backendkit.DefaultHostUID). No account may
	// use one, nor a subordinate id range overlap them. Run by another
	// user, programs run as that user.
	HostUID int
	// Warm is how many sandboxes to keep started ahead for the command run
	// last (see launcher). 0 starts each on demand, which suits a single
	// execution; long-lived callers such as the agent or a server want 2.
	Warm int
	// WarmPython is the most warm interpreters to keep: sandboxes set up
	// ahead whose python3 has imported pandas, numpy and matplotlib,
	// each used by one Python program and then destroyed (see package
	// internal/warm and warm_linux.go). Only when running as root with
	// cgroups; elsewhere, and for programs that do not fit (another
	// interpreter, command or startup environment, a memory limit under
	// 192 MiB), programs run cold; so do programs whose Spec.Imports say
	// they use only Python's standard library. The pool keeps ready as
	// many as were asked for in the last minute (at least one, at most
	// WarmPython), starts them at the lowest CPU weight, and shrinks back
	// to one when idle. Negative sizes the pool to the machine (one per
	// CPU, within a sixteenth of the available memory). Each costs about
	// 90 MB while it waits.
	WarmPython int
	// PlainWorkspace binds the workspace itself into the sandbox even when
	// codeagent runs as root, as it does for an ordinary user: the disk
	// limit then rests on the disk watcher alone, which reacts to writes
	// instead of refusing them (see docs/ARCHITECTURE.md, "The disk
	// limit"). Off by default: as root the workspace is an overlay whose
	// writes land on a file system of the limit's size.
	PlainWorkspace bool
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
}

// Report is what Probe found out about the host.
type Report struct {
	Bwrap           string   // path of bubblewrap, or "" when missing
	BwrapVersion    string   // e.g. "bubblewrap 0.8.0"
	UserNamespaces  bool     // a sandbox could be created
	CgroupVersion   int      // 1 or 2, 0 when no usable cgroup
	CgroupDetail    string   // why cgroups are not usable, when they are not
	Seccomp         bool     // the kernel supports seccomp filters
	LandlockABI     int      // Landlock ABI version, 0 when unavailable
	Root            bool     // running as root
	MemoryLimit     string   // how memory is limited: "cgroup v1", "cgroup v2", "RLIMIT_DATA"
	ProcessLimit    string   // how processes are limited: "cgroup v1", "cgroup v2", "RLIMIT_NPROC"
	CPULimit        string   // how CPU bandwidth is limited: "cgroup v1", "cgroup v2", or "none"
	ProgramUID      int      // the host uid programs run as (the first of ProgramUIDCount)
	ProgramUIDCount int      // how many host uids programs run as, one per sandbox (1 unprivileged)
	ProgramUIDNote  string   // why that uid
	DiskLimit       string   // how the workspace disk limit is enforced
	Usable          bool     // the backend can run with this Config
	Problems        []string // what prevents running, with what to do
	Warnings        []string // weaker mechanisms in use
}
