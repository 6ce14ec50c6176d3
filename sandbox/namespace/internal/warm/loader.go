package warm

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// loader is what a warm interpreter runs: it imports the stack, says it
// is ready, and runs the program of one request (see warm.py).
//
//go:embed warm.py
var loader []byte

// loaderPath is where the loader lies in the sandbox; /code is mounted
// over at the execution, hiding it.
const loaderPath = "/code/.codeagent-warm.py"

// startup is the warm-up's deadline, and its CPU budget.
const startup = 60 * time.Second

// Env is the environment a warm interpreter starts with: a Python
// program's default one.
func Env() map[string]string {
	py, _ := lang.Lookup("python")
	return py.Env
}

// Limits bound a warm interpreter until its execution sets its own.
func Limits() sandbox.Limits {
	return sandbox.Limits{WallTime: startup, CPUTime: startup}.WithDefaults()
}

// Spec is the command, environment and files of a warm interpreter's
// sandbox; its workspace is the backend's to choose (an empty directory
// until the execution's is attached).
func Spec() sandbox.Spec {
	return sandbox.Spec{Command: []string{"python3", loaderPath}, Env: Env(),
		Files: []sandbox.File{{Path: loaderPath, Data: loader}}}
}

// AwaitReady reads the loader's "ready" line from the sandbox's stdout,
// for up to the warm-up's deadline; stderr is read only to explain a
// failure. The loader writes nothing else before its request, so nothing
// of the program's output is read here.
func AwaitReady(stdout, stderr *os.File) error {
	_ = stdout.SetReadDeadline(time.Now().Add(startup))
	defer stdout.SetReadDeadline(time.Time{})
	var line []byte
	buf := make([]byte, 64)
	for len(line) < 512 {
		n, err := stdout.Read(buf)
		line = append(line, buf[:n]...)
		if i := strings.IndexByte(string(line), '\n'); i >= 0 {
			if s := string(line[:i]); s != "ready" {
				return fmt.Errorf("warm-up failed: %.200q", s)
			}
			if i != len(line)-1 {
				return errors.New("warm-up wrote more than its ready line")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("warm-up: %w%s", err, stderrHint(stderr))
		}
	}
	return errors.New("warm-up: no ready line")
}

// stderrHint is what the sandbox wrote on stderr so far, for an error.
func stderrHint(f *os.File) string {
	_ = f.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	b := make([]byte, 2048)
	n, _ := f.Read(b)
	if n == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(string(b[:n]))
}

// Request is what hands the loader its program: a decimal length, a
// newline, and as much JSON: the interpreter's arguments (Args), the
// program's complete environment env (KEY=VALUE, as the backend makes it
// for a cold sandbox) with PWD set to dir as bwrap's --chdir sets it, and
// the directory dir.
func Request(args, env []string, dir string) ([]byte, error) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	m["PWD"] = dir
	req, err := json.Marshal(map[string]any{"argv": args, "env": m, "cwd": dir})
	if err != nil {
		return nil, err
	}
	return append([]byte(strconv.Itoa(len(req))+"\n"), req...), nil
}

// Send writes req to the interpreter's stdin, then the program's stdin
// when it has one, and closes the interpreter's stdin.
func Send(stdin io.WriteCloser, req []byte, program io.Reader) {
	_, err := stdin.Write(req)
	if err == nil && program != nil {
		_, _ = io.Copy(stdin, program)
	}
	_ = stdin.Close()
}
