package sandbox

import (
	"fmt"
	"os"
	"path"
	"strings"
)

// Validate checks what every backend needs of a spec: a command, an
// existing workspace directory, absolute clean file paths, and environment
// names without '=' or NUL. Backends add their own rules on file paths.
func (s Spec) Validate() error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fmt.Errorf("%w: empty command", ErrInvalidSpec)
	}
	if s.Workspace == "" {
		return fmt.Errorf("%w: no workspace", ErrInvalidSpec)
	}
	fi, err := os.Stat(s.Workspace)
	if err != nil {
		return fmt.Errorf("%w: workspace: %v", ErrInvalidSpec, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: workspace %s is not a directory", ErrInvalidSpec, s.Workspace)
	}
	if c := s.Limits.CPUs; c != c || c < 0 || c > MaxCPUs {
		return fmt.Errorf("%w: CPU limit %v is out of range (0 to %d cores)", ErrInvalidSpec, c, MaxCPUs)
	}
	for _, f := range s.Files {
		if p := path.Clean(f.Path); !path.IsAbs(f.Path) || p != f.Path || p == "/" {
			return fmt.Errorf("%w: file path %q must be absolute and clean", ErrInvalidSpec, f.Path)
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: bad environment variable %q", ErrInvalidSpec, k)
		}
	}
	return s.validateNetwork()
}
