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
}, archDeniedSyscalls...)

// nsCloneFlags are the clone(2) flags that create namespaces.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWTIME

// Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
const (
	bpfLdAbsW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJsetK   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK    = unix.BPF_RET | unix.BPF_K
	retAllow   = unix.SECCOMP_RET_ALLOW
	retKill    = unix.SECCOMP_RET_KILL_PROCESS
	retErrno   = unix.SECCOMP_RET_ERRNO
	offNr      = 0  // seccomp_data.nr
	offArch    = 4  // seccomp_data.arch
	offArg0Low = 16 // low 32 bits of seccomp_data.args[0] (little endian)
)

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram returns the filter as the raw sock_filter array that bwrap's
// --seccomp reads. Every rule jumps at most one instruction, so the program
// needs no jump-offset bookkeeping: a syscall other than the native
// architecture's is killed, x32 and denied syscalls return EPERM, clone with
// namespace flags returns EPERM, and clone3 returns ENOSYS so that libc falls
// back to clone, whose flags the filter can see.
func seccompProgram() []byte {
	eperm := uint32(retErrno | uint32(unix.EPERM))
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
		prog = append(prog,
			insn{bpfJeqK, 0, 1, uint32(nr)},
			insn{bpfRetK, 0, 0, eperm})
	}
	prog = append(prog,
		insn{bpfJeqK, 0, 1, unix.SYS_CLONE3},
		insn{bpfRetK, 0, 0, uint32(retErrno | uint32(unix.ENOSYS))},
		insn{bpfJeqK, 1, 0, unix.SYS_CLONE},
		insn{bpfRetK, 0, 0, retAllow},
		insn{bpfLdAbsW, 0, 0, offArg0Low},
		insn{bpfJsetK, 0, 1, nsCloneFlags},
		insn{bpfRetK, 0, 0, eperm},
		insn{bpfRetK, 0, 0, retAllow},
	)
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.LittleEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.LittleEndian.AppendUint32(out, in.k)
	}
	return out
}
