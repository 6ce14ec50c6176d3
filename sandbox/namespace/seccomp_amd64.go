//go:build linux

package namespace

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	// x32SyscallBit marks x32-ABI syscall numbers, which the filter refuses.
	x32SyscallBit = 0x40000000
)

// archModeArgSyscalls are the legacy mode-taking syscalls of x86-64.
var archModeArgSyscalls = []argRule{
	{unix.SYS_OPEN, 2}, {unix.SYS_CREAT, 1}, {unix.SYS_MKDIR, 1}, {unix.SYS_CHMOD, 1}, {unix.SYS_MKNOD, 1},
}

var archDeniedSyscalls = []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_UMOUNT2}
