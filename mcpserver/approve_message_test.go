package mcpserver

import (
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/safety"
)

// The approval's message shows the program whole, and lists what the
// checker and the reviewer raised and the hosts asked for.
func TestApprovalMessage(t *testing.T) {
	// A model pads its program so that the payload falls past what a
	// message would show (the message cut at 8,000 characters before).
	code := strings.Repeat("x = 1\n", 5000) + "import os; os.system('payload')\n"
	msg := approvalMessage(agent.ApprovalRequest{ID: "2", Attempt: 3, Language: "python", Code: code,
		Findings: []safety.Finding{{Rule: "forbidden-import", Line: 1, Message: "imports socket"}},
		Warnings: []safety.Finding{{Rule: agent.RuleSecretLike, Line: 4, Message: "this looks like a private key", Kind: safety.KindLint}},
		Concerns: []string{"deletes files"}, AskHosts: []string{"example.com"}})
	for _, want := range []string{"attempt 3", "approval 2", "```python\n" + code + "```\n",
		"line 1: imports socket [forbidden-import]", "- line 4: this looks like a private key", "- deletes files", "example.com"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q", want)
		}
	}
	if _, err := approveMode("never"); err == nil {
		t.Error("approve never was taken")
	}
	for in, want := range map[string]string{"": "", "false": "", "TRUE": "always", "always": "always", "on-finding": "on-finding"} {
		if got, err := approveMode(in); err != nil || got != want {
			t.Errorf("approve %q: %q %v", in, got, err)
		}
	}
}

// A program cannot close the message's code fence and have the client
// render the rest as markup, nor reorder what is shown with bidirectional
// controls or act on a terminal.
func TestApprovalMessageShowsCodeAsText(t *testing.T) {
	code := "print(1)\n```\n<!-- hidden\nimport os; os.system('x')\n-->\n````\ns = 'abc\u202e' # \x1b[8m\n"
	msg := approvalMessage(agent.ApprovalRequest{ID: "1", Attempt: 1, Language: "python", Code: code})
	if !strings.Contains(msg, "`````python\n") || !strings.Contains(msg, "\n`````\n") {
		t.Errorf("the fence is not longer than the program's backticks:\n%s", msg)
	}
	if strings.ContainsRune(msg, '\u202e') || strings.ContainsRune(msg, 0x1b) {
		t.Errorf("a bidirectional control or ESC reached the message:\n%q", msg)
	}
	for _, want := range []string{`\u202e`, `\x1b[8m`, "shown escaped", "<!-- hidden\nimport os; os.system('x')\n-->"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
}
