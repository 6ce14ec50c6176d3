//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// errNoSafeOpen: without openat2 a workspace cannot be opened without
// following links, so it is not opened at all (codeagent's backends are
// Linux only; this keeps the package building elsewhere for its clients).
var errNoSafeOpen = errors.New("opening a workspace without following links needs Linux (openat2)")

// OpenWorkspace refuses: see errNoSafeOpen.
func OpenWorkspace(string) (*os.File, error) { return nil, errNoSafeOpen }

// MarkWorkspace does nothing here.
func MarkWorkspace(string) error { return nil }

// insideWorkspace knows no marks here.
func insideWorkspace(string) (string, bool) { return "", false }
