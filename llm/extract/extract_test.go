package extract

import (
	"errors"
	"strings"
	"testing"
)

// The answers below copy the shapes that real models (GPT-4o, Claude,
// Llama 3, Qwen2.5-Coder, DeepSeek-R1, CodeLlama) produce.
func TestCode(t *testing.T) {
	tests := []struct {
		name     string
		lang     string
		answer   string
		want     string
		source   Source
		complete bool
	}{
		{
			name: "python fence with prose around",
			lang: "python",
			answer: "Sure! Here's a Python program that prints the first 10 Fibonacci numbers:\n\n" +
				"```python\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        print(a)\n        a, b = b, a + b\n\nfib(10)\n```\n\n" +
				"This uses two variables to keep track of the sequence.",
			want:   "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        print(a)\n        a, b = b, a + b\n\nfib(10)\n",
			source: SourceFenced, complete: true,
		},
		{
			name:   "py tag",
			lang:   "python",
			answer: "```py\nprint('hi')\n```",
			want:   "print('hi')\n", source: SourceFenced, complete: true,
		},
		{
			name:   "python3 tag, capitalised",
			lang:   "py",
			answer: "```Python3\nimport sys\nprint(sys.version)\n```\n",
			want:   "import sys\nprint(sys.version)\n", source: SourceFenced, complete: true,
		},
		{
			name:   "bare fence holding python",
			lang:   "python",
			answer: "Here is the code:\n```\nimport math\nprint(math.pi)\n```",
			want:   "import math\nprint(math.pi)\n", source: SourceFenced, complete: true,
		},
		{
			name: "install line in bash, then python",
			lang: "python",
			answer: "First install the dependency:\n\n```bash\npip install requests\n```\n\nThen run:\n\n" +
				"```python\nimport requests\nprint(requests.get('http://localhost').status_code)\n```\n",
			want:   "import requests\nprint(requests.get('http://localhost').status_code)\n",
			source: SourceFenced, complete: true,
		},
		{
			name: "first attempt then corrected version: last wins",
			lang: "python",
			answer: "```python\ndef is_prime(n):\n    for i in range(2, n):\n        if n % i == 0:\n            return False\n    return True\n```\n\n" +
				"Wait, that treats 1 as prime. Here is the corrected version:\n\n" +
				"```python\ndef is_prime(n):\n    if n < 2:\n        return False\n    for i in range(2, int(n**0.5) + 1):\n        if n % i == 0:\n            return False\n    return True\n\nprint([p for p in range(20) if is_prime(p)])\n```",
			want:   "def is_prime(n):\n    if n < 2:\n        return False\n    for i in range(2, int(n**0.5) + 1):\n        if n % i == 0:\n            return False\n    return True\n\nprint([p for p in range(20) if is_prime(p)])\n",
			source: SourceFenced, complete: true,
		},
		{
			name: "solution then example usage: joined",
			lang: "python",
			answer: "```python\ndef reverse_words(s: str) -> str:\n    return ' '.join(reversed(s.split()))\n```\n\n### Example usage\n\n" +
				"```python\nresult = reverse_words('hello big world')\nprint(result)  # world big hello\n```\n",
			want:   "def reverse_words(s: str) -> str:\n    return ' '.join(reversed(s.split()))\n\nresult = reverse_words('hello big world')\nprint(result)  # world big hello\n",
			source: SourceJoined, complete: true,
		},
		{
			name: "helpers, then main, then output sample",
			lang: "python",
			answer: "Helpers:\n```python\nimport json\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n```\nMain program:\n" +
				"```python\nimport sys\n\ndata = load(sys.argv[1])\nprint(len(data))\n```\nOutput:\n```\n3\n```",
			want:   "import json\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n\nimport sys\n\ndata = load(sys.argv[1])\nprint(len(data))\n",
			source: SourceJoined, complete: true,
		},
		{
			name:   "unterminated fence (answer cut off)",
			lang:   "python",
			answer: "```python\nfor i in range(3):\n    print(i)\n",
			want:   "for i in range(3):\n    print(i)\n", source: SourceUnterminated, complete: false,
		},
		{
			name:   "complete block wins over a later unterminated one",
			lang:   "python",
			answer: "```python\nprint(1)\n```\nAnd a variant:\n```python\nprint(2",
			want:   "print(1)\n", source: SourceFenced, complete: true,
		},
		{
			name:   "no fence, the answer is code",
			lang:   "python",
			answer: "import sys\n\nfor line in sys.stdin:\n    print(line.upper(), end='')\n",
			want:   "import sys\n\nfor line in sys.stdin:\n    print(line.upper(), end='')\n", source: SourceBare, complete: true,
		},
		{
			name:   "no fence, prose before and after",
			lang:   "python",
			answer: "Here is the solution:\n\ndef add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n\nprint(add(2, 3))\n\nThis prints the number five.",
			want:   "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n\nprint(add(2, 3))\n", source: SourceBare, complete: true,
		},
		{
			name:   "windows line endings",
			lang:   "python",
			answer: "Code:\r\n```python\r\nx = [1, 2]\r\nprint(sum(x))\r\n```\r\n",
			want:   "x = [1, 2]\nprint(sum(x))\n", source: SourceFenced, complete: true,
		},
		{
			name:   "tilde fence",
			lang:   "python",
			answer: "~~~python\nprint('tilde')\n~~~\n",
			want:   "print('tilde')\n", source: SourceFenced, complete: true,
		},
		{
			name:   "four-backtick fence containing a three-backtick line",
			lang:   "python",
			answer: "````python\ndoc = '''\n```\n'''\nprint(doc)\n````",
			want:   "doc = '''\n```\n'''\nprint(doc)\n", source: SourceFenced, complete: true,
		},
		{
			name: "indented fence inside a list",
			lang: "python",
			answer: "Steps:\n\n1. Save this as `main.py`:\n\n   ```python\n   def main():\n       print(\"hi\")\n\n   main()\n   ```\n\n" +
				"2. Run `python main.py`.",
			want: "def main():\n    print(\"hi\")\n\nmain()\n", source: SourceFenced, complete: true,
		},
		{
			name:   "think section with a draft is ignored",
			lang:   "python",
			answer: "<think>\nMaybe:\n```python\nprint('draft')\n```\nNo, simpler.\n</think>\n\n```python\nprint('final')\n```",
			want:   "print('final')\n", source: SourceFenced, complete: true,
		},
		{
			name:   "codellama [PYTHON] tags",
			lang:   "python",
			answer: "[PYTHON]\ndef square(x):\n    return x * x\n[/PYTHON]\n",
			want:   "def square(x):\n    return x * x\n", source: SourceFenced, complete: true,
		},
		{
			name:   "fence with attributes after the tag",
			lang:   "python",
			answer: "```python title=\"solution.py\"\nprint(42)\n```",
			want:   "print(42)\n", source: SourceFenced, complete: true,
		},
		{
			name:   "javascript",
			lang:   "javascript",
			answer: "Here you go:\n\n```js\nconst add = (a, b) => a + b;\nconsole.log(add(1, 2));\n```\n\nRun it with `node add.js`.",
			want:   "const add = (a, b) => a + b;\nconsole.log(add(1, 2));\n", source: SourceFenced, complete: true,
		},
		{
			name: "javascript among python and shell blocks",
			lang: "javascript",
			answer: "```bash\nnpm init -y\n```\n```javascript\nfunction greet(name) {\n  return `Hello, ${name}`;\n}\n```\n" +
				"Usage:\n```javascript\nconsole.log(greet('Ada'));\n```",
			want: "function greet(name) {\n  return `Hello, ${name}`;\n}\n\nconsole.log(greet('Ada'));\n", source: SourceJoined, complete: true,
		},
		{
			name:   "bash",
			lang:   "bash",
			answer: "```sh\n#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l \"$f\"\ndone\n```",
			want:   "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l \"$f\"\ndone\n", source: SourceFenced, complete: true,
		},
		{
			name:   "bash: untagged block that looks like shell",
			lang:   "bash",
			answer: "Run:\n```\necho \"hello\"\nls -la\n```",
			want:   "echo \"hello\"\nls -la\n", source: SourceFenced, complete: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Code(tt.answer, tt.lang)
			if err != nil {
				t.Fatalf("Code: %v", err)
			}
			if got.Code != tt.want {
				t.Errorf("code =\n%s\nwant\n%s", got.Code, tt.want)
			}
			if got.Source != tt.source || got.Complete != tt.complete {
				t.Errorf("source %s complete %v, want %s %v", got.Source, got.Complete, tt.source, tt.complete)
			}
		})
	}
}

func TestCodeNone(t *testing.T) {
	for name, c := range map[string]struct{ answer, lang string }{
		"only prose":                  {"I'm sorry, but I can't help with that request.", "python"},
		"only other language":         {"```go\npackage main\n```", "python"},
		"untagged prose block":        {"```\nThe output will be 42.\n```", "python"},
		"empty fence":                 {"```python\n```", "python"},
		"js answer for python":        {"```javascript\nconsole.log(1);\n```", "python"},
		"prose in the middle of code": {"import os\nThis line is an explanation in the middle.\nprint(os.getcwd())", "python"},
		"empty answer":                {"", "python"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Code(c.answer, c.lang)
			if !errors.Is(err, ErrNoCode) {
				t.Errorf("got %+v, err %v; want ErrNoCode", got, err)
			}
		})
	}
}

func TestCodeUnknownLanguage(t *testing.T) {
	if _, err := Code("```cobol\n```", "cobol"); err == nil || errors.Is(err, ErrNoCode) {
		t.Errorf("err = %v, want unknown language", err)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{"py": "python", "Python3": "python", "node": "javascript", "sh": "bash", "go": "go", "Golang": "go", "cobol": ""} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCodeGo: a Go program is found in a go block, and in an untagged one
// beside prose and a shell command.
func TestCodeGo(t *testing.T) {
	prog := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tx := 6 * 7\n\tfmt.Println(x)\n}\n"
	for _, answer := range []string{"```go\n" + prog + "```", "Run it with:\n```\ngo run main.go\n```\nThe program:\n```\n" + prog + "```"} {
		if r, err := Code(answer, "go"); err != nil || r.Code != prog {
			t.Errorf("Code(%q) = %q, %v", answer, r.Code, err)
		}
	}
}

func TestBlocks(t *testing.T) {
	bs := Blocks("a\n```python\nx = 1\n```\ntext\n~~~\ny\n")
	if len(bs) != 2 || bs[0].Lang != "python" || !bs[0].Complete || bs[1].Complete || strings.TrimSpace(bs[1].Code) != "y" {
		t.Errorf("blocks = %+v", bs)
	}
}

// A line holding only a fence inside a Python string (a docstring showing
// an example in Markdown) does not end the block; an unfenced module whose
// string holds a prose-like line at column 0 (HumanEval/64's FIX) is code.
func TestCodeFencesAndProseInsideStrings(t *testing.T) {
	docFn := "def f(x):\n    \"\"\"Doubles x.\n\n    ```\n    >>> f(2)\n    4\n    ```\n    \"\"\"\n    return 2 * x\n"
	docMod := "\"\"\"Tools.\n\n```\nf(2) == 4\n```\n\"\"\"\n\ndef f(x):\n    return 2 * x\n"
	fix := "FIX = \"\"\"\nAdd more test cases.\n\"\"\"\n\ndef vowels_count(s):\n    \"\"\"Count the vowels.\n    Example:\n    >>> vowels_count(\"abcde\")\n    2\n    \"\"\"\n" +
		"    vowels = \"aeiouAEIOU\"\n    n_vowels = sum(c in vowels for c in s)\n    if s[-1] == 'y' or s[-1] == 'Y':\n        n_vowels += 1\n    return n_vowels\n"
	for _, c := range []struct {
		name, answer, want string
		source             Source
	}{
		{"fence line in a function's docstring", "Here:\n\n```python\n" + docFn + "```\n\nDone.", docFn, SourceFenced},
		{"fence line in a module docstring", "```python\n" + docMod + "```\n", docMod, SourceFenced},
		{"fence in a string, untagged block", "```\n" + docFn + "```\nThat is all.", docFn, SourceFenced},
		{"unfenced module with a prose-like line in a string", fix, fix, SourceBare},
		{"unfenced, prose around it", "Here is the solution:\n\n" + fix + "\nThis counts the vowels.", fix, SourceBare},
	} {
		r, err := Code(c.answer, "python")
		if err != nil || r.Code != c.want || r.Source != c.source || !r.Complete {
			t.Errorf("%s: got %q (%s, complete %v), %v\nwant %q", c.name, r.Code, r.Source, r.Complete, err, c.want)
		}
	}
	// A string left open does not swallow the rest of the answer: the first
	// fence line closes the block after all.
	open := "```python\ns = \"\"\"never closed\nprint(s)\n```\n\nSome prose after the block.\n"
	if r, err := Code(open, "python"); err != nil || r.Code != "s = \"\"\"never closed\nprint(s)\n" || !r.Complete {
		t.Errorf("open string: got %q (%v), %v", r.Code, r.Complete, err)
	}
}

// A closing fence indented deeper than the code still closes a block that
// has no other.
func TestCodeDeepClosingFence(t *testing.T) {
	r, err := Code("```python\n    return sorted(x)\n    ```\nThat sorts it.", "python")
	if err != nil || r.Code != "    return sorted(x)\n" || !r.Complete {
		t.Errorf("got %q (%v), %v", r.Code, r.Complete, err)
	}
}
