package sandbox

import "fmt"

// Status is the sandbox's verdict on one execution.
type Status int

const (
	// StatusOK: the program exited with code 0.
	StatusOK Status = iota
	// StatusError: the program exited with a non-zero code.
	StatusError
	// StatusTimeout: the program ran out of wall-clock or CPU time and was killed.
	StatusTimeout
	// StatusMemoryLimit: the program was killed for exceeding its memory limit.
	StatusMemoryLimit
	// StatusSignaled: the program was ended by a signal (including a file or
	// disk limit, SIGXFSZ, and cancellation by the caller).
	StatusSignaled
	// StatusSandboxError: the sandbox failed; the program may not have run.
	StatusSandboxError
)

var statusNames = [...]string{"ok", "error", "timeout", "memory_limit", "signaled", "sandbox_error"}

func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("status(%d)", int(s))
	}
	return statusNames[s]
}

// ParseStatus returns the Status named s.
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if n == s {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("unknown status %q", s)
}

func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
