package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// program assembles the deliverable from the successful executions: for
// python the cells, in order (their state carries from one to the next);
// for the other languages, whose runs keep no state, the last one. stdout
// is what they printed, which the replay must reproduce.
func (t *toolRun) program() (code, stdout string) {
	if len(t.cells) == 0 {
		return "", ""
	}
	var c, o strings.Builder
	if t.a.lang.Name == "python" {
		c.WriteString("# Assembled by codeagent from the cells that succeeded, in order.\n")
	}
	for i, cell := range t.cells {
		if i > 0 {
			c.WriteString("\n")
		}
		c.WriteString(cell.code)
		if !strings.HasSuffix(cell.code, "\n") {
			c.WriteString("\n")
		}
		o.WriteString(cell.stdout)
	}
	return c.String(), o.String()
}

// replay runs code as the program in a fresh workspace that holds only the
// files the run started with, and compares what it printed and created
// with what the cells did (want is their stdout). diff says how they
// differ, "" when the replay reproduced them; an error means the replay
// could not run.
func (t *toolRun) replay(ctx context.Context, code, want string) (sandbox.Result, string, error) {
	t0 := time.Now()
	fresh, err := workspace.New("")
	if err != nil {
		return sandbox.Result{}, "", fmt.Errorf("replay: %w", err)
	}
	defer fresh.Close()
	inputs := make([]workspace.Artifact, 0, len(t.before.Files))
	for p := range t.before.Files {
		if !t.exclude(p) {
			inputs = append(inputs, workspace.Artifact{Path: p})
		}
	}
	var notes []string
	if _, err := t.ws.CopyOut(inputs, fresh.Dir, 0); err != nil {
		notes = append(notes, "some of the original files could not be given to it: "+cutRunes(err.Error(), 300))
	}
	if err := fresh.WriteFile(t.a.SolutionFile(), []byte(code)); err != nil {
		return sandbox.Result{}, "", fmt.Errorf("replay: %w", err)
	}
	before, err := fresh.Snapshot(t.a.cfg.Artifacts)
	if err != nil {
		return sandbox.Result{}, "", fmt.Errorf("replay: %w", err)
	}
	lim := t.byName[ExecTool(t.a.lang.Name)].limits
	res, err := t.sandboxRun(ctx, sandbox.Spec{Command: t.a.lang.Command(sandbox.WorkspacePath + "/" + t.a.SolutionFile()),
		Workspace: fresh.Dir, Limits: lim}, t.a.lang.Env) // no build cache: the fresh workspace holds only what the run had
	if err != nil {
		return res, "", err
	}
	class := Classify(res, string(res.Stderr))
	var diffs []string
	if class != ClassNone {
		what := fmt.Sprintf("exit status %d", res.ExitStatus())
		if res.Status != sandbox.StatusError {
			what = res.Message
		}
		diffs = append(diffs, fmt.Sprintf("- it failed (%s, %s): %s", class, what, lastLine(string(res.Stderr))))
	} else if d := outputDiff(want, string(res.Stdout)); d != "" {
		diffs = append(diffs, d)
	}
	diffs = append(diffs, t.artifactDiffs(fresh, before)...)
	if len(diffs) > 0 {
		diffs = append(diffs, notes...)
	}
	diff := strings.Join(diffs, "\n")
	if diff != "" && class == ClassNone {
		class = ClassReplay
	}
	t.emit(Event{Type: EventReplayed, Attempt: t.at.N, Phase: PhaseTool, Code: t.a.redact.Code(code), CodeSHA256: sha(code), Result: resultJSON(res),
		ErrorClass: class, Message: diff, DurationMS: ms(t0)})
	return res, diff, nil
}

// normalizeOutput drops trailing spaces and blank lines, and CRs.
func normalizeOutput(s string) []string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// outputDiff says where the replay's output first differs from the cells'.
func outputDiff(want, got string) string {
	w, g := normalizeOutput(want), normalizeOutput(got)
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if i >= len(w) || i >= len(g) || wl != gl {
			show := func(lines []string, l string) string {
				if i >= len(lines) {
					return "(nothing: the output ended)"
				}
				return fmt.Sprintf("%q", cutRunes(l, 200))
			}
			return fmt.Sprintf("- its output differs from what the cells printed at line %d: the cells printed %s, the program %s",
				i+1, show(w, wl), show(g, gl))
		}
	}
	return ""
}

// imageExts are files compared by existence only: renderers may embed
// dates or vary by a byte.
var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".svg": true, ".pdf": true, ".webp": true}

// artifactDiffs compares the files the cells created or changed (without
// the kernel's own figures) with those the replay did in fresh.
func (t *toolRun) artifactDiffs(fresh *workspace.Workspace, before workspace.Snapshot) []string {
	lim := t.a.cfg.Artifacts
	wantArts, _, err := t.ws.Changes(t.before, lim, func(rel string) bool { return t.exclude(rel) || t.images[rel] })
	if err != nil {
		return []string{"- the files the cells created could not be listed: " + err.Error()}
	}
	gotArts, _, err := fresh.Changes(before, lim, t.exclude)
	if err != nil {
		return []string{"- the files the program created could not be listed: " + err.Error()}
	}
	got := map[string]bool{}
	for _, a := range gotArts {
		got[a.Path] = true
	}
	var diffs []string
	for _, a := range wantArts {
		name := strings.Map(printable, a.Path)
		switch {
		case !got[a.Path] && t.written[a.Path]:
			diffs = append(diffs, fmt.Sprintf("- it did not create %s, which you wrote with write_file: the program must create it itself", name))
		case !got[a.Path]:
			diffs = append(diffs, fmt.Sprintf("- it did not create %s, which the calls did", name))
		case !imageExts[strings.ToLower(path.Ext(a.Path))] && !sameFile(t.ws, fresh, a.Path):
			diffs = append(diffs, fmt.Sprintf("- %s differs from the one the calls left", name))
		}
		delete(got, a.Path)
	}
	var extra []string
	for p := range got {
		if !t.images[p] {
			extra = append(extra, strings.Map(printable, p))
		}
	}
	sort.Strings(extra)
	for _, p := range extra {
		diffs = append(diffs, fmt.Sprintf("- it also created %s, which the calls did not", p))
	}
	return diffs
}

// sameFile compares rel in two workspaces by content.
func sameFile(a, b *workspace.Workspace, rel string) bool {
	ha, okA := fileHash(a, rel)
	hb, okB := fileHash(b, rel)
	return okA && okB && ha == hb
}

func fileHash(w *workspace.Workspace, rel string) ([32]byte, bool) {
	f, _, err := w.OpenRegular(rel)
	if err != nil {
		return [32]byte{}, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, false
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, true
}

// okResult is a successful run that printed stdout, for the verifier.
func okResult(stdout string) sandbox.Result {
	return sandbox.Result{Status: sandbox.StatusOK, Stdout: []byte(stdout)}
}
