package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/extract"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// runTools works on the task in tool mode: the model calls tools until it
// answers without one, which ends a verification round (see endRound). In
// auto mode the first answer decides: an endpoint that dropped the tools,
// or a model that called none, hands the run to program mode (program is
// true; r.pending holds the answer when it has code to use).
func (r *run) runTools(ctx context.Context) (program bool, err error) {
	if r.task.TestCode != "" || r.task.Accept != nil {
		return false, fmt.Errorf("%w: tool mode takes no tests or acceptance check: use program mode", ErrConfig)
	}
	t := &toolRun{run: r, defs: r.a.toolset(), byName: map[string]*toolDef{}, images: map[string]bool{}, written: map[string]bool{}}
	for i := range t.defs {
		t.byName[t.defs[i].name] = &t.defs[i]
	}
	defer t.close()
	defer func() {
		// A model that never calls a tool gets nowhere in tool mode: say
		// what may work instead.
		if !program && err == nil && r.mode == ModeTools && !t.called && !r.res.Success && r.res.Message != "" {
			r.res.Message += "; the model never called a tool: program mode (--mode program, or auto) may suit it better"
		}
	}()
	cfg := r.a.cfg
	r.system = render("tools_system.txt", t.promptData(1))
	r.msgs = []llm.Message{r.user(render("tools_task.txt", t.promptData(1)))}
	tools := llmTools(t.defs)
	auto := r.mode == ModeAuto
	t.at = &Attempt{N: 1, Check: []safety.Finding{}}
	if !auto {
		t.startRound()
	}
	defer func() {
		if t.at != nil && r.mode == ModeTools {
			t.closeRound() // the run ended in a round's middle
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		t0 := time.Now()
		resp, bad, err := r.send(ctx, llm.Request{System: r.system, Messages: r.msgs, Tools: tools})
		if err != nil {
			return false, err
		}
		if auto {
			auto = false
			if resp.ToolsDropped || len(resp.ToolCalls) == 0 {
				r.a.log.Info("program mode: the endpoint does not take tools or the model called none", "tools_dropped", resp.ToolsDropped)
				if _, xerr := extract.Code(resp.Text, r.a.lang.Name); xerr == nil || bad != nil {
					r.pending, r.pendingBad = resp.Text, bad
				}
				t.at = nil
				return true, nil
			}
			r.mode = ModeTools
			t.startRound()
		}
		if resp.ToolsDropped {
			r.res.Message = "the model's endpoint does not accept tool definitions: use program mode (or auto)"
			return false, nil
		}
		if bad != nil {
			r.emit(Event{Type: EventGenerated, Attempt: t.at.N, Phase: PhaseTool, ErrorClass: ClassBadAnswer, Message: bad.message, DurationMS: ms(t0)})
			t.steps++
			r.msgs = append(r.msgs, bad.placeholder(), r.user(render("tools_badanswer.txt", map[string]any{"Reason": bad.forModel(), "Left": t.stepsLeft()})))
			if t.stepsLeft() <= 0 {
				return false, t.outOfSteps()
			}
			continue
		}
		calls := resp.ToolCalls
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID = fmt.Sprintf("call_%d_%d", t.steps+1, i+1)
			}
		}
		r.emit(Event{Type: EventGenerated, Attempt: t.at.N, Phase: PhaseTool, Message: cutRunes(r.a.redact.String(resp.Text), 500), DurationMS: ms(t0)})
		r.msgs = append(r.msgs, llm.Message{Role: llm.RoleAssistant, Content: r.a.redact.String(resp.Text), ToolCalls: calls})
		if len(calls) > 0 {
			t.called = true
			// Every call is answered; those beyond the budget do not run,
			// and a model told the budget is spent that calls on fails.
			spent := t.stepsLeft() <= 0
			for _, c := range calls {
				m := llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true,
					Content: "error: not run: the budget of tool calls is spent"}
				if t.stepsLeft() > 0 {
					if m, err = t.step(ctx, c); err != nil {
						return false, err
					}
				}
				r.msgs = append(r.msgs, m)
			}
			if spent {
				return false, t.outOfSteps()
			}
			if t.stepsLeft() <= 0 {
				r.say(render("tools_last.txt", map[string]any{"MaxSteps": cfg.MaxSteps}))
			}
			continue
		}
		done, err := t.endRound(ctx)
		if err != nil || done {
			return false, err
		}
		if t.at.N == cfg.MaxIterations {
			t.closeRound()
			r.res.Message = fmt.Sprintf("the task was not achieved within %d verification rounds", cfg.MaxIterations)
			if k := len(r.failures); k > 0 {
				r.res.Message += "; the last: " + r.failures[k-1]
			}
			return false, nil
		}
		if t.stepsLeft() <= 0 {
			return false, t.outOfSteps()
		}
		n := t.at.N + 1
		t.closeRound()
		t.at = &Attempt{N: n, Check: []safety.Finding{}}
		t.startRound()
	}
}

func (t *toolRun) stepsLeft() int { return t.a.cfg.MaxSteps - t.steps }

// outOfSteps ends a run whose model did not finish within the budget.
func (t *toolRun) outOfSteps() error {
	t.res.Message = fmt.Sprintf("the model used all %d tool calls of its budget (max steps) without finishing the task", t.a.cfg.MaxSteps)
	return nil
}

// startRound opens the verification round t.at.
func (t *toolRun) startRound() {
	t.res.Mode = ModeTools
	e := Event{Type: EventAttemptStart, Attempt: t.at.N, Phase: PhaseTool, MaxSteps: t.a.cfg.MaxSteps, Step: t.steps}
	if t.at.N == 1 {
		e.Mode = ModeTools
	}
	t.emit(e)
}

// closeRound records the round under way in the history.
func (t *toolRun) closeRound() {
	t.res.History = append(t.res.History, *t.at)
	t.res.Attempts = t.at.N
	t.at = nil
}

// close ends the kernel the run started.
func (t *toolRun) close() {
	if t.kern != nil {
		if err := t.kern.Close(); err != nil {
			t.a.log.Warn("close the kernel", "err", err)
		}
	}
}

// promptData is what tool mode's prompts are rendered with.
func (t *toolRun) promptData(n int) map[string]any {
	d := t.taskData(n)
	lim := t.byName[ExecTool(t.a.lang.Name)].limits
	d["Lang"], d["Exec"], d["File"] = t.a.lang.Name, ExecTool(t.a.lang.Name), t.a.SolutionFile()
	d["Tools"], d["Packages"], d["Install"] = t.toolNames(), t.a.packages(), t.installable()
	d["Timeout"], d["Memory"] = lim.WallTime.String(), sandbox.FormatSize(lim.Memory)
	d["MaxSteps"], d["Left"] = t.a.cfg.MaxSteps, t.stepsLeft()
	return d
}

// endRound is the model's answer without a tool call: the successful
// calls are assembled into the program, which the verifier judges and a
// fresh sandbox replays. done reports success; a failure has been fed back
// into r.msgs, and the round is left open for the caller.
func (t *toolRun) endRound(ctx context.Context) (done bool, err error) {
	at, n := t.at, t.at.N
	d := t.promptData(n)
	code, stdout := t.program()
	if code == "" {
		at.ErrorClass = ClassNoCode
		t.say(render("tools_nothing.txt", d))
		t.fail(n, ClassNoCode, "ended without a successful "+ExecTool(t.a.lang.Name)+" call")
		return false, nil
	}
	at.Code, at.Source = t.a.redact.Code(code), code
	t.res.Code, t.res.Source, t.res.Output = at.Code, code, stdout
	if missing := t.missingDeliverables(); len(missing) > 0 {
		// As in program mode: a file the task names that the calls did
		// not write leaves the task undone, before any verifier is asked.
		at.ErrorClass = ClassIncomplete
		d["Missing"] = "the task names files the calls did not write: " + strings.Join(missing, ", ")
		d["Stdout"], d["Artifacts"] = t.clip([]byte(stdout)), t.artifactList()
		t.say(render("tools_incomplete.txt", d))
		t.fail(n, ClassIncomplete, "ended, but missing: "+strings.Join(missing, ", "))
		return false, nil
	}
	if t.a.cfg.Verify {
		v, err := t.verify(ctx, n, at.Code, okResult(stdout))
		if err != nil {
			return false, err
		}
		at.Verdict = &v
		if !v.TaskComplete {
			at.ErrorClass = ClassIncomplete
			d["Missing"], d["Stdout"], d["Artifacts"] = v.Missing, t.clip([]byte(stdout)), t.artifactList()
			t.say(render("tools_incomplete.txt", d))
			t.fail(n, ClassIncomplete, "ended, but "+v.Missing)
			return false, nil
		}
	}
	res, diff, err := t.replay(ctx, code, stdout)
	if err != nil {
		return false, err
	}
	at.Replay = resultJSON(res)
	if diff != "" {
		// The difference goes back as one more step, and the program
		// starts again empty in a fresh kernel: a successful cell cannot
		// be taken back otherwise.
		t.steps++
		t.cells = nil
		if t.kern != nil {
			if err := t.kern.Restart(ctx); err != nil {
				return false, fmt.Errorf("restart the kernel: %w", err)
			}
		}
		at.ErrorClass = ClassReplay
		d["Diff"], d["Numbered"], d["Left"] = diff, numbered(at.Code), t.stepsLeft()
		d["Stdout"], d["Stderr"] = t.clip(res.Stdout), t.clip(res.Stderr)
		t.say(render("tools_replay.txt", d))
		t.fail(n, ClassReplay, "the assembled program did not reproduce the results: "+strings.SplitN(diff, "\n", 2)[0])
		return false, nil
	}
	t.res.Output, t.res.Success = string(res.Stdout), true
	if err := t.ws.WriteFile(t.a.SolutionFile(), []byte(code)); err != nil {
		return false, err
	}
	t.closeRound()
	return true, nil
}
