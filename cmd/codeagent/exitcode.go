package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/termtext"
)

// Exit codes: the one place where outcomes become process exit statuses.
const (
	exitOK       = 0
	exitFailure  = 1  // the task or check did not succeed
	exitUsage    = 2  // bad flags, arguments, files or configuration
	exitProvider = 3  // the model provider failed after its retries
	exitBusy     = 75 // the session is in use by another process (EX_TEMPFAIL)
	// A program's own result: its exit code, or these (sandbox.Result.ExitStatus).
	exitTimeout = sandbox.ExitTimeout // the program ran out of wall-clock time
	exitSandbox = sandbox.ExitSandbox // the sandbox could not be set up or refused to run it
	exitMemory  = sandbox.ExitMemory  // the program was killed for memory
	// A command stopped by a signal exits 128 + its number, as shells do:
	// 130 for SIGINT (Ctrl-C), 143 for SIGTERM.
	exitSignalBase = sandbox.ExitSignalBase
)

// exitInterrupted reports whether a signal stopped the command (run, exec,
// eval and check call it first on their way out). If one did, it prints the
// one line saying so, "interrupted" followed by detail, and returns
// 128 + the signal's number; the command prints nothing else.
func exitInterrupted(ctx context.Context, w io.Writer, detail string) (int, bool) {
	sig, ok := interruptedBy(ctx)
	if !ok {
		return 0, false
	}
	what := "interrupted"
	if sig == syscall.SIGTERM {
		what = "terminated"
	}
	printErr(w, "%s%s", what, detail)
	return exitSignalBase + int(sig), true
}

// usageError marks an error caused by the caller's input (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// isUsage reports whether err is the caller's to fix (exit 2): a
// usageError, or an error of class app.Invalid (a directory refused as a
// workspace among them, also from a backend's own check, where it comes
// inside a *sandbox.SetupError).
func isUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue) || app.Describe(err).Class == app.Invalid
}

// exitOf is the one place where the error classes (app.Class) become exit
// statuses:
//
//	invalid, forbidden 2; busy 75 (a session another process holds);
//	sandbox_setup 125; provider 3; not_found, conflict, disk_full,
//	unavailable, timeout, internal 1.
var exitOf = map[app.Class]int{
	app.Invalid:   exitUsage,
	app.Forbidden: exitUsage,
	app.Busy:      exitBusy,
	app.Setup:     exitSandbox,
	app.Provider:  exitProvider,
}

// exitCodeFor maps an error to an exit status and prints it on w (in full:
// the user at the terminal may see the host's paths): the one place where
// a command's error becomes its exit status.
func exitCodeFor(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	printErr(w, "%v", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	if code, ok := exitOf[app.Describe(err).Class]; ok {
		return code
	}
	return exitFailure
}

// printErr prints a message of codeagent's on w, each of its lines after
// "codeagent: " and escaped (see termtext.Name), so that a file name or
// model text in it can neither drive the terminal nor start a line that
// looks like codeagent's own output.
func printErr(w io.Writer, format string, a ...any) {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(fmt.Sprintf(format, a...), "\n"), "\n") {
		b.WriteString("codeagent: " + termtext.Name(line) + "\n")
	}
	io.WriteString(w, b.String())
}
