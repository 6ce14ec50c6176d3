package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codeagent/codeagent/termtext"
	"github.com/codeagent/codeagent/workspace"
)

// changes works on the changes runs made to a folder and kept, not
// applied (see run_folder.go).
func cmdChanges(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("changes", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, `usage: codeagent changes list | diff ID | apply ID [PATH...] | rm ID... | prune [--older-than AGE] [flags]

Work on the changes a run made to its folder and kept instead of applying
them (no terminal to ask at, no --apply, or refused). apply brings them to
the folder all or none: every change is checked first (a file that changed
in the folder since the run started, a refused name, a link, the space), and
when one fails nothing is written and each is named. With PATHs it applies
those alone (a directory: what is below it). Applying again after an
interrupted apply finishes it. rm drops change sets; prune drops those older
than AGE (all without --older-than).

Exit status: 0 on success, 1 when a change was refused, 2 for usage errors
or an unknown ID.

flags:`)
		printFlags(fs)
	}
	dir := dataDirFlag(fs)
	asJSON := fs.Bool("json", false, "with list and apply: print JSON")
	var o changesOptions
	fs.Var((*repeated)(&o.Force), "force", "with apply: replace or delete PATH although it changed since the run started (repeatable)")
	fs.Var((*repeated)(&o.Sensitive), "apply-sensitive", "with apply: apply PATH although its name is refused, as .npmrc (repeatable; never .git)")
	olderThan := fs.String("older-than", "", "with prune: drop the change sets kept for longer than this (e.g. 7d, 36h)")
	verb, args, code, done := parseVerb(fs, s, args, "changes needs what to do: list, diff ID, apply ID, rm ID... or prune")
	if done {
		return code
	}
	switch {
	case verb != "list" && verb != "diff" && verb != "apply" && verb != "rm" && verb != "prune":
		return usageLine(fs, s, "unknown changes command %q (want list, diff, apply, rm or prune)", verb)
	case (verb == "list" || verb == "prune") && len(args) != 0:
		return usageLine(fs, s, "changes %s takes no ID", verb)
	case verb == "diff" && len(args) != 1:
		return usageLine(fs, s, "changes diff takes one ID")
	case (verb == "apply" || verb == "rm") && len(args) == 0:
		return usageLine(fs, s, "changes %s needs an ID", verb)
	case verb != "apply" && len(o.Force)+len(o.Sensitive) > 0:
		return usageLine(fs, s, "--force and --apply-sensitive are for changes apply")
	case verb != "prune" && *olderThan != "":
		return usageLine(fs, s, "--older-than is for changes prune")
	}
	dataDir, err := resolveDataDir(*dir, os.Getenv)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	o.DataDir, o.JSON = dataDir, *asJSON
	switch verb {
	case "list":
		return listChanges(s, o)
	case "prune":
		return pruneChanges(s, o, *olderThan)
	case "rm":
		return removeChanges(s, o, args)
	}
	k, err := workspace.LoadKept(dataDir, args[0])
	if errors.Is(err, workspace.ErrNoKept) {
		return exitCodeFor(s.err, usagef("%v (see 'codeagent changes list')", err))
	}
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	if verb == "diff" {
		printChanges(s.out, &folderOutcome{Dir: k.Folder, Changes: k.Changes})
		diff, err := workspace.Diff(k.Folder, k.Files, k.Changes)
		if err != nil {
			return exitCodeFor(s.err, err)
		}
		io.WriteString(s.out, termtext.Text(diff))
		return exitOK
	}
	o.Paths = args[1:]
	return applyKept(s, o, k)
}

// changesOptions are the inputs of `codeagent changes`.
type changesOptions struct {
	DataDir   string
	JSON      bool
	Paths     []string // apply: the changes to apply ("": all)
	Force     []string // apply: conflicts overridden
	Sensitive []string // apply: refused names applied
}

func listChanges(s stdio, o changesOptions) int {
	list, err := workspace.ListKept(o.DataDir)
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	if o.JSON {
		if list == nil {
			list = []*workspace.Kept{}
		}
		return exitCodeFor(s.err, writeJSON(s.out, list))
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCHANGES\tKEPT\tFOLDER\tTASK")
	for _, k := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s ago\t%s\t%s\n", k.ID, len(k.Changes), roundAge(time.Since(k.Created)),
			termtext.Name(k.Folder), termtext.Name(shorten(k.Task, 60)))
	}
	return exitCodeFor(s.err, tw.Flush())
}

// roundAge is an age for people: 45s, 12m, 5h, 3d.
func roundAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// removeChanges drops the change sets ids: all of them are checked first,
// so that a mistyped ID drops none.
func removeChanges(s stdio, o changesOptions, ids []string) int {
	for _, id := range ids {
		if _, err := workspace.LoadKept(o.DataDir, id); errors.Is(err, workspace.ErrNoKept) {
			return exitCodeFor(s.err, usagef("%v (see 'codeagent changes list'); none removed", err))
		} else if err != nil {
			return exitCodeFor(s.err, err)
		}
	}
	for _, id := range ids {
		if err := workspace.RemoveKept(o.DataDir, id); err != nil && !errors.Is(err, workspace.ErrNoKept) {
			return exitCodeFor(s.err, err)
		}
		fmt.Fprintf(s.out, "removed %s\n", id)
	}
	return exitOK
}

// pruneChanges drops the change sets kept for longer than olderThan, or
// all of them.
func pruneChanges(s stdio, o changesOptions, olderThan string) int {
	cutoff := time.Now()
	if olderThan != "" {
		age, err := parseAge(olderThan)
		if err != nil {
			return exitCodeFor(s.err, err)
		}
		cutoff = cutoff.Add(-age)
	}
	removed, err := workspace.PruneKept(o.DataDir, cutoff)
	for _, k := range removed {
		fmt.Fprintf(s.out, "removed %s (%d change(s) to %s)\n", k.ID, len(k.Changes), termtext.Name(k.Folder))
	}
	if err == nil && len(removed) == 0 {
		fmt.Fprintln(s.out, "no kept changes to remove")
	}
	return exitCodeFor(s.err, err)
}

// applyKept applies the kept changes k (o.Paths of them, or all), then
// drops what is applied from the set, and the set when nothing is left.
func applyKept(s stdio, o changesOptions, k *workspace.Kept) int {
	selected, err := selectChanges(k.Changes, o.Paths, "")
	if err == nil {
		_, err = selectChanges(k.Changes, o.Force, "--force ")
	}
	if err == nil {
		_, err = selectChanges(k.Changes, o.Sensitive, "--apply-sensitive ")
	}
	if err != nil {
		return exitCodeFor(s.err, usagef("%v (see 'codeagent changes diff %s')", err, k.ID))
	}
	res, err := workspace.Apply(k.Folder, k.Files, k.Base, selected, workspace.ApplyOptions{Force: o.Force, Sensitive: o.Sensitive})
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	if o.JSON {
		if err := writeJSON(s.out, res); err != nil {
			return exitCodeFor(s.err, err)
		}
	} else {
		printApplied(s.out, res)
	}
	printNotApplied(s.err, res, k.ID)
	if len(res.Applied)+len(res.Already) > 0 {
		k.Changes = k.Without(append(append([]workspace.Change(nil), res.Applied...), res.Already...))
		if len(k.Changes) == 0 {
			return exitCodeFor(s.err, workspace.RemoveKept(o.DataDir, k.ID))
		}
		if err := k.Save(o.DataDir); err != nil {
			return exitCodeFor(s.err, err)
		}
	}
	printErr(s.err, "%d change(s) stay kept as %s: 'codeagent changes apply %s' applies them, 'codeagent changes rm %s' drops them",
		len(k.Changes), k.ID, k.ID, k.ID)
	if !res.Complete() {
		return exitFailure
	}
	return exitOK
}

// selectChanges returns the changes that paths name (each a change's path
// or a directory holding some; none: all); a path that names none is an
// error, flag naming where it was given.
func selectChanges(changes []workspace.Change, paths []string, flag string) ([]workspace.Change, error) {
	if len(paths) == 0 {
		return changes, nil
	}
	named := make([]bool, len(paths))
	var out []workspace.Change
	for _, c := range changes {
		hit := false
		for i, p := range paths {
			p = strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
			if c.Path == p || strings.HasPrefix(c.Path, p+"/") {
				named[i], hit = true, true
			}
		}
		if hit {
			out = append(out, c)
		}
	}
	for i, ok := range named {
		if !ok {
			return nil, fmt.Errorf("%s%s: no change of that path", flag, termtext.Name(paths[i]))
		}
	}
	return out, nil
}

// printApplied lists what an apply did, one line a change.
func printApplied(w io.Writer, res *workspace.ApplyResult) {
	var b strings.Builder
	for _, c := range res.Applied {
		fmt.Fprintf(&b, "applied  %-8s %s\n", c.Kind, termtext.Name(c.Path))
	}
	for _, c := range res.Already {
		fmt.Fprintf(&b, "already  %-8s %s (found applied)\n", c.Kind, termtext.Name(c.Path))
	}
	io.WriteString(w, b.String())
}

// printNotApplied names each change an apply refused and says what was
// written: nothing, when the check refused; those before the failure,
// when writing stopped.
func printNotApplied(w io.Writer, res *workspace.ApplyResult, id string) {
	for _, r := range res.Refused {
		printErr(w, "not applied: %s: %s", r.Path, r.Reason)
	}
	switch {
	case res.Stopped:
		printErr(w, "applying stopped there: %d change(s) applied, the others not", len(res.Applied))
	case len(res.Refused) > 0:
		printErr(w, "nothing was applied: all or none (%d change(s) refused). 'codeagent changes apply %s PATH...' applies some, --force PATH overrides a conflict, --apply-sensitive PATH applies a refused name", len(res.Refused), id)
	}
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
