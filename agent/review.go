package agent

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/codeagent/codeagent/llm"
)

// Review is a reviewer model's verdict on code before it runs.
type Review struct {
	Approve  bool     `json:"approve"`
	Concerns []string `json:"concerns"`
	// Note says when the reviewer's answer could not be read: asked
	// twice without a verdict, the code counts as not approved.
	Note string `json:"note,omitempty"`
}

// review asks the reviewer model (Deps.Reviewer, Config.ReviewModel)
// whether g's code does what the task asks and nothing else. An answer
// that is not the verdict is asked again once; a second one is a
// rejection: a reviewer that cannot be read passes nothing.
func (r *run) review(ctx context.Context, g gate) (Review, error) {
	t0 := time.Now()
	// The code is the reviewer's as it runs (only known secrets masked):
	// r.user's redaction of model text would let a pattern hide lines.
	prompt := render("review.txt", map[string]any{
		"Task": r.a.redact.String(r.task.Prompt), "Fence": g.lang, "Code": r.a.redact.Code(g.code),
		"Network": orNone(r.networkAllow()), "Asks": r.a.redact.Code(strings.Join(declaredHosts(g.code), ", ")),
	})
	msgs := []llm.Message{{Role: llm.RoleUser, Content: prompt}}
	var rv Review
	for try := 1; ; try++ {
		resp, err := r.a.deps.Reviewer.Chat(ctx, llm.Request{System: render("review_system.txt", nil), Messages: msgs,
			JSON: true, Model: r.a.cfg.ReviewModel})
		r.res.Usage.add(resp.Usage)
		if err != nil {
			if ctx.Err() != nil {
				return Review{}, ctx.Err()
			}
			switch llm.KindOf(err) {
			case llm.KindTruncated, llm.KindEmptyAnswer, llm.KindTooLarge, llm.KindInvalidUTF8:
				resp.Text = ""
			default:
				return Review{}, err
			}
		}
		var ok bool
		if rv, ok = ParseReview(resp.Text); ok {
			break
		}
		if try == 2 {
			rv = Review{Approve: false, Concerns: []string{"the reviewer's answer could not be read"},
				Note: "the reviewer's answer was not understood twice: " + quoteAnswer(resp.Text)}
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: cutRunes(resp.Text, 2000)},
			r.user(render("review_again.txt", nil)))
	}
	for i, c := range rv.Concerns {
		rv.Concerns[i] = r.a.redact.String(c)
	}
	rv.Note = r.a.redact.String(rv.Note)
	class := ClassNone
	if !rv.Approve {
		class = ClassRejected
	}
	r.emit(Event{Type: EventReviewed, Attempt: g.n, Phase: g.phase, Step: g.step, Tool: g.tool, Review: &rv,
		ErrorClass: class, DurationMS: ms(t0)})
	return rv, nil
}

// maxConcerns bounds the concerns kept of one review, each cut to 300
// characters.
const maxConcerns = 10

// ParseReview reads a reviewer's answer: a JSON object {"approve": bool,
// "concerns": [string]}, possibly wrapped in prose or a code fence. ok is
// false when the answer holds no verdict.
func ParseReview(text string) (rv Review, ok bool) {
	var raw struct {
		Approve  *bool `json:"approve"`
		Concerns any   `json:"concerns"`
	}
	i, j := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}')
	if i < 0 || j <= i || json.Unmarshal([]byte(text[i:j+1]), &raw) != nil || raw.Approve == nil {
		return Review{}, false
	}
	rv = Review{Approve: *raw.Approve, Concerns: []string{}}
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" && len(rv.Concerns) < maxConcerns {
			rv.Concerns = append(rv.Concerns, cutRunes(strings.Join(strings.Fields(s), " "), 300))
		}
	}
	switch c := raw.Concerns.(type) {
	case string:
		add(c)
	case []any:
		for _, x := range c {
			if s, isStr := x.(string); isStr {
				add(s)
			} else if b, err := json.Marshal(x); err == nil {
				add(string(b))
			}
		}
	}
	return rv, true
}
