package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// A command's -h fits a screen (at most 60 lines): its common flags first
// (commonFlags), then the others in alphabetical order, one line each,
// leaving out the flags of the sandbox backends and of the server's
// tuning, which `codeagent help backends` lists (helpTopics). Those are
// registered as before and work as before: only the usage leaves them
// out. `codeagent help COMMAND` is `codeagent COMMAND -h`.

// commonFlags are, for each command that has many, the flags its -h shows
// first, in this order.
var commonFlags = map[string][]string{
	"exec": {"lang", "timeout", "memory", "cpus", "disk", "workdir", "json", "allow-host", "env",
		"require", "require-js", "requirements", "backend"},
	"run": {"model", "base-url", "provider", "lang", "session", "file", "out", "apply", "diff", "no-folder",
		"json", "tests", "test-file", "approve", "timeout", "memory", "backend"},
	"repl":  {"session", "timeout", "memory", "workdir", "backend"},
	"eval":  {"tasks", "model", "base-url", "provider", "samples", "k", "feedback", "results", "json", "compare"},
	"mcp":   {"manifest", "model", "base-url", "provider", "backend", "egress-ceiling"},
	"serve": {"addr", "keys-file", "model", "base-url", "provider", "backend", "data-dir"},
}

// helpTopic is a topic of `codeagent help TOPIC`: what it is about and
// the flags that each command's -h leaves out, in sections.
type helpTopic struct {
	summary  string
	intro    string
	sections []flagSection
}

// flagSection is a group of flags of a help topic, and the page that
// says more.
type flagSection struct {
	title, docs string
	flags       []string
}

// helpTopics are the topics of `codeagent help`. A flag named in one of
// their sections is left out of every command's -h.
var helpTopics = map[string]helpTopic{
	"backends": {
		summary: "the flags -h leaves out: Docker and Kubernetes, package sources, the server's tuning",
		intro: "The flags each command's -h leaves out: the settings of the Docker and Kubernetes backends, where\n" +
			"packages come from, and the tuning of the model's answers, the network and the server. They work\n" +
			"as every flag does, on the commands named. --backend chooses the backend (auto, namespace, docker or\n" +
			"kubernetes); codeagent doctor --backend NAME says what it offers here.",
		sections: []flagSection{
			{"Docker and Kubernetes backends", "docs/EXEC.md#the-docker-backend, docs/KUBERNETES.md",
				[]string{"image", "kubeconfig", "namespace", "runtime-class", "seccomp-profile"}},
			{"Package sources", "docs/DEPENDENCIES.md", []string{"index-url", "find-links", "npm-registry", "allow-source-builds"}},
			{"The model's answers and repairs", "docs/PROVIDERS.md, docs/RUN.md", []string{"max-answer", "fresh-start-after"}},
			{"Network", "docs/EXEC.md", []string{"egress-max-bytes", "egress-resolve"}},
			{"Warm sandboxes", "docs/KERNELS.md", []string{"warm", "warm-python"}},
			{"The server's capacity, rates and timeouts", "docs/SERVER.md",
				[]string{"workers", "queue", "rate", "approval-timeout", "shutdown-timeout"}},
			{"The server's uploads and sessions", "docs/SERVER.md",
				[]string{"max-upload", "max-upload-files", "session-max-files", "session-max-size"}},
			{"The server's kernels", "docs/KERNELS.md", []string{"max-kernels", "kernel-memory", "kernel-idle-timeout"}},
		},
	},
}

// hiddenTopic is the help topic that lists flag name, or "" when every
// -h shows it.
func hiddenTopic(name string) string {
	for t, topic := range helpTopics {
		for _, s := range topic.sections {
			if slices.Contains(s.flags, name) {
				return t
			}
		}
	}
	return ""
}

// printFlags writes the flags of fs as its command's -h shows them: the
// common ones first, the others in alphabetical order, without those of a
// help topic, which a last line names.
func printFlags(fs *flag.FlagSet) {
	name := strings.TrimPrefix(fs.Name(), "codeagent ")
	var first, rest []*flag.Flag
	topics := map[string]bool{}
	for _, n := range commonFlags[name] {
		if f := fs.Lookup(n); f != nil {
			first = append(first, f)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		switch t := hiddenTopic(f.Name); {
		case t != "":
			topics[t] = true
		case !slices.Contains(commonFlags[name], f.Name):
			rest = append(rest, f)
		}
	})
	w := fs.Output()
	col := headWidth(append(slices.Clone(first), rest...), 24)
	writeFlags(w, first, col)
	if len(first) > 0 && len(rest) > 0 {
		fmt.Fprintln(w)
	}
	writeFlags(w, rest, col)
	if len(topics) > 0 {
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, "codeagent help "+t)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "\nMore flags (backends, package sources, tuning): %s\n", strings.Join(names, ", "))
	}
}

// headWidth is the width of the flags' names and value placeholders, at
// most most: a longer one pushes its usage right.
func headWidth(flags []*flag.Flag, most int) int {
	col := 0
	for _, f := range flags {
		col = max(col, len(flagHead(f)))
	}
	return min(col, most)
}

// writeFlags writes one line per flag (more when its usage has line
// breaks): --name VALUE, the usage, the default when it is not the zero
// value and the usage does not say it.
func writeFlags(w io.Writer, flags []*flag.Flag, col int) {
	for _, f := range flags {
		_, usage := flag.UnquoteUsage(f)
		if d := f.DefValue; !isZeroDefault(f) && !strings.Contains(usage, "(default") {
			if _, ok := f.Value.(flag.Getter); ok && placeholder(f) == "string" {
				d = fmt.Sprintf("%q", d)
			}
			usage += " (default " + d + ")"
		}
		lines := strings.Split(usage, "\n")
		fmt.Fprintf(w, "  %-*s  %s\n", col, flagHead(f), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "  %-*s  %s\n", col, "", l)
		}
	}
}

// isZeroDefault reports that f's default is its type's zero value, which
// the usage does not repeat.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]":
		return true
	}
	return false
}

// flagHead is --name and the kind of value it takes.
func flagHead(f *flag.Flag) string {
	if p := placeholder(f); p != "" {
		return "--" + f.Name + " " + p
	}
	return "--" + f.Name
}

// placeholder is the kind of value f takes: what flag.UnquoteUsage says,
// or, for this package's flag types, their own.
func placeholder(f *flag.Flag) string {
	switch f.Value.(type) {
	case durationFlag:
		return "duration"
	case sizeFlag:
		return "size"
	case intFlag:
		return "int"
	case cpusFlag:
		return "cores"
	case envFlag:
		return "K=V"
	case allowFlag:
		return "HOST"
	case resolveFlag:
		return "NAME=ADDR:PORT"
	case sinceFlag:
		return "time"
	case *repeated, *caFlag:
		return "string"
	}
	name, _ := flag.UnquoteUsage(f)
	return name
}

// Help by command and topic.

// flagSetsMu guards flagSetSink, which newFlagSet tells of each flag set
// it makes: flagsOf collects a command's flags so.
var (
	flagSetsMu  sync.Mutex
	flagSetSink func(*flag.FlagSet)
)

// madeFlagSet tells flagSetSink of fs.
func madeFlagSet(fs *flag.FlagSet) {
	flagSetsMu.Lock()
	defer flagSetsMu.Unlock()
	if flagSetSink != nil {
		flagSetSink(fs)
	}
}

// flagsOf returns the flag set command c registers: it runs c with -h,
// which parses nothing else and runs nothing, its usage discarded.
func flagsOf(c command) *flag.FlagSet {
	var got *flag.FlagSet
	flagSetsMu.Lock()
	flagSetSink = func(fs *flag.FlagSet) {
		if fs.Name() == "codeagent "+c.name && got == nil {
			got = fs
		}
	}
	flagSetsMu.Unlock()
	defer func() {
		flagSetsMu.Lock()
		flagSetSink = nil
		flagSetsMu.Unlock()
	}()
	c.run(context.Background(), stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, []string{"-h"})
	return got
}

// cmdHelp is `codeagent help [COMMAND|TOPIC]`.
func cmdHelp(ctx context.Context, s stdio, args []string) int {
	switch {
	case len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		usage(s.err)
		return exitOK
	case len(args) > 1:
		printErr(s.err, "help takes one command or topic, got %q\nsee 'codeagent help'", strings.Join(args, " "))
		return exitUsage
	}
	if t, ok := helpTopics[args[0]]; ok {
		printTopic(s.err, args[0], t)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, s, []string{"-h"})
		}
	}
	printErr(s.err, "help: no command or topic %q\nsee 'codeagent help'", args[0])
	return exitUsage
}

// printTopic writes a help topic: its introduction and, in each section,
// its flags as -h would show them, under the commands that take them (a
// flag whose usage differs between commands once for each).
func printTopic(w io.Writer, name string, t helpTopic) {
	fmt.Fprintf(w, "usage: codeagent help %s\n\n%s\n", name, t.intro)
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	sets := make([]*flag.FlagSet, len(cs))
	for i, c := range cs {
		sets[i] = flagsOf(c)
	}
	for _, sec := range t.sections {
		fmt.Fprintf(w, "\n%s (%s)\n", sec.title, sec.docs)
		var takers []string                 // in the order they first take a flag
		groups := map[string][]*flag.Flag{} // takers: their flags
		for _, n := range sec.flags {
			var seen []*flag.Flag // one of each usage
			by := map[*flag.Flag][]string{}
			for i, c := range cs {
				g := sets[i].Lookup(n)
				if g == nil {
					continue
				}
				j := slices.IndexFunc(seen, func(f *flag.Flag) bool { return f.Usage == g.Usage && f.DefValue == g.DefValue })
				if j < 0 {
					seen, j = append(seen, g), len(seen)
				}
				by[seen[j]] = append(by[seen[j]], c.name)
			}
			for _, f := range seen {
				k := strings.Join(by[f], ", ")
				if _, ok := groups[k]; !ok {
					takers = append(takers, k)
				}
				groups[k] = append(groups[k], f)
			}
		}
		for _, k := range takers {
			fmt.Fprintf(w, "taken by %s:\n", k)
			writeFlags(w, groups[k], headWidth(groups[k], 40))
		}
	}
}
