package ollama

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvOllama names the ollama binary; without it the suite is skipped.
const EnvOllama = "CODEAGENT_OLLAMA"

const skipMessage = "end-to-end tests against a real Ollama are off: set " + EnvOllama +
	" to the ollama binary to run them, e.g. " + EnvOllama + "=$(bash ../shared/ollama/build.sh) go test -count=1 ./e2e/ollama" +
	" (from the repository root; see docs/TESTING.md)"

// suiteLimit bounds the whole suite: past it Ollama is killed and the test
// binary exits, whatever the tests are doing. Each test has its own,
// shorter deadlines.
const suiteLimit = 10 * time.Minute

// Models created by models.sh.
var modelNames = []string{"tiny", "tiny-tools", "tiny-long", "tiny-empty", "tiny-ok", "tiny-fffd", "toolcall"}

// suite is the one Ollama server and codeagent binary all tests share.
var suite struct {
	enabled  bool
	ollama   string // the ollama binary
	repo     string // the repository root
	shared   string // ../shared, beside the repository
	root     string // the suite's private directory
	host     string // 127.0.0.1:PORT
	base     string // http://127.0.0.1:PORT/v1
	models   string // OLLAMA_MODELS
	work     string // models.sh's work directory (the GGUF files)
	bin      string // the codeagent binary built for the suite
	logPath  string // Ollama's log
	serve    *exec.Cmd
	exited   chan struct{} // closed when serve has exited
	watchdog *exec.Cmd
}

// need skips t unless the suite is enabled.
func need(t *testing.T) {
	t.Helper()
	if !suite.enabled {
		t.Skip(skipMessage)
	}
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	bin := os.Getenv(EnvOllama)
	if bin == "" {
		fmt.Fprintln(os.Stderr, "e2e/ollama: "+skipMessage)
		return m.Run()
	}
	t0 := time.Now()
	suite.ollama = bin
	root, err := os.MkdirTemp("", "codeagent-e2e-ollama-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/ollama:", err)
		return 1
	}
	suite.root = root
	defer os.RemoveAll(root)
	limit := time.AfterFunc(suiteLimit, func() {
		fmt.Fprintf(os.Stderr, "e2e/ollama: the suite ran past %s: killing Ollama\n", suiteLimit)
		killGroup()
		os.Exit(1)
	})
	defer limit.Stop()
	if err := setUp(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/ollama: setting up: %v\n%s", err, logTail())
		if err := tearDown(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/ollama:", err)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e/ollama: Ollama at %s with %d models, codeagent built, in %s\n", suite.base, len(modelNames), time.Since(t0).Round(time.Millisecond))
	suite.enabled = true
	code := m.Run()
	if err := checkLoopback(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/ollama:", err)
		code = 1
	}
	if err := tearDown(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/ollama:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprint(os.Stderr, logTail())
	}
	fmt.Fprintf(os.Stderr, "e2e/ollama: suite done in %s\n", time.Since(t0).Round(time.Millisecond))
	return code
}

// setUp finds the repository and ../shared, starts Ollama, creates the
// models and builds codeagent (the build runs meanwhile).
func setUp() error {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(repo, "go.mod")); err != nil {
		return fmt.Errorf("the repository root is not two levels up: %w", err)
	}
	suite.repo = repo
	suite.shared = filepath.Join(filepath.Dir(repo), "shared")
	if _, err := os.Stat(filepath.Join(suite.shared, "ollama", "models.sh")); err != nil {
		return fmt.Errorf("the shared test files are missing (want ../shared/ollama/models.sh beside the repository): %w", err)
	}
	if fi, err := os.Stat(suite.ollama); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s=%s is not an executable file (build it: bash ../shared/ollama/build.sh)", EnvOllama, suite.ollama)
	}
	for _, d := range []string{"home", "models", "work", "tmp", "bin", "data"} {
		if err := os.MkdirAll(filepath.Join(suite.root, d), 0o755); err != nil {
			return err
		}
	}
	suite.models, suite.work = filepath.Join(suite.root, "models"), filepath.Join(suite.root, "work")
	suite.bin = filepath.Join(suite.root, "bin", "codeagent")
	built := make(chan error, 1)
	go func() { built <- buildCodeagent() }()
	err = startOllama()
	if err == nil {
		err = createModels()
	}
	if berr := <-built; err == nil {
		err = berr
	}
	return err
}

func buildCodeagent() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", suite.bin, "./cmd/codeagent")
	cmd.Dir = suite.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/codeagent: %v\n%s", err, out)
	}
	return nil
}

// ollamaEnv is the whole environment of Ollama and its clients: nothing is
// inherited but PATH, so no OLLAMA_* or proxy setting of the caller counts.
// Loopback only, a private models directory and home (Ollama writes its
// key pair to ~/.ollama and reads ~/.ollama/server.json), cloud features
// off, no pruning pass at start. The UTF-8 locale is for models.sh, whose
// bash writes $'\ufffd' as the six characters \ufffd in the C locale.
func ollamaEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C.UTF-8",
		"HOME=" + filepath.Join(suite.root, "home"),
		"TMPDIR=" + filepath.Join(suite.root, "tmp"),
		"OLLAMA_HOST=" + suite.host,
		"OLLAMA_MODELS=" + suite.models,
		"OLLAMA_NO_CLOUD=1",
		"OLLAMA_NOPRUNE=1",
		"OLLAMA_KEEP_ALIVE=10m",
		"OLLAMA_CONTEXT_LENGTH=2048", // the models' own context
		"OLLAMA_NUM_PARALLEL=1",
	}
}

// startOllama starts `ollama serve` on a free loopback port, in a process
// group of its own (with its runners), watched by a shell that kills the
// group and removes the suite's directory should this test binary die
// without cleaning up (a panic at go test's -timeout, a kill).
func startOllama() error {
	var last error
	for try := 0; try < 3; try++ { // another program may take the port between picking and binding
		port, err := freePort()
		if err != nil {
			return err
		}
		suite.host = "127.0.0.1:" + strconv.Itoa(port)
		suite.base = "http://" + suite.host + "/v1"
		suite.logPath = filepath.Join(suite.root, fmt.Sprintf("ollama-%d.log", try))
		if last = startServe(); last == nil {
			return nil
		}
		_ = tearDown()
	}
	return last
}

func startServe() error {
	logf, err := os.Create(suite.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(suite.ollama, "serve")
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = ollamaEnv(), suite.root, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s serve: %w", suite.ollama, err)
	}
	suite.serve, suite.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(suite.exited) }()
	w := exec.Command("bash", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 0.5; done; kill -KILL -- "-$2" 2>/dev/null; sleep 1; rm -rf -- "$3"`,
		"e2e-ollama-watchdog", strconv.Itoa(os.Getpid()), strconv.Itoa(cmd.Process.Pid), suite.root)
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the watchdog: %w", err)
	}
	suite.watchdog = w
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-suite.exited:
			return fmt.Errorf("ollama serve exited at start (%v)", cmd.ProcessState)
		default:
		}
		if resp, err := http.Get("http://" + suite.host + "/api/version"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("ollama serve did not answer on %s within 60s", suite.host)
}

// createModels runs models.sh, then gives every model num_thread 1: on two
// busy cores, two ggml threads spinning against each other made these tiny
// models 60 times slower (200 tokens: 2.8 s with 2 threads, 0.05 s with 1).
// The template, stop words and weights stay as models.sh made them.
func createModels() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := append(ollamaEnv(), "OLLAMA="+suite.ollama)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(suite.shared, "ollama", "models.sh"), suite.work)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("models.sh: %v\n%s", err, out)
	}
	for _, name := range modelNames {
		mf := filepath.Join(suite.work, "Modelfile.threads."+name)
		if err := os.WriteFile(mf, []byte("FROM "+name+"\nPARAMETER num_thread 1\n"), 0o644); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, suite.ollama, "create", name, "-f", mf)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ollama create %s (num_thread 1): %v\n%s", name, err, out)
		}
	}
	return nil
}

// tearDown stops Ollama (SIGTERM, which stops its runners; SIGKILL to the
// group after 15 s), then the watchdog, and checks that nothing is left.
func tearDown() error {
	if suite.serve == nil {
		return nil
	}
	_ = suite.serve.Process.Signal(syscall.SIGTERM)
	select {
	case <-suite.exited:
	case <-time.After(15 * time.Second):
		fmt.Fprintln(os.Stderr, "e2e/ollama: ollama serve did not stop within 15s of SIGTERM: killing its group")
	}
	killGroup()
	<-suite.exited
	if w := suite.watchdog; w != nil {
		_ = w.Process.Kill()
		_ = w.Wait()
	}
	suite.serve, suite.watchdog = nil, nil
	return checkLeftovers()
}

// killGroup kills Ollama's process group: serve and its runners.
func killGroup() {
	if suite.serve != nil && suite.serve.Process != nil {
		_ = syscall.Kill(-suite.serve.Process.Pid, syscall.SIGKILL)
	}
}

// checkLeftovers waits up to 10 s for every process of the suite to be
// gone (Ollama's group, runners, codeagent processes: anything whose
// command line or environment names the suite's directory) and its port to
// be closed.
func checkLeftovers() error {
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left = suiteProcesses()
		if c, err := net.DialTimeout("tcp", suite.host, time.Second); err == nil {
			c.Close()
			left = append(left, "a listener on "+suite.host)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("left behind after the suite: %s", strings.Join(left, "; "))
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail is the end of Ollama's log, for failures.
func logTail() string {
	b, err := os.ReadFile(suite.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return "--- end of Ollama's log ---\n" + string(b) + "\n---\n"
}

// blobPath is where Ollama keeps a GGUF file models.sh wrote: a runner's
// --model argument.
func blobPath(gguf string) (string, error) {
	b, err := os.ReadFile(filepath.Join(suite.work, gguf))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return filepath.Join(suite.models, "blobs", "sha256-"+hex.EncodeToString(sum[:])), nil
}

// codeagentEnv is the environment of codeagent processes: the caller's,
// without model settings, with a private data directory.
func codeagentEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CODEAGENT_") || strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") ||
			strings.HasPrefix(k, "OLLAMA_") || k == "XDG_DATA_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "XDG_DATA_HOME="+filepath.Join(suite.root, "data")), extra...)
}

// codeagent runs the suite's codeagent binary with a deadline and returns
// its exit status and output.
func codeagent(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	return codeagentStdin(t, limit, "", args...)
}

// codeagentStdin is codeagent with stdin as the standard input.
func codeagentStdin(t *testing.T, limit time.Duration, stdin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.bin, args...)
	cmd.Env, cmd.WaitDelay, cmd.Stdin = codeagentEnv(), 10*time.Second, strings.NewReader(stdin)
	cmd.Dir = t.TempDir() // run offers its folder to programs: an empty one, not this package's
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("codeagent %s: no end within %s\nstderr:\n%s", strings.Join(args, " "), limit, stderr.String())
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("codeagent %s: %v", strings.Join(args, " "), err)
	}
	return 0, stdout.String(), stderr.String()
}
