package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/termtext"
	"github.com/codeagent/codeagent/workspace"
)

// A run started without --workdir, --session or --file works on a copy of
// the folder it is started in: the program reads the folder's files in
// place, and what it writes is shown at the end and applied to the folder
// only when the user says so (--apply, or yes at the prompt). Otherwise
// the changes are kept in the data directory for `codeagent changes apply`.

// folderOutcome is what happened to the folder, in --json as "folder".
type folderOutcome struct {
	Dir     string              `json:"dir"`
	Changes []workspace.Change  `json:"changes"`
	Skipped []workspace.Skipped `json:"skipped,omitempty"`
	Applied bool                `json:"applied"` // every change is in the folder
	Refused []workspace.Skipped `json:"refused,omitempty"`
	Kept    string              `json:"kept,omitempty"` // the ID of the kept changes
}

// offerFolder scans the folder a run, exec or repl is started in, for a
// workspace to be made in wsBase. A system or home directory is not
// offered: that is said on stderr and the program starts from an empty
// workspace (nil, nil). A folder that cannot be read, or whose copy would
// not fit (workspace.CheckRoom), is an error, before anything runs.
func offerFolder(dir, wsBase string, s stdio) (*workspace.Folder, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		err = workspace.CheckWorkdir(real)
	}
	if err != nil {
		printErr(s.err, "the current folder is not offered to the program: %v; give files with --file or a folder with --workdir", err)
		return nil, nil
	}
	f, err := workspace.ScanFolder(real, workspace.DefaultFolderLimits())
	if err == nil {
		err = f.CheckRoom(wsBase)
	}
	if err != nil {
		return nil, fmt.Errorf("the current folder: %w (--no-folder runs without it)", err)
	}
	var held []string
	for _, sk := range f.Skipped {
		if sk.Reason == workspace.HeldBack {
			held = append(held, sk.Path)
		}
	}
	if len(held) > 0 {
		if len(held) > 5 {
			held = append(held[:5], fmt.Sprintf("and %d more", len(held)-5))
		}
		printErr(s.err, "not offered to the program, as they may hold secrets: %s (--no-folder --file FILE offers one)", strings.Join(held, ", "))
	}
	return f, nil
}

// seedFolder copies f into ws, saying on stderr how far it has come each
// second when the copy takes longer than one.
func seedFolder(f *workspace.Folder, ws *workspace.Workspace, s stdio) error {
	start := time.Now()
	next := start.Add(time.Second)
	said := false
	err := f.SeedWith(ws, func(p workspace.SeedProgress) {
		if now := time.Now(); now.After(next) {
			next = now.Add(time.Second)
			said = true
			printErr(s.err, "copying the folder into the run's workspace: %d of %d files, %s of %s", p.Files, p.TotalFiles,
				sandbox.FormatSize(p.Bytes), sandbox.FormatSize(p.TotalBytes))
		}
	})
	if said && err == nil {
		printErr(s.err, "copied the folder (%d files, %s) in %.1f s", len(f.Files), sandbox.FormatSize(f.Bytes), time.Since(start).Seconds())
	}
	return err
}

// folderEnd is how a command ends its work in a folder (run, exec, repl).
type folderEnd struct {
	human     bool      // people read the output: the change list and lines are printed
	list      io.Writer // where the change list goes (run: stdout; exec and repl: stderr)
	diff      bool      // the diff after the list (--diff)
	apply     bool      // --apply
	sensitive []string  // --apply-sensitive
	task      string    // what the kept changes are named by
	success   bool      // --apply applies only after a success
	what      string    // "run", "program": what failed, in the line that says so
	noAsk     bool      // never ask at the terminal (the repl's reader still holds it)
}

// runEnd is a run's folderEnd.
func runEnd(o runOptions, s stdio, res *agent.Result) folderEnd {
	return folderEnd{human: !o.JSON && o.Events != "-", list: s.out, diff: o.Diff, apply: o.Apply,
		sensitive: o.ApplySensitive, task: o.Task, success: res.Success, what: "run"}
}

// finishFolder lists the changes to the folder and applies them (--apply
// after a success, or yes at the terminal), or keeps them.
func finishFolder(e folderEnd, s stdio, dataDir string, f *workspace.Folder, ws *workspace.Workspace) (*folderOutcome, error) {
	out := &folderOutcome{Dir: f.Dir}
	var err error
	out.Changes, out.Skipped, err = f.FolderChanges(ws, workspace.Limits{})
	if out.Changes == nil {
		out.Changes = []workspace.Change{}
	}
	if err != nil {
		return out, fmt.Errorf("changes to %s: %w", f.Dir, err)
	}
	human := e.human
	if human && (len(out.Changes) > 0 || len(out.Skipped) > 0 || e.list == s.out) {
		printChanges(e.list, out)
		if e.diff && len(out.Changes) > 0 {
			diff, err := workspace.Diff(f.Dir, ws.Dir, out.Changes)
			if err != nil {
				return out, err
			}
			io.WriteString(e.list, termtext.Text(diff))
		}
	}
	if _, err := selectChanges(out.Changes, e.sensitive, "--apply-sensitive "); err != nil {
		printErr(s.err, "%v", err)
	}
	if len(out.Changes) == 0 {
		return out, nil
	}
	apply := e.apply && e.success
	if !e.apply && !e.noAsk && human && termtext.IsTerminal(s.in) && termtext.IsTerminal(s.err) {
		apply = askApply(s, out, f, ws)
	}
	var applied *workspace.ApplyResult
	if apply {
		applied, err = workspace.Apply(f.Dir, ws.Dir, f.Files, out.Changes, workspace.ApplyOptions{Sensitive: e.sensitive})
		if err != nil {
			return out, err
		}
		out.Applied, out.Refused = applied.Complete(), applied.Refused
		if out.Applied {
			if human {
				fmt.Fprintf(e.list, "applied %d change(s) to %s\n", len(applied.Applied)+len(applied.Already), termtext.Name(f.Dir))
			}
			return out, nil
		}
	}
	// What was not applied is kept, not lost.
	k, err := workspace.Keep(dataDir, f, ws, e.task, out.Changes)
	if err != nil {
		return out, err
	}
	if applied != nil {
		k.Changes = k.Without(append(append([]workspace.Change(nil), applied.Applied...), applied.Already...))
		if err := k.Save(dataDir); err != nil {
			return out, err
		}
		printNotApplied(s.err, applied, k.ID)
	}
	out.Kept = k.ID
	why := "the folder is unchanged"
	switch {
	case applied != nil && applied.Stopped:
		why = "the folder is partly changed"
	case e.apply && !e.success:
		why = "the " + e.what + " failed, so --apply did not apply its changes"
	}
	printKept(s, dataDir, why, e.what, k)
	return out, nil
}

// printKept is the line after a run (program, repl) whose changes are
// kept: where, and how to apply or drop them.
func printKept(s stdio, dataDir, why, what string, k *workspace.Kept) {
	printErr(s.err, "%s; the %s's %d change(s) are kept in %s: 'codeagent changes apply %s' applies them, 'codeagent changes rm %s' drops them ('codeagent changes diff %s' shows them)",
		why, what, len(k.Changes), k.Dir(dataDir), k.ID, k.ID, k.ID)
}

// printChanges lists the changes with their sizes.
func printChanges(w io.Writer, out *folderOutcome) {
	var b strings.Builder
	fmt.Fprintf(&b, "── changes to %s ──\n", termtext.Name(out.Dir))
	if len(out.Changes) == 0 {
		b.WriteString("(none)\n")
	}
	for _, c := range out.Changes {
		fmt.Fprintf(&b, "%-8s %s (%s)", c.Kind, termtext.Name(c.Path), sandbox.FormatSize(c.Size))
		if c.Sensitive != "" {
			fmt.Fprintf(&b, " refused at apply: %s (--apply-sensitive %s applies it)", c.Sensitive, termtext.Name(c.Path))
		}
		b.WriteString("\n")
	}
	for _, sk := range out.Skipped {
		fmt.Fprintf(&b, "skipped  %s: %s\n", termtext.Name(sk.Path), termtext.Name(sk.Reason))
	}
	io.WriteString(w, b.String())
}

// askApply asks at the terminal whether to apply the changes; d shows the
// diff first.
func askApply(s stdio, out *folderOutcome, f *workspace.Folder, ws *workspace.Workspace) bool {
	in := bufio.NewReader(s.in)
	for {
		fmt.Fprintf(s.err, "Apply these %d change(s) to %s? [y/N/d=diff] ", len(out.Changes), termtext.Name(out.Dir))
		line, err := in.ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true
		case "d", "diff":
			diff, derr := workspace.Diff(f.Dir, ws.Dir, out.Changes)
			if derr != nil {
				printErr(s.err, "%v", derr)
			}
			io.WriteString(s.err, termtext.Text(diff))
			if err == nil {
				continue
			}
		}
		return false
	}
}

// folderFor is the folder a run is offered: the current directory unless
// the run has its own workspace (--workdir, --session), its own inputs
// (--file) or --no-folder.
func folderFor(o *runOptions) (string, error) {
	if o.Workdir != "" || o.Session != "" || len(o.Files) > 0 || o.NoFolder {
		if o.Apply || o.Diff || len(o.ApplySensitive) > 0 {
			return "", usagef("--apply, --apply-sensitive and --diff are for a run in the current folder: not with --workdir, --session, --file or --no-folder")
		}
		return "", nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", errors.New("the current folder: " + err.Error())
	}
	return dir, nil
}

// folderFinish is what a run leaves for its end: the folder it was offered
// (nil: none) and its workspace, closed by close.
type folderFinish struct {
	f       *workspace.Folder
	ws      *workspace.Workspace
	dataDir string
}

// finish lists, applies or keeps the changes (see finishFolder).
func (fin *folderFinish) finish(o runOptions, s stdio, res *agent.Result) (*folderOutcome, error) {
	if fin == nil || fin.f == nil {
		return nil, nil
	}
	return finishFolder(runEnd(o, s, res), s, fin.dataDir, fin.f, fin.ws)
}

// keep keeps the changes of a run that was interrupted, without asking,
// and says where they are.
func (fin *folderFinish) keep(o runOptions, s stdio) { fin.keepAs(o.Task, "run", s) }

// keepAs keeps the changes of what (a run, a program, a repl) under the
// name task, without asking.
func (fin *folderFinish) keepAs(task, what string, s stdio) {
	if fin == nil || fin.f == nil {
		return
	}
	changes, _, err := fin.f.FolderChanges(fin.ws, workspace.Limits{})
	if err == nil && len(changes) > 0 {
		var k *workspace.Kept
		if k, err = workspace.Keep(fin.dataDir, fin.f, fin.ws, task, changes); err == nil {
			printKept(s, fin.dataDir, "the folder is unchanged", what, k)
		}
	}
	if err != nil {
		printErr(s.err, "the run's changes to %s: %v", fin.f.Dir, err)
	}
}

func (fin *folderFinish) close() {
	if fin != nil && fin.ws != nil {
		fin.ws.Close()
	}
}
