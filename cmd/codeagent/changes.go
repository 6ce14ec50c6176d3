package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/codeagent/codeagent/termtext"
	"github.com/codeagent/codeagent/workspace"
)

// changes works on the changes runs made to a folder and kept, not
// applied (see run_folder.go).
func cmdChanges(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("changes", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, `usage: codeagent changes list|diff ID|apply ID|rm ID [flags]

Work on the changes a run made to its folder and kept instead of applying
them (no terminal to ask at, no --apply, or some refused). apply brings them
to the folder, refusing any file that changed there since the run started;
what was refused stays kept.

Exit status: 0 on success, 1 when a change was refused, 2 for usage errors
or an unknown ID.

flags:`)
		fs.PrintDefaults()
	}
	dir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "with list: print JSON")
	verb, ids, code, done := parseVerb(fs, s, args, "changes needs what to do: list, diff ID, apply ID or rm ID")
	if done {
		return code
	}
	want := map[string]int{"list": 0, "diff": 1, "apply": 1, "rm": 1}
	n, ok := want[verb]
	switch {
	case !ok:
		return usageLine(fs, s, "unknown changes command %q (want list, diff, apply or rm)", verb)
	case len(ids) != n:
		return usageLine(fs, s, "changes %s takes %d ID(s)", verb, n)
	}
	dataDir, err := resolveDataDir(*dir, os.Getenv)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	id := ""
	if n == 1 {
		id = ids[0]
	}
	return runChanges(s, dataDir, verb, id, *asJSON)
}

func runChanges(s stdio, dataDir, verb, id string, asJSON bool) int {
	if verb == "list" {
		list, err := workspace.ListKept(dataDir)
		if err != nil {
			return exitCodeFor(s.err, err)
		}
		if asJSON {
			return exitCodeFor(s.err, writeJSON(s.out, list))
		}
		tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCHANGES\tFOLDER\tTASK")
		for _, k := range list {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k.ID, len(k.Changes), termtext.Name(k.Folder), termtext.Name(shorten(k.Task, 60)))
		}
		return exitCodeFor(s.err, tw.Flush())
	}
	k, err := workspace.LoadKept(dataDir, id)
	if errors.Is(err, workspace.ErrNoKept) {
		return exitCodeFor(s.err, usagef("%v (see 'codeagent changes list')", err))
	}
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	switch verb {
	case "rm":
		return exitCodeFor(s.err, workspace.RemoveKept(dataDir, id))
	case "diff":
		printChanges(s.out, &folderOutcome{Dir: k.Folder, Changes: k.Changes})
		diff, err := workspace.Diff(k.Folder, k.Files, k.Changes)
		if err != nil {
			return exitCodeFor(s.err, err)
		}
		io.WriteString(s.out, termtext.Text(diff))
		return exitOK
	}
	applied, refused, err := workspace.Apply(k.Folder, k.Files, k.Base, k.Changes)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	for _, c := range applied {
		fmt.Fprintf(s.out, "applied  %-8s %s\n", c.Kind, termtext.Name(c.Path))
	}
	for _, r := range refused {
		printErr(s.err, "not applied: %s: %s", termtext.Name(r.Path), r.Reason)
	}
	if len(refused) > 0 {
		k.Changes = refusedOnly(k.Changes, refused)
		if err := k.Save(dataDir); err != nil {
			return exitCodeFor(s.err, err)
		}
		printErr(s.err, "the changes stay kept as %s ('codeagent changes rm %s' drops them)", id, id)
		return exitFailure
	}
	return exitCodeFor(s.err, workspace.RemoveKept(dataDir, id))
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
