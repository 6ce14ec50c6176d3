// Package backends is the one place where sandbox backends are registered
// and chosen by name.
package backends

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/namespace"
)

// Options configure whichever backend is opened.
type Options struct {
	// AllowWeakIsolation accepts rlimits where cgroups are missing.
	AllowWeakIsolation bool
	// Warm is how many sandboxes to start ahead; 0 for a single execution.
	Warm   int
	Logger *slog.Logger
}

// ErrUnknown is wrapped by Open's error for a name it does not know.
var ErrUnknown = errors.New("unknown sandbox backend")

// Names lists the backends that Open accepts, "auto" first.
func Names() []string { return []string{"auto", "namespace"} }

// Open returns the backend called name; "" and "auto" choose the namespace
// backend. Errors from a backend that cannot run here are *sandbox.SetupError.
func Open(name string, opts Options) (sandbox.Sandbox, error) {
	switch name {
	case "", "auto", "namespace":
		b, err := namespace.New(namespace.Config{AllowWeakIsolation: opts.AllowWeakIsolation, Warm: opts.Warm, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}
