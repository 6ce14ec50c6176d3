package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// selfHash is a program's last line: it prints the sha256 of the file it
// runs from, which is what ran, byte for byte.
const selfHash = "import hashlib\nprint('ran sha256', hashlib.sha256(open(__file__, 'rb').read()).hexdigest())\n"

var ranSHA = regexp.MustCompile(`ran sha256 ([0-9a-f]{64})`)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// auditRecords are the audit log's records of a data directory, as
// `codeagent log --json` gives them.
func auditRecords(t *testing.T, dataDir string) []struct {
	Kind string         `json:"kind"`
	Data map[string]any `json:"data"`
} {
	t.Helper()
	code, out, stderr := runBinary(t, "", nil, "log", "--data-dir", dataDir, "--json")
	if code != 0 {
		t.Fatalf("log: exit %d: %s", code, stderr)
	}
	var recs []struct {
		Kind string         `json:"kind"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// shownAtApproval is what the terminal showed of approval id: from its
// header to the prompt after it.
func shownAtApproval(t *testing.T, p *ptySession, id string) string {
	t.Helper()
	all := p.all()
	i := strings.Index(all, "── approval "+id+":")
	if i < 0 {
		t.Fatalf("no approval %s on the terminal:\n%s", id, all)
	}
	j := strings.Index(all[i:], approvePrompt)
	if j < 0 {
		t.Fatalf("no prompt after approval %s:\n%s", id, all)
	}
	return all[i : i+j]
}

// A model's program hides lines between private-key marker comments (or
// after a BEGIN marker with no END). The person at the terminal, the
// reviewer model and the audit log see those lines, the audit's hash is
// the hash of what ran, and the marker lines are shown to the person as a
// warning, not hidden.
func TestRunApproveShowsCodeBetweenPrivateKeyMarkers(t *testing.T) {
	const hidden = "print('HIDDEN-PAYLOAD-RAN')\n"
	for name, prog := range map[string]string{
		"block":     "# -----BEGIN PRIVATE KEY-----\n" + hidden + "# -----END PRIVATE KEY-----\n" + selfHash,
		"unclosed":  selfHash + "# -----BEGIN RSA PRIVATE KEY-----\n" + hidden,
		"in-string": "note = '''-----BEGIN OPENSSH PRIVATE KEY-----\n'''\n" + hidden + selfHash,
	} {
		t.Run(name, func(t *testing.T) {
			_, flags := modelServer(t, pyAnswer(prog))
			reviewer := llmtest.NewOpenAIServer(t, llmtest.Say(`{"approve": true, "concerns": []}`))
			dataDir := t.TempDir()
			p := startOnPTY(t, []string{"CODEAGENT_REVIEW_API_KEY=review-key"}, append(append([]string{"run"}, flags...),
				"--approve", "--review-model", "judge", "--review-base-url", reviewer.BaseURL,
				"--no-verify", "--no-folder", "--max-iterations", "1", "--data-dir", dataDir, "print a line")...)
			p.expect(approvePrompt)
			shown := shownAtApproval(t, p, "1")
			p.send("y")
			if code := p.wait(); code != 0 {
				t.Fatalf("exit %d:\n%s", code, p.all())
			}
			if !strings.Contains(shown, strings.TrimSuffix(hidden, "\n")) || strings.Contains(shown, "REDACTED") {
				t.Errorf("the approval did not show the whole program:\n%s", shown)
			}
			if !strings.Contains(shown, "warning: line ") || !strings.Contains(shown, "private key") {
				t.Errorf("the approval did not warn of the private-key marker:\n%s", shown)
			}
			m := ranSHA.FindStringSubmatch(p.all())
			if m == nil || !strings.Contains(p.all(), "HIDDEN-PAYLOAD-RAN") {
				t.Fatalf("the program did not run whole:\n%s", p.all())
			}
			ran := m[1]
			if ran != sha256Hex(prog) {
				t.Fatalf("what ran (%s) is not the model's program (%s)", ran, sha256Hex(prog))
			}
			if rr := reviewer.Requests(); len(rr) != 1 || !strings.Contains(rr[0].Text(), hidden) {
				t.Errorf("the reviewer was not given the whole program (%d requests)", len(rr))
			}
			kinds := map[string]bool{}
			for _, r := range auditRecords(t, dataDir) {
				switch r.Kind {
				case "generated", "approval_required", "approval":
					kinds[r.Kind] = true
					if r.Data["code_sha256"] != ran {
						t.Errorf("%s: code_sha256 %v, but what ran is %s", r.Kind, r.Data["code_sha256"], ran)
					}
				}
				if r.Kind == "generated" && r.Data["code"] != prog {
					t.Errorf("generated: the audit holds\n%v\nnot the program that ran\n%s", r.Data["code"], prog)
				}
			}
			if len(kinds) != 3 {
				t.Errorf("audit records of the program: %v", kinds)
			}
		})
	}
}

// A person's edit (itself holding private-key markers) is what runs, and
// what the audit log records: its text and its hash.
func TestRunApproveEditIsWhatTheAuditHolds(t *testing.T) {
	const model = "print('from the model')\n"
	const edit = "# -----BEGIN PRIVATE KEY-----\nprint('EDIT-RAN')\n# -----END PRIVATE KEY-----\n" + selfHash
	dir := t.TempDir()
	editFile := filepath.Join(dir, "edit.py")
	editor := filepath.Join(dir, "editor.sh")
	if err := os.WriteFile(editFile, []byte(edit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(editor, []byte("#!/bin/sh\ncp '"+editFile+"' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, flags := modelServer(t, pyAnswer(model))
	dataDir := t.TempDir()
	p := startOnPTY(t, []string{"EDITOR=" + editor, "VISUAL="}, append(append([]string{"run"}, flags...),
		"--approve", "--no-verify", "--no-folder", "--max-iterations", "1", "--data-dir", dataDir, "print a line")...)
	p.expect(approvePrompt)
	p.send("e")
	p.expect("edited; this runs if you approve it:")
	p.expect(approvePrompt)
	p.send("y")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.all())
	}
	m := ranSHA.FindStringSubmatch(p.all())
	if m == nil || !strings.Contains(p.all(), "EDIT-RAN") || m[1] != sha256Hex(edit) {
		t.Fatalf("the edit did not run whole:\n%s", p.all())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	var approval map[string]any
	for _, r := range auditRecords(t, dataDir) {
		if r.Kind == "approval" {
			approval = r.Data
		}
	}
	if approval == nil {
		t.Fatal("no approval record")
	}
	if approval["code_sha256"] != sha256Hex(model) || approval["edited_sha256"] != m[1] || approval["edited_code"] != edit {
		t.Errorf("the approval record: code_sha256 %v (the model's %s), edited_sha256 %v (ran %s), edited_code %q",
			approval["code_sha256"], sha256Hex(model), approval["edited_sha256"], m[1], approval["edited_code"])
	}
}

// A secret codeagent knows (the provider's API key), written into a
// program by the model, is masked in place where the program is shown and
// recorded; the program runs with it, and the audit's hash is of what ran.
func TestRunApproveMasksAKnownSecretInPlace(t *testing.T) {
	const key = "provider-key-Zq8Xv2Lm9Rt4Wc"
	prog := "KEY = '" + key + "'\nprint('key length', len(KEY))\n" + selfHash
	_, flags := modelServer(t, pyAnswer(prog))
	dataDir := t.TempDir()
	p := startOnPTY(t, []string{"OPENAI_API_KEY=" + key}, append(append([]string{"run"}, flags...),
		"--approve", "--no-verify", "--no-folder", "--max-iterations", "1", "--data-dir", dataDir, "print a line")...)
	p.expect(approvePrompt)
	shown := shownAtApproval(t, p, "1")
	p.send("y")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.all())
	}
	if strings.Contains(p.all(), key) || !strings.Contains(shown, "KEY = '[REDACTED]'") {
		t.Errorf("the key was not masked in place:\n%s", p.all())
	}
	m := ranSHA.FindStringSubmatch(p.all())
	if m == nil || !strings.Contains(p.all(), "key length 27") || m[1] != sha256Hex(prog) {
		t.Fatalf("the program did not run with the key:\n%s", p.all())
	}
	for _, r := range auditRecords(t, dataDir) {
		b, _ := json.Marshal(r.Data)
		if strings.Contains(string(b), key) {
			t.Errorf("%s: the audit holds the key: %s", r.Kind, b)
		}
		if r.Kind == "generated" {
			if want := strings.ReplaceAll(prog, key, "[REDACTED]"); r.Data["code"] != want || r.Data["code_sha256"] != m[1] {
				t.Errorf("generated: code %q (want %q), code_sha256 %v (ran %s)", r.Data["code"], want, r.Data["code_sha256"], m[1])
			}
		}
	}
}
