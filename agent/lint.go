package agent

import (
	"strings"

	"github.com/codeagent/codeagent/safety"
)

// maxLintNoted bounds the lint warnings one message to the model lists.
const maxLintNoted = 10

// withLint returns findings followed by the lint warnings, in a new slice:
// what an attempt's Check and the checked event show.
func withLint(findings, lint []safety.Finding) []safety.Finding {
	out := make([]safety.Finding, 0, len(findings)+len(lint))
	return append(append(out, findings...), lint...)
}

// keep returns rep's findings, redacted, and keeps in r.lint its lint
// warnings when lint (else none), then the warnings about text in code
// shaped like a secret (SecretWarnings).
func (r *run) keep(rep safety.Report, code string, lint bool) []safety.Finding {
	r.lint = nil
	if lint {
		r.lint = r.redacted(rep.Lint)
	}
	r.lint = append(r.lint, r.redacted(SecretWarnings(code))...)
	return r.redacted(rep.Findings)
}

// redacted copies findings with the secrets codeagent knows masked in
// their source text, which is code (see Redactor.Code).
func (r *run) redacted(fs []safety.Finding) []safety.Finding {
	out := make([]safety.Finding, len(fs))
	for i, f := range fs {
		f.Text = r.a.redact.Code(f.Text)
		out[i] = f
	}
	return out
}

// lintNote renders the last check's lint warnings for the next message to
// the model, once: the model reads them with the safety findings or the
// run's errors, though they never stop a program. "" when there are none.
func (r *run) lintNote() string {
	lint := r.lint
	r.lint = nil
	if len(lint) == 0 {
		return ""
	}
	more := 0
	if len(lint) > maxLintNoted {
		lint, more = lint[:maxLintNoted], len(lint)-maxLintNoted
	}
	return "\n" + strings.TrimRight(render("lint.txt", map[string]any{"Lint": lint, "More": more}), "\n") + "\n"
}
