package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// TestRunLanguageFromTheTask: without --lang, a task that asks for a bash
// script gets one, run by bash (the answer's `$BASH_VERSION` is set only
// there), and the result names the language; --lang still decides when
// given, and a task that names no language is Python's.
func TestRunLanguageFromTheTask(t *testing.T) {
	for _, c := range []struct {
		name, task, lang, answer, want, language string
	}{
		{"BashFromTheTask", "write a bash script that prints its shell", "", "```bash\necho \"bash ${BASH_VERSION%%.*}\"\n```", "bash 5", "bash"},
		{"JavaScriptFromTheTask", "In JavaScript, print 6 times 7", "", "```javascript\nconsole.log(6 * 7)\n```", "42", "javascript"},
		{"FlagDecides", "write a bash script that prints 42", "python", "```python\nprint(42)\n```", "42", "python"},
		{"PythonByDefault", "print 6 times 7", "", "```python\nprint(6 * 7)\n```", "42", "python"},
		{"GoFromTheTask", "write a Go program that prints 6*7", "", "```go\n" + goProgram + "```", "42", "go"},
		{"GoFlag", "print 6 times 7", "go", "```go\n" + goProgram + "```", "42", "go"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, flags := modelServer(t, llmtest.Say(c.answer))
			args := append(append([]string{"run"}, flags...), "--no-verify", "--no-folder", "--json")
			if c.lang != "" {
				args = append(args, "--lang", c.lang)
			}
			code, stdout, stderr := runBinary(t, "", []string{"CODEAGENT_PROVIDER=", "OPENAI_API_KEY="}, append(args, c.task)...)
			var res struct {
				Success  bool
				Language string
				Output   string
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitOK {
				t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, stdout, stderr)
			}
			if !res.Success || res.Language != c.language || strings.TrimSpace(res.Output) != c.want {
				t.Fatalf("success %v, language %q, output %q; want %q and %q", res.Success, res.Language, res.Output, c.language, c.want)
			}
			if body := strings.ToLower(string(srv.Requests()[0].Body)); !strings.Contains(body, c.language) {
				t.Errorf("the model was not asked for %s:\n%s", c.language, body)
			}
		})
	}
}

// TestRunLanguageOrder: the flag, then the test file's extension, then the
// task, then the manifest's only tool language, then python.
func TestRunLanguageOrder(t *testing.T) {
	for _, c := range []struct {
		flag, task, testFile string
		tools                []string
		want                 string
	}{
		{"js", "a bash script", "", nil, "javascript"},
		{"", "a bash script", "", []string{"python"}, "bash"},
		{"", "list the files", "", []string{"bash"}, "bash"},
		{"", "list the files", "", []string{"bash", "python"}, "python"},
		{"", "list the files", "", nil, "python"},
		{"", "a bash script", "mul.test.js", nil, "javascript"},
		{"", "list the files", "/tmp/sum_test.go", []string{"python"}, "go"},
		{"python", "list the files", "sum_test.go", nil, "python"},
		{"", "write it in Go", "tests.txt", nil, "go"},
	} {
		if got := runLanguage(c.flag, c.task, c.testFile, c.tools); got != c.want {
			t.Errorf("runLanguage(%q, %q, %q, %v) = %q, want %q", c.flag, c.task, c.testFile, c.tools, got, c.want)
		}
	}
}
