//go:build linux && (amd64 || arm64)

package namespace

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/codeagent/codeagent/sandbox"
)

// sandboxUID is the user id programs run as inside the sandbox.
const sandboxUID = 1000

// sandboxPATH is the only PATH a program sees.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// rootDirs are the host's top-level runtime directories; each is recreated
// as the same symlink or bound read-only.
var rootDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the host's /etc entries a runtime needs (dynamic linker,
// time zone, alternatives symlinks, fonts, Python and matplotlib settings).
// Nothing else of /etc is visible.
var etcFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
	"/etc/alternatives", "/etc/fonts", "/etc/mime.types", "/etc/matplotlibrc",
	"/etc/nsswitch.conf",
}

// etcGlobs are patterns for versioned /etc entries, e.g. /etc/python3.11.
var etcGlobs = []string{"/etc/python3*", "/etc/node*"}

// staticFiles are synthesized into the sandbox so that user lookups work.
var staticFiles = []sandbox.File{
	{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
	{Path: "/etc/group", Data: []byte("root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n")},
	{Path: "/etc/hostname", Data: []byte("sandbox\n")},
	{Path: "/etc/hosts", Data: []byte("127.0.0.1 localhost sandbox\n::1 localhost\n")},
}

// hostLayout is the part of the bwrap command line that depends only on the
// host; it is computed once.
func hostLayout() []string {
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
	seen := map[string]bool{}
	paths := append([]string(nil), etcFiles...)
	for _, g := range etcGlobs {
		m, _ := filepath.Glob(g)
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	return args
}

// bwrapArgs builds the command line for one execution. Descriptor numbers are
// those the child sees: 3 seccomp, 4 info, 5 block, 6 the workspace, then one
// per data file.
func bwrapArgs(layout []string, spec sandbox.Spec, lim sandbox.Limits, files []sandbox.File) []string {
	size := strconv.FormatInt(lim.Disk, 10)
	shm := strconv.FormatInt(min(lim.Disk, lim.Memory), 10)
	uid := strconv.Itoa(sandboxUID)
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup-try",
		"--uid", uid, "--gid", uid, "--hostname", "sandbox",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--seccomp", "3", "--info-fd", "4", "--block-fd", "5",
	}
	args = append(args, layout...)
	args = append(args,
		"--proc", "/proc",
		// Read-only like Docker's: sysctls such as kernel/core_pattern are
		// global, and the kernel lets host uid 0 write them by file mode.
		"--ro-bind", "/proc/sys", "/proc/sys",
		"--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--ro-bind-try", "/proc/fs", "/proc/fs",
		"--ro-bind-try", "/proc/irq", "/proc/irq",
		"--ro-bind-try", "/proc/bus", "/proc/bus",
		"--dev", "/dev",
		"--size", shm, "--tmpfs", "/dev/shm",
		"--size", size, "--tmpfs", "/tmp",
		"--bind-fd", "6", sandbox.WorkspacePath,
	)
	for i, f := range files {
		args = append(args, "--ro-bind-data", strconv.Itoa(7+i), f.Path)
	}
	args = append(args, "--remount-ro", "/", "--chdir", sandbox.WorkspacePath, "--")
	return append(args, spec.Command...)
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
