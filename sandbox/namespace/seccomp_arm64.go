//go:build linux

package namespace

import "golang.org/x/sys/unix"

const (
	auditArch     = unix.AUDIT_ARCH_AARCH64
	x32SyscallBit = 0
)

var archModeArgSyscalls = []argRule{}

var archDeniedSyscalls = []uintptr{}
