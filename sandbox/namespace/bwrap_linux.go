//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/sandbox"
)

// sandboxUID is the user id programs run as inside the sandbox.
const sandboxUID = 1000

// sandboxPATH is the only PATH a program sees.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// rootDirs are the host's top-level runtime directories; each is recreated
// as the same symlink or bound read-only.
var rootDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostLayout is the part of the bwrap command line that depends only on the
// host; it is computed once. etc is the prepared /etc (see prepareEtc), mnt
// the mount directory (see prepareMountDir).
func hostLayout(etc, mnt string) layout {
	return layout{root: rootLayout(etc), proc: procMasks(mnt)}
}

// layout is the host-dependent part of the options.
type layout struct {
	root []string // binds of /usr, /bin, ... and /etc
	proc []string // masks over /proc entries, after --proc /proc
}

// procMasks binds an empty file or directory of mnt over every entry of
// sandbox.MaskedProc that this host's /proc has (bwrap cannot mount over one that
// does not exist).
func procMasks(mnt string) []string {
	var args []string
	for _, p := range sandbox.MaskedProc {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode().Perm()&0o044 == 0 && ownedByRoot(fi):
			// Root-only, and programs never run as root: closed to them
			// already, so no mount (each costs about 0.1 ms per start).
		case fi.IsDir():
			args = append(args, "--ro-bind", mnt+"/empty", p)
		default:
			args = append(args, "--ro-bind", mnt+"/empty.txt", p)
		}
	}
	return args
}

// rootLayout binds /usr, recreates the top-level runtime directories and
// binds the prepared /etc.
func rootLayout(etc string) []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range rootDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return append(args, "--ro-bind", etc, "/etc")
}

// Descriptors as bwrap sees them; data files follow from fdData on.
const (
	fdArgs = 3 + iota
	fdSeccomp
	fdInfo
	fdBlock
	fdUserns
	fdData
)

// bwrapOptions builds the options of one execution, which bwrap reads from
// its --args descriptor: bwrap may have been started before the execution
// was known (see launcher), so everything but the command is here,
// including the environment.
//
// workspace is the directory bwrap binds at /workspace. asRoot says that
// codeagent runs as root: it writes the user namespace's id maps (see
// writeIDMaps), which bwrap then waits for, and the launcher was born in a
// network namespace of its own, empty but for a loopback interface (see
// startInMinimalRoot), which the sandbox keeps rather than making one.
func bwrapOptions(lay layout, spec sandbox.Spec, lim sandbox.Limits, workspace string, asRoot bool, tmp []tmpFile, binds []bindOption) []string {
	size := strconv.FormatInt(lim.Disk, 10)
	shm := strconv.FormatInt(min(lim.Disk, lim.Memory), 10)
	uid := strconv.Itoa(sandboxUID)
	args := []string{"--unshare-user"}
	if asRoot {
		args = append(args, "--userns-block-fd", strconv.Itoa(fdUserns))
	} else {
		args = append(args, "--unshare-net")
	}
	args = append(args,
		"--unshare-pid", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup-try",
		"--uid", uid, "--gid", uid, "--hostname", "sandbox",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--seccomp", strconv.Itoa(fdSeccomp), "--info-fd", strconv.Itoa(fdInfo), "--block-fd", strconv.Itoa(fdBlock),
		"--clearenv",
	)
	for _, kv := range environ(sandbox.WithThreadEnv(spec.Env, lim.CPUs)) {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, lay.root...)
	args = append(args, "--proc", "/proc")
	args = append(args, lay.proc...)
	args = append(args,
		// Read-only like Docker's: sysctls such as kernel/core_pattern are
		// global, and the kernel lets host uid 0 write them by file mode.
		// (bwrap covers /proc/irq and /proc/bus itself.)
		"--ro-bind", "/proc/sys", "/proc/sys",
		"--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--dev", "/dev",
		"--size", shm, "--tmpfs", "/dev/shm",
		"--size", size, "--tmpfs", "/tmp",
		"--bind", workspace, sandbox.WorkspacePath,
	)
	args = append(args, bindOptions(binds)...)
	// Files are written into the sandbox's root (a tmpfs, read-only after
	// --remount-ro below) rather than each bound from its own mount: bwrap
	// rereads the mount table after every bind, and a file costs no mount.
	paths := make([]string, len(spec.Files))
	for i, f := range spec.Files {
		paths[i] = f.Path
	}
	args = append(args, fileOptions(paths, fdData, "0444", "/")...)
	args = append(args, tmpFileOptions(tmp, fdData+len(spec.Files))...)
	return append(args, "--remount-ro", "/", "--chdir", sandbox.WorkspacePath)
}

// fileOptions are bwrap's options writing the files paths from the
// descriptors fd, fd+1, ... (mode perms, unless empty), each after the
// directories it needs below the existing directory base.
func fileOptions(paths []string, fd int, perms, base string) []string {
	var args []string
	made := map[string]bool{base: true, "/": true}
	for i, p := range paths {
		var dirs []string
		for d := path.Dir(p); !made[d]; d = path.Dir(d) {
			dirs = append([]string{d}, dirs...)
			made[d] = true
		}
		for _, d := range dirs {
			args = append(args, "--dir", d)
		}
		if perms != "" {
			args = append(args, "--perms", perms)
		}
		args = append(args, "--file", strconv.Itoa(fd+i), p)
	}
	return args
}

// environ is the program's complete environment.
func environ(extra map[string]string) []string {
	env := map[string]string{
		"PATH":   sandboxPATH,
		"HOME":   "/tmp",
		"LANG":   "C.UTF-8",
		"TMPDIR": "/tmp",
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func ownedByRoot(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}

// childPid waits for bwrap to fork the sandbox's first process and returns
// its pid (on the host), which waits for the backend now (id maps,
// --block-fd).
func (l *launcher) childPid() (int, error) {
	pid, err := readChildPid(l.infoR)
	if err == nil && l.ownPidNS {
		// bwrap reports the pid in its own PID namespace: the host's is
		// that of its one child.
		pid, err = childOf(l.cmd.Process.Pid)
	}
	if err == nil && afterFork != nil {
		afterFork()
	}
	return pid, err
}

// afterFork, when set (by tests), runs once a sandbox's first process is
// forked and waits for the backend.
var afterFork func()

// readChildPid reads the child's pid from bwrap's --info-fd report. bwrap
// writes the rest of the report only once the user namespace is ready,
// which with --userns-block-fd waits for us, so the pid is read as soon as
// it arrives rather than with the whole JSON object. EOF before it
// means bwrap failed to set the sandbox up.
func readChildPid(r io.Reader) (int, error) {
	var buf []byte
	chunk := make([]byte, 256)
	for len(buf) < 4096 {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		// A write of fewer than PIPE_BUF bytes arrives whole, so digits
		// at the end of what was read are the whole number.
		if m := childPidRe.FindSubmatch(buf); m != nil {
			if pid, err := strconv.Atoi(string(m[1])); err == nil && pid > 0 {
				return pid, nil
			}
		}
		if err != nil {
			break
		}
	}
	return 0, errors.New("bubblewrap exited during setup")
}

var childPidRe = lazyre.New(`"child-pid"\s*:\s*([0-9]+)`)
