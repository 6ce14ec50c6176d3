package mcpserver

import (
	"strings"
	"testing"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/safety"
)

// The approval's message says the code was cut, and lists what the
// checker and the reviewer raised and the hosts asked for.
func TestApprovalMessage(t *testing.T) {
	code := strings.Repeat("x", maxShownCode+500)
	msg := approvalMessage(agent.ApprovalRequest{ID: "2", Attempt: 3, Language: "python", Code: code,
		Findings: []safety.Finding{{Rule: "forbidden-import", Line: 1, Message: "imports socket"}},
		Warnings: []safety.Finding{{Rule: agent.RuleSecretLike, Line: 4, Message: "this looks like a private key", Kind: safety.KindLint}},
		Concerns: []string{"deletes files"}, AskHosts: []string{"example.com"}})
	for _, want := range []string{"attempt 3", "approval 2", "[... cut: the program has 8500 bytes, 8000 shown]",
		"line 1: imports socket [forbidden-import]", "- line 4: this looks like a private key", "- deletes files", "example.com"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q", want)
		}
	}
	if strings.Contains(msg, strings.Repeat("x", maxShownCode+1)) {
		t.Error("the message shows more than the cut")
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
