//go:build linux

package docker

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// withheld are syscalls that moby's default profile allows to every
// container and that codeagent's sandboxes do not get, as in the namespace
// backend: tracing and reading other processes' memory (ptrace,
// process_vm_*), io_uring (a large kernel attack surface, which newer
// engines refuse too), modify_ldt (x86 segment tables, a history of kernel
// bugs) and socketcall (the i386 multiplexer, whose family argument a
// filter cannot see; the i386 ABI is refused anyway).
var withheld = []string{"ptrace", "process_vm_readv", "process_vm_writev",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "modify_ldt", "socketcall"}

// setIDModeArg is the index of the mode argument of each syscall that
// creates a file or sets its mode. The profile allows them only when that
// argument has neither S_ISUID nor S_ISGID, so that no program can leave a
// setuid or setgid file on the host (the default action refuses the rest
// with EPERM). openat2 carries its mode in a structure a filter cannot read:
// it gets ENOSYS, and libc falls back to openat.
var setIDModeArg = map[string]uint{
	"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
	"open": 2, "openat": 3, "creat": 1,
	"mkdir": 1, "mkdirat": 2, "mknod": 1, "mknodat": 2,
}

// socketFamilies are the only families socket(2) may create: AF_UNIX,
// AF_INET, AF_INET6 and, for interface and route queries (getaddrinfo,
// if_nameindex), AF_NETLINK with the NETLINK_ROUTE protocol. socketpair(2)
// creates AF_UNIX pairs only (the kernel creates the two sockets before it
// asks the family whether it supports pairs). Everything else fails with
// EPERM before the kernel's family code, and its module autoloading, runs.
var socketFamilies = [][]specs.LinuxSeccompArg{
	{{Index: 0, Value: unix.AF_UNIX, Op: specs.OpEqualTo}},
	{{Index: 0, Value: unix.AF_INET, Op: specs.OpEqualTo}},
	{{Index: 0, Value: unix.AF_INET6, Op: specs.OpEqualTo}},
	{{Index: 0, Value: unix.AF_NETLINK, Op: specs.OpEqualTo}, {Index: 2, Value: unix.NETLINK_ROUTE, Op: specs.OpEqualTo}},
}

// nativeArch is the profile's only architecture: without sub-architectures,
// system calls through the i386 ABI (int 0x80) and the x32 ABI do not match
// the filter and are refused or kill the caller.
var nativeArch = map[string]specs.Arch{
	"amd64": specs.ArchX86_64, "arm64": specs.ArchAARCH64, "riscv64": specs.ArchRISCV64,
	"s390x": specs.ArchS390X, "ppc64le": specs.ArchPPC64LE, "loong64": specs.ArchLOONGARCH64,
}

// seccompOpt is the security option carrying the profile: moby's default
// profile, the one engines apply when given none, for the native
// architecture only, without withheld, and with codeagent's own rules for
// sockets, set-id modes and fallocate. The engine evaluates the remaining
// conditions (kernel version, capabilities) as for its built-in one.
var seccompOpt = sync.OnceValues(func() (string, error) {
	p, err := profile()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if strings.Contains(string(b), `"io_uring_setup"`) || strings.Contains(string(b), `"SCMP_ARCH_X86"`) {
		return "", fmt.Errorf("seccomp profile still allows io_uring or i386")
	}
	return "seccomp=" + string(b), nil
})

func profile() (*seccomp.Seccomp, error) {
	p := seccomp.DefaultProfile()
	arch, ok := nativeArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("seccomp profile: no architecture for %s", runtime.GOARCH)
	}
	p.ArchMap = []seccomp.Architecture{{Arch: arch}}
	rewritten := func(n string) bool {
		_, setID := setIDModeArg[n]
		return setID || slices.Contains(withheld, n) ||
			n == "socket" || n == "socketpair" || n == "fallocate" || n == "openat2"
	}
	for _, s := range p.Syscalls {
		if s.Includes != nil && len(s.Includes.Caps) > 0 {
			continue // granted with capabilities, which sandboxes never have
		}
		s.Names = slices.DeleteFunc(s.Names, rewritten)
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(s *seccomp.Syscall) bool { return len(s.Names) == 0 && s.Name == "" })

	rule := func(names []string, action specs.LinuxSeccompAction, errno uint, args ...specs.LinuxSeccompArg) {
		s := &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: names, Action: action, Args: args}}
		if errno != 0 {
			s.ErrnoRet = &errno
		}
		p.Syscalls = append(p.Syscalls, s)
	}
	for _, args := range socketFamilies {
		rule([]string{"socket"}, specs.ActAllow, 0, args...)
	}
	rule([]string{"socketpair"}, specs.ActAllow, 0, socketFamilies[0]...)
	names := make([]string, 0, len(setIDModeArg))
	for n := range setIDModeArg {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		rule([]string{n}, specs.ActAllow, 0, specs.LinuxSeccompArg{
			Index: setIDModeArg[n], Value: unix.S_ISUID | unix.S_ISGID, ValueTwo: 0, Op: specs.OpMaskedEqual})
	}
	// fallocate could reserve blocks past RLIMIT_FSIZE (FALLOC_FL_KEEP_SIZE);
	// with EOPNOTSUPP, posix_fallocate falls back to writing, which it bounds.
	rule([]string{"fallocate"}, specs.ActErrno, uint(unix.EOPNOTSUPP))
	rule([]string{"openat2"}, specs.ActErrno, uint(unix.ENOSYS))
	return p, nil
}
