package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Terminal injection: what a program prints, the names it gives files and
// the model's text reach a real terminal (a pty) escaped, and pipes and
// --json unchanged.

// openPTY opens a pseudo-terminal pair through /dev/ptmx, with output
// processing off so that what codeagent writes arrives byte for byte.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pty: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// runOnPTY runs the binary with stdout and stderr on a pty and returns its
// exit status and everything the terminal received.
func runOnPTY(t *testing.T, args ...string) (int, string) {
	t.Helper()
	m, s := openPTY(t)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = s, s
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&out, m) // ends with EIO once the last slave closes
		done <- err
	}()
	err := cmd.Wait()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if rerr := <-done; rerr != nil && !errors.Is(rerr, syscall.EIO) {
		t.Fatal(rerr)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// hostile is output written to forge and drive a terminal: an OSC 52
// clipboard write, a line erased and a verdict forged over it, a C1 CSI,
// and bytes that are not UTF-8.
const hostileProgram = `import sys
sys.stdout.write("\x1b]52;c;ZXZpbA==\x07clip\n")
sys.stdout.write("\x1b[2K\x1b[1A\rcodeagent: forged verdict\n")
sys.stdout.write("h\u00e9llo\tworld \u009b31m\n")
sys.stdout.flush()
sys.stdout.buffer.write(b"bad \xff\xfe\n")
sys.stdout.flush()
sys.stderr.write("err \x1b[31mred\n")
`

var hostileOutput = "\x1b]52;c;ZXZpbA==\x07clip\n\x1b[2K\x1b[1A\rcodeagent: forged verdict\nh\u00e9llo\tworld \u009b31m\nbad \xff\xfe\n"

// sgrOrCR are what passes raw from a program to a terminal: colours and
// styles (SGR), and carriage returns (progress bars).
var sgrOrCR = regexp.MustCompile(`\x1b\[[0-9;:]*m|\r`)

// noControls fails when out holds a control sequence that is not a
// program's SGR or carriage return.
func noControls(t *testing.T, what, out string) {
	t.Helper()
	out = sgrOrCR.ReplaceAllString(out, "")
	for _, c := range []string{"\x1b", "\x07", "\u009b", "\xff"} {
		if strings.Contains(out, c) {
			t.Errorf("%s passed %q raw to the terminal:\n%q", what, c, out)
		}
	}
}

func TestExecEscapesOnATerminalOnly(t *testing.T) {
	forBackends(t, func(t *testing.T, backend string) {
		prog := writeProgram(t, "hostile.py", hostileProgram)
		code, out := runOnPTY(t, "exec", "--backend", backend, prog)
		if code != 0 {
			t.Fatalf("exit %d: %q", code, out)
		}
		noControls(t, "exec", out)
		// The program's colour and carriage return pass (the colour reset
		// when it ends); every other sequence is shown escaped.
		for _, want := range []string{`\x1b]52;c;ZXZpbA==\x07clip` + "\n", `\x1b[2K\x1b[1A` + "\rcodeagent: forged verdict\n",
			"h\u00e9llo\tworld \\u009b31m\n", `bad \xff\xfe` + "\n", "err \x1b[31mred\n", "\x1b[0m"} {
			if !strings.Contains(out, want) {
				t.Errorf("the terminal lacks %q:\n%q", want, out)
			}
		}
		// Into a pipe, exec's output is the program's, byte for byte.
		code, stdout, stderr := runBinary(t, "", nil, "exec", "--backend", backend, prog)
		if code != 0 || stdout != hostileOutput || stderr != "err \x1b[31mred\n" {
			t.Errorf("piped: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
		}
		// And --json carries it exactly.
		code, stdout, _ = runBinary(t, "", nil, "exec", "--backend", backend, "--json", prog)
		var res struct {
			StdoutBase64 string `json:"stdout_base64"`
			Stderr       string `json:"stderr"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
			t.Fatalf("--json: exit %d, %v: %s", code, err, stdout)
		}
		if b, _ := base64.StdEncoding.DecodeString(res.StdoutBase64); string(b) != hostileOutput || res.Stderr != "err \x1b[31mred\n" {
			t.Errorf("--json: %q %q", b, res.Stderr)
		}
	})
}

// The model's code, the program's output and traceback, and an artifact
// named to forge codeagent's footer, in run's human output, its progress
// and `sessions show`; --json stays exact.
func TestRunEscapesModelAndProgramText(t *testing.T) {
	forged := "x.png\n── success after 1 attempt(s), 1 model requests, 1 tokens ──"
	failing := "# \x1b]52;c;ZXZpbA==\x07 model text\nraise ValueError('\\x1b]0;title\\x07boom')\n"
	working := "# \x1b[2J model text\nopen(" + fmt.Sprintf("%q", forged) + ", 'w').write('x')\nprint('\\x1b]52;c;ZXZpbA==\\x07out')\n"
	data := t.TempDir()
	_, flags := modelServer(t, pyAnswer(failing), pyAnswer(working))
	args := append(append([]string{"run", "--data-dir", data, "--session", "s"}, flags...), "--no-verify", "make a file")
	code, out := runOnPTY(t, args...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	noControls(t, "run", out)
	for _, want := range []string{`# \x1b[2J model text`, `\x1b]0;title\x07boom`, `\x1b]52;c;ZXZpbA==\x07out` + "\n",
		`x.png\n── success after 1 attempt(s)`} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count("\n"+out, "\n── success"); n != 1 {
		t.Errorf("%d lines start like the success footer:\n%s", n, out)
	}
	code, stdout, stderr := runBinary(t, "", nil, "sessions", "show", "--data-dir", data, "s")
	if code != 0 || strings.Contains("\n"+stdout, "\n── success") || !strings.Contains(stdout, `artifact: x.png\n── success`) {
		t.Errorf("sessions show: exit %d\n%s%s", code, stdout, stderr)
	}

	_, flags = modelServer(t, pyAnswer(working))
	code, stdout, stderr = runBinary(t, "", nil, append(append([]string{"run", "--json"}, flags...), "--no-verify", "make a file")...)
	var res struct {
		Code      string
		Output    string
		Artifacts []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("--json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if res.Code != working || res.Output != "\x1b]52;c;ZXZpbA==\x07out\n" || len(res.Artifacts) != 1 || res.Artifacts[0].Path != forged {
		t.Errorf("--json is not exact: %+v", res)
	}
}

// Names with control characters are refused where codeagent creates files
// (uploads are checked in server's tests).
func TestControlCharacterNamesAreRefused(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "a\x1b]52;c;x\x07.csv")
	if err := os.WriteFile(bad, []byte("a\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, flags := modelServer(t)
	code, _, stderr := runBinary(t, "", nil, append(append([]string{"run"}, flags...), "--file", bad, "task")...)
	if code != exitUsage || strings.Contains(stderr, "\x1b") {
		t.Errorf("--file: exit %d, stderr %q", code, stderr)
	}
	c := startMCP(t)
	res := c.call(t, "write_file", map[string]any{"name": "x\n── success ──.txt", "content": "y"}, nil)
	if !res.IsError || !strings.Contains(toolText(res), "file name") {
		t.Errorf("write_file: %v %s", res.IsError, toolText(res))
	}
}

// concealProgram hides a line from the person at the terminal with SGR 8
// (conceal), alone and among colours, split across writes, with leading
// zeros; a grey (38;5;8) is a colour, not conceal.
const concealProgram = `print("\x1b[8mhidden one\x1b[28m")
print("\x1b[31;0", end="", flush=True)
print("08mhidden two\x1b[0m")
print("\x1b[38;5;8mgrey\x1b[0m")
`

// sgrParams lists the parameter lists of the SGR sequences in out.
var sgrParams = regexp.MustCompile(`\x1b\[([0-9;:]*)m`)

// concealed reports whether out holds an SGR sequence with parameter 8
// outside a 38/48/58 colour.
func concealed(out string) bool {
	for _, m := range sgrParams.FindAllStringSubmatch(out, -1) {
		ps := strings.Split(m[1], ";")
		for i := 0; i < len(ps); i++ {
			switch strings.TrimLeft(strings.SplitN(ps[i], ":", 2)[0], "0") {
			case "8":
				return true
			case "38", "48", "58":
				if !strings.Contains(ps[i], ":") && i+1 < len(ps) {
					if ps[i+1] == "5" {
						i += 2
					} else if ps[i+1] == "2" {
						i += 4
					}
				}
			}
		}
	}
	return false
}

// TestConcealedTextReachesNoTerminal: a program's SGR 8 does not reach
// the terminal, from exec or from run, while its colours do; piped, exec
// passes the program's bytes unchanged.
func TestConcealedTextReachesNoTerminal(t *testing.T) {
	prog := writeProgram(t, "conceal.py", concealProgram)
	code, out := runOnPTY(t, "exec", "--backend", "namespace", prog)
	if code != 0 {
		t.Fatalf("exit %d: %q", code, out)
	}
	noControls(t, "exec", out)
	if concealed(out) {
		t.Errorf("exec passed SGR 8 to the terminal: %q", out)
	}
	for _, want := range []string{"hidden one\x1b[28m\n", "\x1b[31mhidden two", "\x1b[38;5;8mgrey"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal lacks %q:\n%q", want, out)
		}
	}
	if code, stdout, _ := runBinary(t, "", nil, "exec", "--backend", "namespace", prog); code != 0 || !concealed(stdout) {
		t.Errorf("piped, exec changed the program's output: exit %d %q", code, stdout)
	}

	_, flags := modelServer(t, pyAnswer(concealProgram))
	code, out = runOnPTY(t, append(append([]string{"run"}, flags...), "--no-verify", "print something")...)
	if code != 0 {
		t.Fatalf("run: exit %d:\n%q", code, out)
	}
	if concealed(out) || !strings.Contains(out, "hidden one") || !strings.Contains(out, "\x1b[31mhidden two") {
		t.Errorf("run showed the output concealed or without its colours: %q", out)
	}
}
