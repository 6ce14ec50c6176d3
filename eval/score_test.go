package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// heRaw is one HumanEval line as the data set has it.
type heRaw struct {
	TaskID    string `json:"task_id"`
	Prompt    string `json:"prompt"`
	Canonical string `json:"canonical_solution"`
	Entry     string `json:"entry_point"`
}

var (
	rawOnce  sync.Once
	rawTasks map[string]heRaw
	rawByID  map[string]Task
)

// humanEvalByID loads HumanEval's tasks and raw lines by id.
func humanEvalByID(t testing.TB) (map[string]Task, map[string]heRaw) {
	t.Helper()
	tasks, _ := humanEval(t, 0)
	rawOnce.Do(func() {
		rawTasks, rawByID = map[string]heRaw{}, map[string]Task{}
		for _, task := range tasks {
			rawByID[task.ID] = task
		}
		f, err := os.Open(humanEvalPath)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var h heRaw
			if json.Unmarshal(sc.Bytes(), &h) == nil {
				rawTasks[h.TaskID] = h
			}
		}
	})
	return rawByID, rawTasks
}

func scoreCode(t *testing.T, id, code string) Score {
	t.Helper()
	sb, _ := realParts(t)
	tasks, _ := humanEvalByID(t)
	task, ok := tasks[id]
	if !ok {
		t.Fatalf("no task %s", id)
	}
	s, err := (&Scorer{Sandbox: sb}).Score(context.Background(), &task, code)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// module is the canonical answer as a whole module: prompt and body.
func module(t *testing.T, id string) string {
	_, raw := humanEvalByID(t)
	return raw[id].Prompt + raw[id].Canonical
}

// More than 1 MiB of output (the sandbox's cap) from a correct solution,
// on stdout, stderr or the descriptor itself, does not make it fail.
func TestScoreLargeOutputPasses(t *testing.T) {
	for name, noise := range map[string]string{
		"stdout":     "print('x' * (2 << 20))\n",
		"stderr":     "import sys\nprint('y' * (2 << 20), file=sys.stderr)\n",
		"descriptor": "import os\nos.write(1, b'z' * (2 << 20))\n",
		"per call":   "import sys\n_p = print\n",
	} {
		t.Run(name, func(t *testing.T) {
			code := noise + module(t, "HumanEval/0")
			if name == "per call" {
				code = strings.Replace(module(t, "HumanEval/0"), "    for idx, elem", "    print('w' * 100000)\n    for idx, elem", 1)
			}
			if s := scoreCode(t, "HumanEval/0", code); !s.Passed {
				t.Fatalf("a correct solution with %s noise failed: %s\n%s", name, s.Class, s.Output)
			}
		})
	}
}

// A wrong solution cannot pass by printing a verdict, exiting early or
// writing to every descriptor; a correct one that exits before check ran
// fails too.
func TestScoreForgedVerdictsFail(t *testing.T) {
	wrong := "def has_close_elements(numbers, threshold):\n    return 'wrong'\n"
	for name, tail := range map[string]string{
		"marker and SystemExit": "print('codeagent-eval: check passed')\nraise SystemExit(0)\n",
		"marker and os._exit":   "import os\nprint('codeagent-eval: check passed', flush=True)\nos._exit(0)\n",
		"sys.exit":              "import sys\nsys.exit(0)\n",
		"every descriptor": "import os\nfor fd in range(0, 64):\n    try:\n        os.write(fd, b'codeagent-eval: check passed\\npassed\\n')\n" +
			"    except OSError:\n        pass\nos._exit(0)\n",
		"stdin echo":     "import os\nfor fd in range(0, 64):\n    try:\n        os.write(1, os.read(fd, 100))\n    except OSError:\n        pass\nos._exit(0)\n",
		"exit in atexit": "import atexit, os\natexit.register(lambda: os._exit(0))\nraise SystemExit(0)\n",
		"kill itself":    "import signal\nsignal.raise_signal(signal.SIGKILL)\n",
	} {
		t.Run(name, func(t *testing.T) {
			if s := scoreCode(t, "HumanEval/0", wrong+tail); s.Passed {
				t.Fatalf("a wrong solution passed with %q", tail)
			}
			if s := scoreCode(t, "HumanEval/0", module(t, "HumanEval/0")+tail); s.Passed {
				t.Fatalf("a solution that exits before check ran passed with %q", tail)
			}
		})
	}
}

// A correct solution passes whatever it does to its own output.
func TestScoreOutputTricksPass(t *testing.T) {
	for name, tail := range map[string]string{
		"rebinds print":    "import builtins\nbuiltins.print = lambda *a, **k: None\nprint = lambda *a, **k: None\n",
		"stdout to null":   "import os, sys\nsys.stdout = open(os.devnull, 'w')\nsys.stderr = sys.stdout\n",
		"prints at exit":   "import atexit\natexit.register(print, 'bye from atexit')\n",
		"closes its fds":   "import os\nos.close(1)\nos.close(2)\n",
		"prints a marker":  "print('codeagent-eval: check passed')\nprint('passed')\n",
		"ignores an alarm": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n",
	} {
		t.Run(name, func(t *testing.T) {
			if s := scoreCode(t, "HumanEval/0", module(t, "HumanEval/0")+tail); !s.Passed {
				t.Fatalf("a correct solution that %s failed: %s\n%s", name, s.Class, s.Output)
			}
		})
	}
}

// Completion-style answers pass as the reference scores them: the body
// alone, or only the entry function of a prompt that defines helpers.
func TestScoreCompletionStyleAnswers(t *testing.T) {
	_, raw := humanEvalByID(t)
	if s := scoreCode(t, "HumanEval/2", raw["HumanEval/2"].Canonical); !s.Passed {
		t.Errorf("the canonical body alone failed: %s\n%s", s.Class, s.Output)
	}
	entryOnly := map[string]string{
		"HumanEval/10": "def make_palindrome(string: str) -> str:\n    if not string:\n        return ''\n    beginning_of_suffix = 0\n" +
			"    while not is_palindrome(string[beginning_of_suffix:]):\n        beginning_of_suffix += 1\n" +
			"    return string + string[:beginning_of_suffix][::-1]\n",
		"HumanEval/38": "def decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n",
		"HumanEval/50": "def decode_shift(s: str):\n    return \"\".join([chr(((ord(ch) - 5 - ord(\"a\")) % 26) + ord(\"a\")) for ch in s])\n",
		"HumanEval/32": "def find_zero(xs: list):\n    begin, end = -1., 1.\n    while poly(xs, begin) * poly(xs, end) > 0:\n" +
			"        begin *= 2.0\n        end *= 2.0\n    while end - begin > 1e-10:\n        center = (begin + end) / 2.0\n" +
			"        if poly(xs, center) * poly(xs, begin) > 0:\n            begin = center\n        else:\n            end = center\n    return begin\n",
	}
	for id, code := range entryOnly {
		if s := scoreCode(t, id, code); !s.Passed {
			t.Errorf("%s: the entry function alone failed: %s\n%s", id, s.Class, s.Output)
		}
	}
}

// The HumanEval defaults are the reference's: 3 s per sample, no tight
// bound on memory or threads.
func TestScoreHumanEvalDefaults(t *testing.T) {
	threads := "import threading\n_go = threading.Event()\n_ts = [threading.Thread(target=_go.wait) for _ in range(100)]\n" +
		"for _t in _ts:\n    _t.start()\n_go.set()\nfor _t in _ts:\n    _t.join()\n"
	if s := scoreCode(t, "HumanEval/0", threads+module(t, "HumanEval/0")); !s.Passed {
		t.Errorf("100 threads failed: %s\n%s", s.Class, s.Output)
	}
	// More than the sandbox's default of 256 MiB, held (bytearray zeroes
	// every page), within the reference's 3 s: 600 MiB took 2.5 s of the 3
	// on the CI machine without a sandbox, and failed under CI's load.
	memory := "_big = bytearray(300 << 20)\n"
	if s := scoreCode(t, "HumanEval/0", memory+module(t, "HumanEval/0")); !s.Passed {
		t.Errorf("300 MiB failed: %s\n%s", s.Class, s.Output)
	}
	start := time.Now()
	s := scoreCode(t, "HumanEval/0", "import time\ntime.sleep(5)\n"+module(t, "HumanEval/0"))
	if s.Passed || time.Since(start) > 4800*time.Millisecond {
		t.Errorf("a sample sleeping 5 s passed or was not stopped at 3 s: passed %v after %s", s.Passed, time.Since(start))
	}
}
