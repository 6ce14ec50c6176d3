package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
)

// Bounds of the workspace tools.
const (
	readFileMax  = 32 << 10 // bytes of a file read_file returns
	writeFileMax = 1 << 20  // bytes write_file takes
	listFilesMax = 200      // files list_files names
)

// cellRecord is a successful execution in the run's language: the
// deliverable is made of them.
type cellRecord struct{ code, stdout string }

// toolRun is the state of tool mode in a run.
type toolRun struct {
	*run
	defs    []toolDef
	byName  map[string]*toolDef
	kern    kernel.Interpreter
	steps   int
	called  bool // the model called a tool at least once
	cells   []cellRecord
	images  map[string]bool // figures the kernel saved: displays, not the program's files
	written map[string]bool // files written with write_file
	at      *Attempt        // the verification round under way
}

// step runs one tool call and returns the tool message answering it.
func (t *toolRun) step(ctx context.Context, call llm.ToolCall) (llm.Message, error) {
	t0 := time.Now()
	t.steps++
	st := Step{N: t.steps, Tool: call.Name, CallID: call.ID, Arguments: t.redactJSON(call.Arguments)}
	base := Event{Attempt: t.at.N, Phase: PhaseTool, Step: st.N, MaxSteps: t.a.cfg.MaxSteps, Tool: cutRunes(call.Name, 100), CallID: call.ID}
	e := base
	e.Type, e.Arguments = EventToolCall, st.Arguments
	t.emit(e)
	out, err := t.call(ctx, base, call, &st)
	if err != nil {
		return llm.Message{}, err
	}
	st.Output, st.DurationMS = t.a.redact.String(out), ms(t0)
	t.at.Steps = append(t.at.Steps, st)
	e = base
	e.Type, e.ToolResult, e.ErrorClass, e.DurationMS = EventToolResult, st.Output, st.ErrorClass, st.DurationMS
	t.emit(e)
	return llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: st.Output, IsError: st.ErrorClass != ""}, nil
}

// refuse marks st as a call that never ran and returns the error result.
func refuse(st *Step, class ErrorClass, format string, args ...any) string {
	st.Refused, st.ErrorClass = true, class
	return "error: " + fmt.Sprintf(format, args...)
}

// call validates the call against the tools offered and runs it.
func (t *toolRun) call(ctx context.Context, e Event, call llm.ToolCall, st *Step) (string, error) {
	d := t.byName[call.Name]
	if d == nil {
		if _, known := execTools[call.Name]; known {
			return refuse(st, ClassBadToolCall, "the tool %s is not offered here (the manifest does not list it), so nothing ran. The tools are: %s.",
				call.Name, t.toolNames()), nil
		}
		return refuse(st, ClassBadToolCall, "there is no tool named %q, so nothing ran. The tools are: %s.", cutRunes(call.Name, 60), t.toolNames()), nil
	}
	args, err := d.parse(call.Arguments)
	if err != nil {
		return refuse(st, ClassBadToolCall, "%s was not run: %v. Its arguments: %s.", d.name, err, d.paramList()), nil
	}
	switch d.name {
	case ToolListFiles:
		return t.listFiles(args["path"], st), nil
	case ToolReadFile:
		return t.readFile(args["path"], st), nil
	case ToolWriteFile:
		return t.writeFile(args["path"], args["content"], st), nil
	case ToolInstallPackages:
		return t.installPackages(ctx, args["packages"], st)
	}
	return t.execute(ctx, e, d, args["code"], st)
}

func (t *toolRun) toolNames() string {
	names := make([]string, len(t.defs))
	for i, d := range t.defs {
		names[i] = d.name
	}
	return strings.Join(names, ", ")
}

// execute checks code and runs it: a cell of the kernel for python, a
// program of its own for the other languages.
func (t *toolRun) execute(ctx context.Context, e Event, d *toolDef, code string, st *Step) (string, error) {
	// A kernel cell's names may come from earlier cells: no lint.
	findings, err := t.checkAs(ctx, e, d.safeLang, code, d.lang.Name != "python")
	if err != nil {
		return "", err
	}
	st.Check = withLint(findings, t.lint)
	if len(findings) > 0 && !t.approving() {
		st.Refused, st.ErrorClass = true, ClassifyFindings(findings)
		return render("tool_findings.txt", map[string]any{"Findings": findings}), nil
	}
	gv, err := t.gate(ctx, gate{n: t.at.N, step: st.N, phase: PhaseTool, tool: d.name, lang: d.lang.Name, code: code, findings: findings})
	if err != nil {
		return "", err
	}
	if !gv.run {
		return refuse(st, gv.class, "%s was not run: %s", d.name, gv.why), nil
	}
	edited := ""
	if gv.edited {
		code = gv.code
		edited = "The person supervising this run edited the code before it ran; what ran:\n" + t.a.redact.Code(code) + "\n\n"
	}
	var res sandbox.Result
	var kr kernel.Result
	if d.lang.Name == "python" {
		if kr, err = t.cell(ctx, d, code); errors.Is(err, kernel.ErrInvalid) {
			return refuse(st, ClassBadToolCall, "%s was not run: %v", d.name, err), nil
		}
		res = kr.Result
	} else {
		file := "/code/step" + d.lang.Ext
		res, err = t.sandboxRun(ctx, sandbox.Spec{Command: d.lang.Command(file), Files: []sandbox.File{{Path: file, Data: []byte(code)}},
			Workspace: t.ws.Dir, Limits: d.limits}, d.lang.Environ(t.ws.KeepsCache()))
	}
	if err != nil {
		return "", err
	}
	class := Classify(res, string(res.Stderr))
	st.Result, st.ExecutionCount, st.ErrorClass = resultJSON(res), kr.ExecutionCount, class
	e.Type, e.Result, e.ErrorClass, e.DurationMS = EventExecuted, st.Result, class, res.WallTime.Milliseconds()
	t.emit(e)
	for _, img := range kr.Images {
		t.images[img] = true
	}
	if class == ClassNone && d.lang.Name == t.a.lang.Name {
		rec := cellRecord{code: code, stdout: string(res.Stdout)}
		if d.lang.Name == "python" {
			t.cells = append(t.cells, rec)
		} else {
			t.cells = []cellRecord{rec} // stateless: the last run stands alone
		}
	}
	return edited + t.describe(res, kr, class) + t.lintNote(), nil
}

// cell runs code in the kernel, starting it on first use.
func (t *toolRun) cell(ctx context.Context, d *toolDef, code string) (kernel.Result, error) {
	if t.kern == nil {
		env := map[string]string{}
		for k, v := range t.a.cfg.Env {
			env[k] = v
		}
		l := d.limits
		// No preload: its names (pd, np, plt) would make cells work that
		// fail as the program, which must import what it uses.
		opts := kernel.Options{Sandbox: t.a.deps.Sandbox, Workspace: t.ws.Dir, Env: env, Preload: kernel.PreloadNever,
			Limits: sandbox.Limits{Memory: l.Memory, Processes: l.Processes, Output: l.Output, FileSize: l.FileSize,
				Disk: l.Disk, OpenFiles: l.OpenFiles, CPUs: l.CPUs}}
		if t.task.NewKernel != nil {
			t.kern = t.task.NewKernel(opts)
		} else {
			t.kern = kernel.NewSession(opts)
		}
	}
	res, err := t.kern.Exec(ctx, kernel.Cell{Code: code, Timeout: d.limits.WallTime})
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if errors.Is(err, kernel.ErrInvalid) {
			return res, err
		}
		return res, fmt.Errorf("run the cell in the kernel: %w", err)
	}
	res.Stdout, res.Stderr = t.a.redact.Bytes(res.Stdout), t.a.redact.Bytes(res.Stderr)
	for i, disp := range res.Display {
		if v, ok := disp.Data["text/plain"]; ok {
			res.Display[i].Data = map[string]string{"text/plain": t.a.redact.String(v)}
		} else {
			res.Display[i].Data = nil
		}
	}
	return res, nil
}

// describe is an execution's result for the model.
func (t *toolRun) describe(res sandbox.Result, kr kernel.Result, class ErrorClass) string {
	status := "ok"
	switch {
	case res.Status == sandbox.StatusError:
		status = fmt.Sprintf("error (%s), exit status %d", class, res.ExitStatus())
		if kr.ErrorName != "" {
			status = fmt.Sprintf("error (%s): %s: %s", class, kr.ErrorName, cutRunes(kr.ErrorValue, 300))
		}
	case res.Status != sandbox.StatusOK:
		status = fmt.Sprintf("stopped (%s): %s", class, res.Message)
	}
	if res.StdoutTruncated || res.StderrTruncated {
		status += "; the output was cut at the sandbox's output limit"
	}
	var values, figures []string
	for _, d := range kr.Display {
		v := d.Data["text/plain"]
		switch {
		case d.Kind == "figure" && d.File != "":
			figures = append(figures, d.File)
		case v != "" && d.Kind == "result":
			values = append(values, "value:\n"+Clip(v, t.a.cfg.OutputBudget/2, t.a.cfg.OutputBudget/2))
		case v != "":
			values = append(values, "displayed:\n"+Clip(v, t.a.cfg.OutputBudget/2, t.a.cfg.OutputBudget/2))
		}
	}
	restarted := ""
	if kr.KernelRestarted {
		restarted = fmt.Sprintf("the kernel had ended (%s): this cell ran in a fresh one, without the variables of earlier cells", kr.RestartReason)
	}
	if kr.KernelDied {
		restarted = "the kernel ended during this cell: its variables are lost, the next cell starts a fresh one"
	}
	return render("tool_result.txt", map[string]any{
		"Status": status, "Restarted": restarted, "Stdout": t.clip(res.Stdout), "Stderr": t.clip(res.Stderr),
		"Values": values, "Figures": strings.Join(figures, ", "), "Hint": classHints[class],
	})
}

// relPath checks a path the model gave for a workspace tool: relative, no
// "..", and returns it cleaned ("" is the working directory).
func relPath(p string) (string, error) {
	p = strings.TrimPrefix(strings.TrimSpace(p), "./")
	p = strings.TrimSuffix(p, "/")
	if p == "." || p == "" || p == sandbox.WorkspacePath {
		return "", nil
	}
	p = strings.TrimPrefix(p, sandbox.WorkspacePath+"/")
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%q is not a path relative to the working directory", cutRunes(p, 100))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "" || part == "." {
			return "", fmt.Errorf("%q leaves the working directory or is not a plain path: use names relative to it, without ..", cutRunes(p, 100))
		}
	}
	return p, nil
}

func (t *toolRun) listFiles(dir string, st *Step) string {
	dir, err := relPath(dir)
	if err != nil {
		return refuse(st, ClassFile, "%v", err)
	}
	snap, err := t.ws.Snapshot(t.a.cfg.Artifacts)
	if err != nil {
		return refuse(st, ClassFile, "the working directory could not be read: %v", err)
	}
	under := func(p string) bool { return dir == "" || strings.HasPrefix(p, dir+"/") }
	var paths []string
	for p := range snap.Files {
		if under(p) && !t.exclude(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var b strings.Builder
	for i, p := range paths {
		if i == listFilesMax {
			fmt.Fprintf(&b, "... and %d more files\n", len(paths)-i)
			break
		}
		fmt.Fprintf(&b, "%s (%d bytes)\n", strings.Map(printable, p), snap.Files[p].Size)
	}
	for _, sk := range snap.Skipped {
		if under(sk.Path) {
			fmt.Fprintf(&b, "%s: %s, not followed or read\n", strings.Map(printable, sk.Path), sk.Reason)
		}
	}
	if b.Len() == 0 {
		if dir == "" {
			return "the working directory has no files"
		}
		return fmt.Sprintf("no files under %s", dir)
	}
	return b.String()
}

func (t *toolRun) readFile(p string, st *Step) string {
	rel, err := relPath(p)
	if err == nil && rel == "" {
		err = errors.New("name a file, not the working directory")
	}
	if err != nil {
		return refuse(st, ClassFile, "%v", err)
	}
	f, fi, err := t.ws.OpenRegular(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse(st, ClassFile, "there is no file %s (list_files shows the files)", rel)
	case errors.Is(err, sandbox.ErrSymlinkInPath):
		return refuse(st, ClassFile, "%s is or passes through a symbolic link, which is not followed", rel)
	case err != nil:
		return refuse(st, ClassFile, "%s cannot be read: %v", rel, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, readFileMax))
	if err != nil {
		return refuse(st, ClassFile, "%s cannot be read: %v", rel, err)
	}
	if !utf8.Valid(b) && !(len(b) == readFileMax && utf8.Valid(trimPartialRune(b))) {
		return refuse(st, ClassFile, "%s is not text (%d bytes): work on it with %s", rel, fi.Size(), ExecTool(t.a.lang.Name))
	}
	text := t.a.redact.String(string(trimPartialRune(b)))
	if fi.Size() > int64(len(b)) {
		return fmt.Sprintf("(the first %d of %d bytes of %s)\n%s", len(b), fi.Size(), rel, text)
	}
	return text
}

// trimPartialRune drops a character cut in half at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return b
}

func (t *toolRun) writeFile(p, content string, st *Step) string {
	rel, err := relPath(p)
	if err == nil && rel == "" {
		err = errors.New("name a file, not the working directory")
	}
	if err != nil {
		return refuse(st, ClassFile, "%v", err)
	}
	if len(content) > writeFileMax {
		return refuse(st, ClassFile, "the content is %d bytes; write_file takes at most %d: create large files with %s", len(content), writeFileMax, ExecTool(t.a.lang.Name))
	}
	if t.exclude(rel) {
		return refuse(st, ClassFile, "%s is codeagent's own file: it is assembled from your successful calls", rel)
	}
	if err := t.ws.WriteRel(rel, []byte(content)); err != nil {
		return refuse(st, ClassFile, "%s was not written: %v", rel, err)
	}
	t.written[rel] = true
	return fmt.Sprintf("wrote %d bytes to %s", len(content), rel)
}

// redactJSON masks the secrets codeagent knows in a call's arguments for
// the record, keeping them JSON. The arguments hold code that runs (or
// files it may run), so no pattern rewrites them (see Redactor.Code).
func (t *toolRun) redactJSON(raw json.RawMessage) json.RawMessage {
	s := t.a.redact.Code(string(raw))
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
