package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/termtext"
)

// envs works on the dependency environments kept under the data directory
// (package deps): installed once, reused by every execution that asks for
// the same requirements.
func cmdEnvs(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("envs", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, `usage: codeagent envs list|rm KEY...|prune [flags]

Work on the dependency environments that --requirements and --require
installed: list them (most recently used first), remove some by key (or a
unique prefix of 6 characters or more), or prune the least recently used
until the rest take at most --max (all when 0). An environment an execution
is using is never removed.

flags:`)
		printFlags(fs)
	}
	dir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "with list: print JSON")
	var most int64
	sizeVar(fs, &most, "max", sizeBounds{min: 0, max: 1 << 50}, "with prune: the size to prune down to (default 0: every environment not in use)")
	verb, keys, code, done := parseVerb(fs, s, args, "envs needs what to do: list, rm KEY... or prune")
	if done {
		return code
	}
	switch {
	case verb != "list" && verb != "rm" && verb != "prune":
		return usageLine(fs, s, "unknown envs command %q (want list, rm or prune)", verb)
	case verb == "rm" && len(keys) == 0:
		return usageLine(fs, s, "envs rm takes the keys of the environments to remove")
	case verb != "rm" && len(keys) > 0:
		return usageLine(fs, s, "envs %s takes no arguments", verb)
	}
	dataDir, err := resolveDataDir(*dir, os.Getenv)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	st := &deps.Store{Dir: dataDir + "/envs"}
	switch verb {
	case "list":
		return listEnvs(s, st, *asJSON)
	case "rm":
		for _, k := range keys {
			err := st.Remove(k)
			switch {
			case errors.Is(err, iofs.ErrNotExist) || errors.Is(err, deps.ErrInvalid):
				return exitCodeFor(s.err, usagef("%v (see 'codeagent envs list')", err))
			case err != nil:
				return exitCodeFor(s.err, err)
			}
			fmt.Fprintf(s.out, "removed %s\n", k)
		}
		return exitOK
	}
	removed, err := st.Prune(most)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	var freed int64
	for _, e := range removed {
		freed += e.Size
	}
	fmt.Fprintf(s.out, "removed %d environment(s), %s\n", len(removed), sandbox.FormatSize(freed))
	return exitOK
}

func listEnvs(s stdio, st *deps.Store, asJSON bool) int {
	list, err := st.List()
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	if asJSON {
		if list == nil {
			list = []deps.Env{}
		}
		return exitCodeFor(s.err, writeJSON(s.out, list))
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSIZE\tUSED\tPACKAGES")
	for _, e := range list {
		pkgs := make([]string, len(e.Packages))
		for i, p := range e.Packages {
			pkgs[i] = p.Name + "==" + p.Version
			if p.Lang == "javascript" {
				pkgs[i] = p.Name + "@" + p.Version
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Key, sandbox.FormatSize(e.Size), e.Used.Local().Format("2006-01-02 15:04"),
			termtext.Name(shorten(strings.Join(pkgs, " "), 100)))
	}
	return exitCodeFor(s.err, tw.Flush())
}
