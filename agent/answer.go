package agent

import (
	"context"
	"errors"
	"time"

	"github.com/codeagent/codeagent/llm"
)

// ClassBadAnswer marks an attempt whose answer could not be used: larger
// than the answer size cap, or not valid UTF-8. The next attempt replaces
// it, as it replaces an answer without code.
const ClassBadAnswer ErrorClass = "bad_answer"

// badAnswer is a model answer that cannot be used.
type badAnswer struct {
	tooLarge bool
	message  string // for the user: the provider's error, redacted
}

// forModel is why the answer was refused, as the model is told.
func (b *badAnswer) forModel() string {
	if b.tooLarge {
		return "your answer was too long: it went past the answer size limit, so it was not read to the end"
	}
	return "your answer was not valid UTF-8 text: it held bytes that are not characters"
}

// chat sends one request and counts its usage. An answer cut off at the
// token limit or empty is passed on (the loop treats it as an answer
// without code); one that is too large or not valid UTF-8 comes back as a
// badAnswer for the caller to replace. Other provider errors end the run.
func (r *run) chat(ctx context.Context, system string, msgs []llm.Message, asJSON bool) (string, *badAnswer, error) {
	resp, bad, err := r.send(ctx, llm.Request{System: system, Messages: msgs, JSON: asJSON})
	return resp.Text, bad, err
}

// send is chat for any request, with the whole response (tool calls).
func (r *run) send(ctx context.Context, req llm.Request) (llm.Response, *badAnswer, error) {
	cfg := r.a.cfg
	req.Model, req.Temperature, req.MaxTokens = cfg.Model, cfg.Temperature, cfg.MaxTokens
	resp, err := r.a.deps.Provider.Chat(ctx, req)
	r.res.Usage.add(resp.Usage)
	if err != nil {
		switch k := llm.KindOf(err); k {
		case llm.KindTruncated, llm.KindEmptyAnswer:
			r.a.log.Warn("bad answer from the model", "err", err)
			return resp, nil, nil
		case llm.KindTooLarge, llm.KindInvalidUTF8:
			if ctx.Err() == nil {
				r.a.log.Debug("unusable answer from the model", "err", err)
				return llm.Response{}, &badAnswer{tooLarge: k == llm.KindTooLarge, message: r.a.redact.String(err.Error())}, nil
			}
		}
		if ctx.Err() != nil {
			return llm.Response{}, nil, errors.Join(ctx.Err(), err)
		}
		return llm.Response{}, nil, err
	}
	for _, note := range resp.Notes {
		r.a.log.Warn(note)
	}
	return resp, nil, nil
}

// placeholder stands for a refused answer in the conversation.
func (b *badAnswer) placeholder() llm.Message {
	what := "(an answer that was not valid UTF-8 was left out here)"
	if b.tooLarge {
		what = "(an answer that was too long was left out here)"
	}
	return llm.Message{Role: llm.RoleAssistant, Content: what}
}

// refuseAnswer fails attempt n over a bad answer and tells the model why.
func (r *run) refuseAnswer(n int, at *Attempt, bad *badAnswer, t0 time.Time) {
	at.ErrorClass = ClassBadAnswer
	r.emit(Event{Type: EventGenerated, Attempt: n, Phase: PhaseCode, ErrorClass: ClassBadAnswer, Message: bad.message, DurationMS: ms(t0)})
	d := r.feedbackData(n)
	d["Reason"], d["TooLarge"] = bad.forModel(), bad.tooLarge
	r.msgs = append(r.msgs, bad.placeholder(), r.user(render("badanswer.txt", d)))
	r.fail(n, ClassBadAnswer, bad.forModel())
}
