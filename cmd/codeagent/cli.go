package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/workspace"
)

// stdio is the process's standard streams, injected so that commands can be tested.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// command is one subcommand. run parses its own flags and returns the exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, io stdio, args []string) int
}

// commands is the one place where subcommands are registered.
func commands() []command {
	return []command{
		{"exec", "run a program in the sandbox", cmdExec},
		{"run", "turn a task into working code", cmdRun},
		{"repl", "an interactive Python in the sandbox, with state", cmdRepl},
		{"doctor", "show which isolation mechanisms this host offers", cmdDoctor},
		{"check", "statically check code for unsafe constructs", cmdCheck},
		{"sessions", "list, show, remove or prune sessions", cmdSessions},
		{"changes", "list, diff, apply, remove or prune the changes runs, exec and repl kept for their folders", cmdChanges},
		{"envs", "list or remove the dependency environments installed for programs", cmdEnvs},
		{"log", "show or verify the audit log", cmdLog},
		{"stats", "summarise attempts, successes and time of every run, per session", cmdStats},
		{"eval", "measure the agent on a benchmark suite", cmdEval},
		{"mcp", "serve the sandbox, checker and agent over MCP (stdio)", cmdMCP},
		{"serve", "serve the HTTP API and the web page", cmdServe},
		{"version", "print the version and what it was built from (or codeagent --version)", cmdVersion},
	}
}

// startsSandboxes are the commands that start sandboxes: their backends,
// workspaces and MCP sessions keep directories in $TMPDIR.
var startsSandboxes = map[string]bool{"exec": true, "run": true, "eval": true, "mcp": true, "serve": true, "repl": true}

// resolveTempDir refuses a $TMPDIR through a symbolic link that a program
// could have planted (an earlier run's workspace holding it), and points
// $TMPDIR at the link-free path, so that nothing below follows a link.
func resolveTempDir() error {
	dir, err := workspace.TempDir()
	if err != nil {
		return usagef("$TMPDIR: %w", err)
	}
	if dir != os.TempDir() {
		return os.Setenv("TMPDIR", dir)
	}
	return nil
}

// run dispatches args to a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, s stdio) int {
	switch {
	case len(args) == 0:
		usage(s.err)
		return exitUsage
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		return cmdHelp(ctx, s, args[1:])
	case args[0] == "--version" || args[0] == "-version":
		return cmdVersion(ctx, s, args[1:])
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if startsSandboxes[c.name] {
				if err := resolveTempDir(); err != nil {
					return exitCodeFor(s.err, err)
				}
			}
			return c.run(ctx, s, args[1:])
		}
	}
	fmt.Fprintf(s.err, "codeagent: unknown command %q\n", args[0])
	usage(s.err)
	return exitUsage
}

func usage(w io.Writer) {
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	var b strings.Builder
	b.WriteString("usage: codeagent COMMAND [flags] [args]\n\ncommands:\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nhelp topics:\n")
	topics := make([]string, 0, len(helpTopics))
	for t := range helpTopics {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		fmt.Fprintf(&b, "  %-10s %s\n", t, helpTopics[t].summary)
	}
	b.WriteString("\nRun 'codeagent help COMMAND' (or 'codeagent COMMAND -h') for a command's flags, 'codeagent help TOPIC'\n" +
		"for a topic, 'codeagent --version' for the version.\n")
	io.WriteString(w, b.String())
}

// newFlagSet returns a flag set that reports errors instead of exiting.
// Its usage, until the command sets its own, is the command's one-line
// summary and its flags.
func newFlagSet(name string, s stdio) *flag.FlagSet {
	fs := flag.NewFlagSet("codeagent "+name, flag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() {
		summary := ""
		for _, c := range commands() {
			if c.name == name {
				summary = strings.ToUpper(c.summary[:1]) + c.summary[1:] + ".\n\n"
			}
		}
		fmt.Fprintf(fs.Output(), "usage: codeagent %s [flags]\n\n%sflags:\n", name, summary)
		printFlags(fs)
	}
	madeFlagSet(fs)
	return fs
}

// printHelpTail ends a command's -h with its examples and, where its usage
// does not say them, its exit statuses (see helpTails).
func printHelpTail(w io.Writer, name string) {
	t, ok := helpTails[name]
	if !ok {
		return
	}
	fmt.Fprintf(w, "\nexamples:\n")
	for _, e := range t.examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	if t.exits != "" {
		fmt.Fprintf(w, "\n%s\n", t.exits)
	}
}

// parseFlags parses args and returns (exit code, done): done is true when the
// command must stop. -h prints the command's usage (exit 0); a bad flag is
// one line saying what is wrong and where the usage is (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		printHelpTail(out, strings.TrimPrefix(fs.Name(), "codeagent "))
		return exitOK, true
	case err != nil:
		printErr(out, "%v\nsee '%s -h'", err, fs.Name())
		return exitUsage, true
	}
	return 0, false
}

// parseVerb parses the arguments of a command with verbs (sessions,
// changes): VERB [NAME]... with flags before or after the names. missing
// is the usage line when no verb is given; -h as the verb prints the usage.
// done reports that the command must stop with code.
func parseVerb(fs *flag.FlagSet, s stdio, args []string, missing string) (verb string, names []string, code int, done bool) {
	switch {
	case len(args) == 0:
		return "", nil, usageLine(fs, s, "%s", missing), true
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		fs.Usage()
		printHelpTail(s.err, strings.TrimPrefix(fs.Name(), "codeagent "))
		return "", nil, exitOK, true
	}
	verb, rest := args[0], args[1:]
	for len(rest) > 0 {
		if code, done := parseFlags(fs, rest); done {
			return "", nil, code, true
		}
		rest = fs.Args()
		if len(rest) > 0 {
			names = append(names, rest[0])
			rest = rest[1:]
		}
	}
	return verb, names, 0, false
}

// usageLine is a usage error of fs's command: one line saying what is
// wrong and where the usage is (exit 2).
func usageLine(fs *flag.FlagSet, s stdio, format string, a ...any) int {
	printErr(s.err, "%s\nsee '%s -h'", fmt.Sprintf(format, a...), fs.Name())
	return exitUsage
}

// parseNoArgs parses the flags of a command that takes no arguments: one
// is a usage error (exit 2) that says so.
func parseNoArgs(fs *flag.FlagSet, args []string, s stdio) (int, bool) {
	if code, done := parseFlags(fs, args); done {
		return code, true
	}
	if fs.NArg() != 0 {
		return usageLine(fs, s, "%s takes no arguments, got %q", strings.TrimPrefix(fs.Name(), "codeagent "), fs.Arg(0)), true
	}
	return 0, false
}

// newLogger returns the CLI's logger: warnings and errors on stderr, or debug
// output when CODEAGENT_DEBUG is set.
func newLogger(w io.Writer) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("CODEAGENT_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
