//go:build linux && (amd64 || arm64)

package namespace

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox. They let a process
// reach kernel attack surface or change the system: mounts and root changes,
// tracing other processes, BPF and perf, kernel modules and kexec, the kernel
// keyring, io_uring, userfaultfd, file handles, reboot and swap, namespaces,
// clocks and accounting. Ordinary programs (python, node, bash) never need
// them.
var deniedSyscalls = append([]uintptr{
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_KCMP, unix.SYS_PIDFD_GETFD,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_USERFAULTFD,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_ACCT, unix.SYS_SYSLOG, unix.SYS_QUOTACTL, unix.SYS_VHANGUP,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_FANOTIFY_INIT, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
	unix.SYS_PERSONALITY,
	unix.SYS_SCHED_SETAFFINITY, // without a cgroup, the sandbox is pinned to its CPUs
}, archDeniedSyscalls...)

// nsCloneFlags are the clone(2) flags that create namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWTIME

// modeArgSyscalls take a file mode in the given argument. A mode with the
// setuid or setgid bit gets EPERM: a file a program marks setuid would be
// setuid on the host too (nosuid applies only to the sandbox's own mounts),
// and any local user who reaches it would run as the program's host uid.
var modeArgSyscalls = append([]argRule{
	{unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPENAT, 3}, {unix.SYS_MKDIRAT, 2}, {unix.SYS_MKNODAT, 2},
}, archModeArgSyscalls...)

// argRule names a syscall and the index of the argument a rule inspects.
type argRule struct {
	nr  uintptr
	arg int
}

// setIDBits are S_ISUID and S_ISGID.
const setIDBits = 0o6000

// allowedFamilies are the socket families a program may create: Unix
// sockets, and IPv4 and IPv6 for the loopback of its own network namespace.
// Everything else (AF_VSOCK, which a network namespace does not isolate,
// AF_PACKET, AF_ALG, Bluetooth, ...) fails with EAFNOSUPPORT. AF_NETLINK is
// allowed for NETLINK_ROUTE only, which libc uses to list interfaces.
var allowedFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retErrno  = unix.SECCOMP_RET_ERRNO
	offNr     = 0 // seccomp_data.nr
	offArch   = 4 // seccomp_data.arch
)

// offArgLow is the offset of the low 32 bits of seccomp_data.args[i] (both
// supported architectures are little endian). Every argument inspected is
// an int or a mode_t, so the kernel ignores the high half.
func offArgLow(i int) uint32 { return 16 + 8*uint32(i) }

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

func errno(e unix.Errno) uint32 { return uint32(retErrno | uint32(e)) }

// seccompProgram returns the filter as the raw sock_filter array that bwrap's
// --seccomp reads: a syscall other than the native architecture's is
// killed (no i386 int 0x80, hence no socketcall), x32 and denied syscalls
// return EPERM, socket families outside allowedFamilies EAFNOSUPPORT, modes
// with setuid or setgid bits EPERM, fallocate EOPNOTSUPP (posix_fallocate
// then writes, within RLIMIT_FSIZE, instead of reserving any amount at
// once), openat2 ENOSYS (its mode is behind a pointer; libc falls back to
// openat), clone with namespace flags EPERM, and clone3 ENOSYS so that libc
// falls back to clone, whose flags the filter can see.
//
// The accumulator holds the syscall number between rules; a rule that
// loads an argument is a block that always returns, skipped as a whole when
// the number does not match.
func seccompProgram() []byte {
	eperm := errno(unix.EPERM)
	prog := []insn{
		{bpfLdAbsW, 0, 0, offArch},
		{bpfJeqK, 1, 0, auditArch},
		{bpfRetK, 0, 0, retKill},
		{bpfLdAbsW, 0, 0, offNr},
	}
	if x32SyscallBit != 0 {
		prog = append(prog,
			insn{bpfJgeK, 0, 1, x32SyscallBit},
			insn{bpfRetK, 0, 0, eperm})
	}
	for _, nr := range deniedSyscalls {
		prog = append(prog, returnIf(nr, eperm)...)
	}
	prog = append(prog, returnIf(unix.SYS_FALLOCATE, errno(unix.EOPNOTSUPP))...)
	prog = append(prog, returnIf(unix.SYS_OPENAT2, errno(unix.ENOSYS))...)
	for _, r := range modeArgSyscalls {
		prog = append(prog, block(r.nr,
			insn{bpfLdAbsW, 0, 0, offArgLow(r.arg)},
			insn{bpfJsetK, 0, 1, setIDBits},
			insn{bpfRetK, 0, 0, eperm},
			insn{bpfRetK, 0, 0, retAllow})...)
	}
	prog = append(prog, block(unix.SYS_SOCKET, socketRule()...)...)
	prog = append(prog, block(unix.SYS_SOCKETPAIR,
		insn{bpfLdAbsW, 0, 0, offArgLow(0)},
		insn{bpfJeqK, 0, 1, unix.AF_UNIX},
		insn{bpfRetK, 0, 0, retAllow},
		insn{bpfRetK, 0, 0, errno(unix.EAFNOSUPPORT)})...)
	prog = append(prog, returnIf(unix.SYS_CLONE3, errno(unix.ENOSYS))...)
	prog = append(prog, block(unix.SYS_CLONE,
		insn{bpfLdAbsW, 0, 0, offArgLow(0)},
		insn{bpfJsetK, 0, 1, nsCloneFlags},
		insn{bpfRetK, 0, 0, eperm},
		insn{bpfRetK, 0, 0, retAllow})...)
	prog = append(prog, insn{bpfRetK, 0, 0, retAllow})
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.LittleEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.LittleEndian.AppendUint32(out, in.k)
	}
	return out
}

// returnIf returns ret for syscall nr.
func returnIf(nr uintptr, ret uint32) []insn {
	return []insn{{bpfJeqK, 0, 1, uint32(nr)}, {bpfRetK, 0, 0, ret}}
}

// block runs body, which must end in a return, for syscall nr only.
func block(nr uintptr, body ...insn) []insn {
	if len(body) > 255 || body[len(body)-1].code != bpfRetK {
		panic("seccomp: a block must be short and end in a return")
	}
	return append([]insn{{bpfJeqK, 0, uint8(len(body)), uint32(nr)}}, body...)
}

// socketRule allows the families of allowedFamilies, and AF_NETLINK with
// protocol NETLINK_ROUTE.
func socketRule() []insn {
	body := []insn{{bpfLdAbsW, 0, 0, offArgLow(0)}}
	for _, f := range allowedFamilies {
		body = append(body, insn{bpfJeqK, 0, 1, f}, insn{bpfRetK, 0, 0, retAllow})
	}
	return append(body,
		insn{bpfJeqK, 0, 4, unix.AF_NETLINK},
		insn{bpfLdAbsW, 0, 0, offArgLow(2)},
		insn{bpfJeqK, 0, 1, unix.NETLINK_ROUTE},
		insn{bpfRetK, 0, 0, retAllow},
		insn{bpfRetK, 0, 0, errno(unix.EPROTONOSUPPORT)},
		insn{bpfRetK, 0, 0, errno(unix.EAFNOSUPPORT)},
	)
}
