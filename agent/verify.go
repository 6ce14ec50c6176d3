package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/sandbox"
)

// verify asks the model, in a request of its own, whether a successful
// run completed the task. An answer that is not the verdict asked for is
// asked again once; a second one means the run is not confirmed complete.
func (r *run) verify(ctx context.Context, n int, code string, res sandbox.Result) (Verdict, error) {
	t0 := time.Now()
	prompt := render("verify.txt", map[string]any{
		"Task": r.task.Prompt, "Fence": r.a.lang.Name, "Code": code,
		"Stdout": r.clip(res.Stdout), "Stderr": r.clip(res.Stderr), "Artifacts": r.artifactList(),
	})
	msgs := []llm.Message{r.user(prompt)}
	var v Verdict
	for try := 1; ; try++ {
		text, bad, err := r.chat(ctx, render("verify_system.txt", nil), msgs, true)
		if err != nil {
			return Verdict{}, err
		}
		ok := false
		if bad == nil {
			v, ok = ParseVerdict(text)
		}
		if ok {
			break
		}
		what := "it answered " + quoteAnswer(text)
		if bad != nil {
			what = bad.message
		}
		r.a.log.Debug("the verifier's answer was not understood", "try", try, "answer", what)
		if try == 2 {
			v = Verdict{TaskComplete: false, Note: "the verifier's answer was not understood twice: " + what,
				Missing: "the verifier's answer could not be read (twice; " + what + "), so the run is not confirmed; make sure the output plainly shows every result the task asks for"}
			break
		}
		reply := llm.Message{Role: llm.RoleAssistant, Content: cutRunes(text, 2000)}
		if bad != nil {
			reply = bad.placeholder()
		}
		msgs = append(msgs, reply, r.user(render("verify_again.txt", nil)))
	}
	v.Missing = r.a.redact.String(v.Missing)
	v.Note = r.a.redact.String(v.Note)
	class := ClassNone
	if !v.TaskComplete {
		class = ClassIncomplete
	}
	phase := PhaseCode
	if r.mode == ModeTools {
		phase = PhaseTool
	}
	r.emit(Event{Type: EventVerified, Attempt: n, Phase: phase, Verdict: &v, ErrorClass: class, DurationMS: ms(t0)})
	return v, nil
}

// quoteAnswer shows a short answer in backquotes, a long one cut.
func quoteAnswer(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return "nothing"
	}
	return "`" + cutRunes(text, 120) + "`"
}

var verdictField = lazyre.New(`"task_complete"\s*:\s*(true|false)`)

// ParseVerdict reads the verifier's answer: a JSON object
// {"task_complete": bool, "missing": string}, possibly wrapped in prose or a
// code fence. ok is false when the answer holds no verdict (an empty
// object, prose): the caller asks again, and then counts the run as not
// confirmed.
func ParseVerdict(text string) (v Verdict, ok bool) {
	var raw struct {
		TaskComplete *bool `json:"task_complete"`
		Missing      any   `json:"missing"`
	}
	if i, j := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}'); i >= 0 && j > i {
		if json.Unmarshal([]byte(text[i:j+1]), &raw) == nil && raw.TaskComplete != nil {
			v = Verdict{TaskComplete: *raw.TaskComplete}
			switch m := raw.Missing.(type) {
			case string:
				v.Missing = m
			case nil:
			default:
				b, _ := json.Marshal(m)
				v.Missing = string(b)
			}
			return finishVerdict(v), true
		}
	}
	if m := verdictField.FindStringSubmatch(text); m != nil {
		return finishVerdict(Verdict{TaskComplete: m[1] == "true", Missing: ""}), true
	}
	return Verdict{TaskComplete: false, Note: "the verifier's answer was not understood: " + cutRunes(strings.TrimSpace(text), 200)}, false
}

func finishVerdict(v Verdict) Verdict {
	v.Missing = cutRunes(strings.TrimSpace(v.Missing), 1000)
	if v.TaskComplete {
		v.Missing = ""
	} else if v.Missing == "" {
		v.Missing = "the verifier gave no reason; check that the output shows every result the task asks for"
	}
	return v
}

// artifactList names the files created or changed so far, for prompts.
func (r *run) artifactList() string {
	arts, _, err := r.ws.Changes(r.before, r.a.cfg.Artifacts, r.exclude)
	if err != nil || len(arts) == 0 {
		return ""
	}
	parts := make([]string, 0, len(arts))
	for i, a := range arts {
		if i == 30 {
			parts = append(parts, fmt.Sprintf("and %d more", len(arts)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", strings.ToValidUTF8(strings.Map(printable, a.Path), "?"), a.Size))
	}
	return strings.Join(parts, ", ")
}

// printable replaces control characters, so that a file name cannot add
// lines to a prompt.
func printable(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return '?'
	}
	return r
}
