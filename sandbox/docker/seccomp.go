//go:build linux

package docker

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/moby/profiles/seccomp"
)

// withheld are syscalls that moby's default profile allows to every
// container on recent kernels and that codeagent's sandboxes do not get, as
// in the namespace backend: tracing and reading other processes' memory
// (ptrace, process_vm_*), and io_uring, a large kernel attack surface that
// newer engines already refuse. With CAP_SYS_PTRACE (never granted here)
// the profile's own rule would allow the first three again.
var withheld = []string{"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter", "io_uring_register"}

// seccompOpt is the security option carrying the profile: moby's default
// profile, the one engines apply when given none, minus withheld for
// processes without capabilities. The engine evaluates its conditions
// (kernel version, architecture, capabilities) as for its built-in one.
var seccompOpt = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	for _, s := range p.Syscalls {
		if s.Includes != nil && len(s.Includes.Caps) > 0 {
			continue
		}
		s.Names = slices.DeleteFunc(s.Names, func(n string) bool { return slices.Contains(withheld, n) })
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(s *seccomp.Syscall) bool { return len(s.Names) == 0 && s.Name == "" })
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	if strings.Contains(string(b), `"io_uring_setup"`) {
		return "", fmt.Errorf("seccomp profile still allows io_uring")
	}
	return "seccomp=" + string(b), nil
})
