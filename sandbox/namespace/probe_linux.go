//go:build linux && (amd64 || arm64)

package namespace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
)

// Probe finds out which isolation mechanisms this host offers and whether
// the backend can run with cfg. It starts one trivial bubblewrap sandbox;
// New does not (see probe).
func Probe(cfg Config) Report {
	r, _ := probe(cfg, true)
	return r
}

// probe is Probe; with full false it starts no process (no bwrap --version,
// no trial sandbox), so that a one-shot `codeagent exec` pays nothing for
// it: the first real sandbox is the trial, and a failure to set it up is
// explained then (see explainSetup). It returns the cgroup manager it
// found, so that cgroups are detected once.
func probe(cfg Config, full bool) (Report, cgroupManager) {
	var r Report
	r.Root = os.Geteuid() == 0
	asUID := -1
	if r.Root {
		asUID = programHostUID(cfg)
		r.ProgramUID, r.ProgramUIDCount = asUID, backendkit.HostUIDCount
		r.ProgramUIDNote = "codeagent's own, one per sandbox, used by no account"
		if err := backendkit.CheckHostUIDRange(asUID, backendkit.HostUIDCount); err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	} else {
		r.ProgramUID = os.Getuid()
		r.ProgramUIDNote = "yours: codeagent runs as you"
	}
	r.Bwrap = cfg.Bwrap
	if r.Bwrap == "" {
		r.Bwrap, _ = exec.LookPath("bwrap")
	}
	if r.Bwrap == "" {
		r.Problems = append(r.Problems, "bubblewrap is not installed: install it with 'apt-get install bubblewrap'")
	} else if full {
		if out, err := exec.Command(r.Bwrap, "--version").Output(); err == nil {
			r.BwrapVersion = strings.TrimSpace(string(out))
		}
		if err := tryNamespaces(r.Bwrap, asUID); err != nil {
			r.Problems = append(r.Problems, "cannot create namespaces: "+err.Error()+userNSHint())
		} else {
			r.UserNamespaces = true
		}
	}

	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil {
		r.Seccomp = true
	} else {
		r.Problems = append(r.Problems, "the kernel has no seccomp support (CONFIG_SECCOMP_FILTER)")
	}
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 {
		r.LandlockABI = int(v)
	}

	mgr, err := detectCgroups()
	if err == nil {
		r.CgroupVersion = mgr.Version()
		r.MemoryLimit = fmt.Sprintf("cgroup v%d", mgr.Version())
		r.ProcessLimit, r.CPULimit = r.MemoryLimit, r.MemoryLimit
	} else {
		r.CgroupDetail = err.Error()
		r.MemoryLimit, r.ProcessLimit, r.CPULimit = "RLIMIT_DATA", "RLIMIT_NPROC", "none"
		switch {
		case r.Root && !cfg.AllowWeakIsolation:
			r.Problems = append(r.Problems, "no usable cgroup for memory and process limits ("+err.Error()+
				"), and RLIMIT_NPROC does not apply to root: mount cgroups with the memory and pids controllers, or accept weaker isolation with --allow-weak-isolation")
		default:
			r.Warnings = append(r.Warnings, "no usable cgroup ("+err.Error()+"): memory is limited per process by RLIMIT_DATA and processes by RLIMIT_NPROC, which counts all of this user's processes")
		}
	}
	r.DiskLimit = "a watcher that kills the program past the limit (reactive)"
	if r.Root && !cfg.PlainWorkspace {
		if err := overlayUsable(); err == nil {
			r.DiskLimit = "an overlay whose writes land on a file system of the limit's size (by construction)"
		} else {
			r.DiskLimit += ": no overlay workspaces (" + err.Error() + ")"
		}
	}
	r.Usable = len(r.Problems) == 0
	return r, mgr
}

// explainSetup adds to a failure of bubblewrap what the full probe finds
// wrong with the host (user namespaces disabled, say), since New no longer
// starts a trial sandbox.
func explainSetup(cfg Config, msg string) string {
	r, _ := probe(cfg, true)
	if len(r.Problems) == 0 {
		return msg
	}
	return msg + " (" + strings.Join(r.Problems, "; ") + ")"
}

// tryNamespaces starts a minimal sandbox with every namespace the backend
// uses, as host uid asUID when it is not -1 (the uid programs run as when
// codeagent is root).
func tryNamespaces(bwrap string, asUID int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap,
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
		"--unshare-cgroup-try", "--uid", "1000", "--gid", "1000", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true")
	if asUID >= 0 {
		id := uint32(asUID)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id, Gid: id, Groups: []uint32{}}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%s", msg)
		}
		return err
	}
	return nil
}

// userNSHint suggests the sysctl that usually blocks user namespaces.
func userNSHint() string {
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return " (enable them with 'sysctl kernel.unprivileged_userns_clone=1')"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return " (AppArmor restricts unprivileged user namespaces: allow bwrap with an AppArmor profile or 'sysctl kernel.apparmor_restrict_unprivileged_userns=0')"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return " (enable them with 'sysctl user.max_user_namespaces=15000')"
	}
	return ""
}
