package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
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
	if err := s.validateBinds(); err != nil {
		return err
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: bad environment variable %q", ErrInvalidSpec, k)
		}
	}
	return s.validateNetwork()
}

// validateBinds checks that at most MaxBinds directories are bound, each
// from an absolute host path without symbolic links to its own clean path
// below BindRoot.
func (s Spec) validateBinds() error {
	if len(s.Binds) > MaxBinds {
		return fmt.Errorf("%w: %d binds: at most %d", ErrInvalidSpec, len(s.Binds), MaxBinds)
	}
	seen := map[string]bool{}
	for _, b := range s.Binds {
		p := path.Clean(b.Path)
		if p != b.Path || !strings.HasPrefix(p, BindRoot+"/") || seen[p] {
			return fmt.Errorf("%w: bind path %q must be clean, below %s and used once", ErrInvalidSpec, b.Path, BindRoot)
		}
		for q := range seen {
			if strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
				return fmt.Errorf("%w: bind paths %q and %q nest", ErrInvalidSpec, p, q)
			}
		}
		seen[p] = true
		if !path.IsAbs(b.Source) || path.Clean(b.Source) != b.Source {
			return fmt.Errorf("%w: bind source %q must be absolute and clean", ErrInvalidSpec, b.Source)
		}
		fi, err := os.Lstat(b.Source)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: bind source %s is not a directory", ErrInvalidSpec, b.Source)
		}
		if real, err := filepath.EvalSymlinks(b.Source); err != nil || real != b.Source {
			return fmt.Errorf("%w: bind source %s: a symbolic link on its path", ErrInvalidSpec, b.Source)
		}
	}
	return nil
}
