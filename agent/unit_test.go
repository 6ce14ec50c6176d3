package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

func TestClassify(t *testing.T) {
	fail := sandbox.Result{Status: sandbox.StatusError, ExitCode: 1}
	tb := func(last string) string {
		return "Traceback (most recent call last):\n  File \"/workspace/solution.py\", line 3, in <module>\n    x()\n" + last + "\n"
	}
	cases := []struct {
		name string
		res  sandbox.Result
		text string
		want ErrorClass
	}{
		{"ok", sandbox.Result{Status: sandbox.StatusOK}, "", ClassNone},
		{"ok with warnings", sandbox.Result{Status: sandbox.StatusOK}, "UserWarning: x", ClassNone},
		{"syntax", fail, "  File \"x.py\", line 1\n    def (\n        ^\nSyntaxError: invalid syntax", ClassSyntax},
		{"indentation", fail, tb("IndentationError: unexpected indent"), ClassSyntax},
		{"name", fail, tb("NameError: name 'pd' is not defined"), ClassName},
		{"unbound", fail, tb("UnboundLocalError: cannot access local variable 'x'"), ClassName},
		{"import", fail, tb("ModuleNotFoundError: No module named 'seaborn'"), ClassImport},
		{"import name", fail, tb("ImportError: cannot import name 'x' from 'y'"), ClassImport},
		{"file", fail, tb("FileNotFoundError: [Errno 2] No such file or directory: 'sales_data.csv'"), ClassFile},
		{"is a directory", fail, tb("IsADirectoryError: [Errno 21] Is a directory: 'x'"), ClassFile},
		{"permission", fail, tb("PermissionError: [Errno 13] Permission denied: '/x'"), ClassFile},
		{"key", fail, tb("KeyError: 'revenue'"), ClassValue},
		{"type", fail, tb("TypeError: unsupported operand type(s)"), ClassValue},
		{"value", fail, tb("ValueError: could not convert string to float: 'x'"), ClassValue},
		{"index", fail, tb("IndexError: list index out of range"), ClassValue},
		{"attribute", fail, tb("AttributeError: 'DataFrame' object has no attribute 'foo'"), ClassValue},
		{"qualified", fail, tb("pandas.errors.ParserError: Error tokenizing data"), ClassValue},
		{"json", fail, tb("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"), ClassValue},
		{"assertion", fail, tb("AssertionError"), ClassAssertion},
		{"assertion message", fail, tb("AssertionError: expected 5"), ClassAssertion},
		{"chained: last wins", fail, tb("KeyError: 'a'") + "\nDuring handling of the above exception, another exception occurred:\n\n" + tb("NameError: name 'b' is not defined"), ClassName},
		{"other exception", fail, tb("RuntimeError: boom"), ClassRuntime},
		{"recursion", fail, tb("RecursionError: maximum recursion depth exceeded"), ClassRuntime},
		{"custom exception", fail, tb("mymod.DataException: bad"), ClassRuntime},
		{"memory error", fail, tb("MemoryError"), ClassMemory},
		{"no traceback", fail, "something went wrong\n", ClassRuntime},
		{"sys.exit message", sandbox.Result{Status: sandbox.StatusError, ExitCode: 2}, "error: sales.csv has no column revenue\n", ClassRuntime},
		{"timeout", sandbox.Result{Status: sandbox.StatusTimeout, ExitCode: -1}, "", ClassTimeout},
		{"timeout beats traceback", sandbox.Result{Status: sandbox.StatusTimeout}, tb("KeyboardInterrupt"), ClassTimeout},
		{"memory", sandbox.Result{Status: sandbox.StatusMemoryLimit}, "", ClassMemory},
		{"signal", sandbox.Result{Status: sandbox.StatusSignaled, Signal: 25}, "", ClassOther},
		{"pytest E line", fail, "    def test_x():\n>       assert top(df) == 3\nE       KeyError: 'units'\n", ClassValue},
		{"pytest summary", fail, "FAILED test_solution.py::test_x - NameError: name 'y' is not defined\n1 failed in 0.1s\n", ClassName},
		{"node reference", fail, "/workspace/solution.js:1\nfoo()\n^\n\nReferenceError: foo is not defined\n    at Object.<anonymous>", ClassName},
		{"node module", fail, "Error: Cannot find module 'lodash'\nRequire stack:", ClassImport},
		{"bash command", fail, "/workspace/solution.sh: line 2: jq: command not found\n", ClassName},
		{"bash file", fail, "cat: data.csv: No such file or directory\n", ClassFile},
	}
	for _, c := range cases {
		if got := Classify(c.res, c.text); got != c.want {
			t.Errorf("%s: Classify = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestClassifyFindings(t *testing.T) {
	syn := safety.Finding{Rule: safety.RuleSyntaxError}
	imp := safety.Finding{Rule: safety.RuleForbiddenImport}
	if ClassifyFindings(nil) != ClassNone || ClassifyFindings([]safety.Finding{syn}) != ClassSyntax ||
		ClassifyFindings([]safety.Finding{syn, imp}) != ClassSafety {
		t.Error("ClassifyFindings")
	}
}

func TestRedact(t *testing.T) {
	r := NewRedactor("my-configured-key-123", "", "short")
	cases := []struct{ in, want string }{
		{"key=my-configured-key-123!", "key=[REDACTED]!"},
		{"short stays", "short stays"},
		{"openai sk-proj-AbCdEf0123456789xyzXYZ done", "openai [REDACTED] done"},
		{"anthropic sk-ant-api03-AbCdEf0123456789_x-y", "anthropic [REDACTED]"},
		{"aws AKIAIOSFODNN7EXAMPLE key", "aws [REDACTED] key"},
		{"gh ghp_" + strings.Repeat("a1B2", 9) + " x", "gh [REDACTED] x"},
		{"slack xoxb-123456789012-abcdefghij", "slack [REDACTED]"},
		{"Authorization: Bearer abc.def-ghi_jkl012345", "Authorization: Bearer [REDACTED]"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter", "[REDACTED]\nafter"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\ncut off", "[REDACTED]"},
		{"task-list and sk-short and skeleton", "task-list and sk-short and skeleton"},
		{"Bearer of news", "Bearer of news"},
		{"", ""},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var zero *Redactor
	if got := zero.String("sk-ant-api03-AbCdEf0123456789"); got != Redacted {
		t.Errorf("nil redactor: %q", got)
	}
	if got := string(r.Bytes([]byte("\xff my-configured-key-123"))); got != "\xff [REDACTED]" {
		t.Errorf("bytes: %q", got)
	}
}

// Code masks only the configured secrets, in place; what the patterns
// would have redacted is left as written and reported, with its line.
func TestRedactCode(t *testing.T) {
	r := NewRedactor("my-configured-key-123")
	for in, want := range map[string]string{
		"k = 'my-configured-key-123'\n":                                       "k = '[REDACTED]'\n",
		"# -----BEGIN PRIVATE KEY-----\nrun()\n# -----END PRIVATE KEY-----\n": "# -----BEGIN PRIVATE KEY-----\nrun()\n# -----END PRIVATE KEY-----\n",
		"h = {'Authorization': 'Bearer abcdefghijkl'}":                        "h = {'Authorization': 'Bearer abcdefghijkl'}",
		"": "",
	} {
		if got := r.Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
	var zero *Redactor
	if got := zero.Code("sk-ant-api03-AbCdEf0123456789"); got != "sk-ant-api03-AbCdEf0123456789" {
		t.Errorf("nil redactor: %q", got)
	}
	code := "import os\n# -----BEGIN RSA PRIVATE KEY-----\nos.remove('x')\nkey = 'sk-ant-api03-AbCdEf0123456789'  # sk-proj-AbCdEf0123456789xyzXYZ\n"
	var got []string
	for _, w := range SecretWarnings(code) {
		if w.Kind != safety.KindLint || w.Rule != RuleSecretLike {
			t.Errorf("warning %+v is not a lint warning of %s", w, RuleSecretLike)
		}
		got = append(got, fmt.Sprintf("%d:%d %s", w.Line, w.Column, w.Text))
	}
	want := "2:3 # -----BEGIN RSA PRIVATE KEY-----|4:8 key = 'sk-ant-api03-AbCdEf0123456789'  # sk-proj-AbCdEf0123456789xyzXYZ"
	if strings.Join(got, "|") != want {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if w := SecretWarnings("print('hello')\n"); len(w) != 0 {
		t.Errorf("warnings on plain code: %+v", w)
	}
}

func TestClip(t *testing.T) {
	if Clip("short", 10, 10) != "short" {
		t.Error("short text changed")
	}
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("\n")
	}
	long := b.String()
	got := Clip(long, 1000, 500)
	if len(got) > 1000+500+60 || !strings.HasPrefix(got, long[:900]) || !strings.HasSuffix(got, long[len(long)-400:]) {
		t.Errorf("clip kept the wrong parts (%d bytes)", len(got))
	}
	if !strings.Contains(got, " bytes cut ...]\n") {
		t.Errorf("no marker: %q", got)
	}
	// Characters are never cut in half.
	u := strings.Repeat("é", 5000)
	if c := Clip(u, 101, 101); !strings.HasPrefix(c, "éé") || strings.ContainsRune(c, '\uFFFD') || !strings.HasSuffix(c, "é") {
		t.Errorf("broke a character: %q", c[:20])
	}
	for _, s := range []string{"", "\n", strings.Repeat("\n", 10000)} {
		Clip(s, 3, 3)
	}
}

func TestParseVerdict(t *testing.T) {
	cases := []struct {
		in       string
		complete bool
		missing  string
		note     bool
	}{
		{`{"task_complete": true, "missing": ""}`, true, "", false},
		{`{"task_complete": false, "missing": "the plot"}`, false, "the plot", false},
		{"```json\n{\"task_complete\": false, \"missing\": \"x\"}\n```", false, "x", false},
		{`Sure! {"task_complete": false}`, false, "the verifier gave no reason", false},
		{`{"task_complete": true, "missing": "ignored"}`, true, "", false},
		{`{"task_complete": false, "missing": ["a", "b"]}`, false, `["a","b"]`, false},
		{`"task_complete": false, oops`, false, "the verifier gave no reason", false},
		// No verdict: not complete, and not understood (ok is false).
		{`I think it is fine`, false, "", true},
		{``, false, "", true},
		{`{}`, false, "", true},
		{`{"complete": true}`, false, "", true},
	}
	for _, c := range cases {
		v, ok := ParseVerdict(c.in)
		if v.TaskComplete != c.complete || !strings.HasPrefix(v.Missing, c.missing) || (v.Note != "") != c.note || ok == c.note {
			t.Errorf("ParseVerdict(%q) = %+v, %v", c.in, v, ok)
		}
	}
}

func TestPromptsRender(t *testing.T) {
	if p := numbered("a\nb\n"); p != "1  a\n2  b\n" {
		t.Errorf("numbered = %q", p)
	}
	for _, name := range []string{"system.txt", "task.txt", "fresh.txt", "safety.txt", "debug.txt", "incomplete.txt",
		"verify.txt", "verify_system.txt", "tests.txt", "tests_rejected.txt", "nocode.txt", "accept.txt",
		"badanswer.txt", "verify_again.txt"} {
		if prompts().Lookup(name) == nil {
			t.Errorf("prompt %s missing", name)
		}
	}
}
