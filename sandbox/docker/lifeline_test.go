package docker

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
)

// killedOwnerEnv makes the test binary act as a codeagent that is killed
// while its containers run: it opens a backend with a warm pool, starts an
// endless program with a 30 s limit, prints its pid and waits.
const killedOwnerEnv = "CODEAGENT_TEST_KILLED_OWNER"

func TestMain(m *testing.M) {
	if os.Getenv(killedOwnerEnv) != "" {
		actAsKilledOwner()
		return
	}
	os.Exit(m.Run())
}

func actAsKilledOwner() {
	b, err := New(Config{Warm: 2})
	if err != nil {
		println("backend:", err.Error())
		os.Exit(3)
	}
	ws, _ := os.MkdirTemp("", "codeagent-lifeline-")
	go func() {
		time.Sleep(500 * time.Millisecond)
		println("running")
	}()
	_, _ = b.Run(context.Background(), sandbox.Spec{
		Command: []string{"python3", "-c", "while True: pass"}, Workspace: ws,
		Limits: sandbox.Limits{WallTime: 30 * time.Second},
	})
	os.Exit(0)
}

// TestContainersEndWithTheirOwner kills a process that runs a program
// (30 s limit) and keeps idle containers, with SIGKILL: every container it
// made must stop within seconds, without any codeagent to stop them, and a
// new backend's start sweeps them away.
func TestContainersEndWithTheirOwner(t *testing.T) {
	engineOrSkip(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), killedOwnerEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	ready := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if strings.Contains(sc.Text(), "running") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the owner process ended before its program ran")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the owner process did not start its program")
	}
	owner := "/" + strconv.Itoa(cmd.Process.Pid) + "/"
	cli, err := Connect("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	running := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("label", labelManaged+"=true")})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range list.Items {
			if strings.Contains(c.Labels[labelOwner], owner) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); running() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers of the owner run; want the program's and idle ones", running())
		}
		time.Sleep(100 * time.Millisecond)
	}
	stateDirs := ownedStateDirs(t, owner)
	if len(stateDirs) == 0 {
		t.Fatal("the owner process has no state directory")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for running() > 0 {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("%d containers still run 5 s after their owner was killed (the program's limit was 30 s)", running())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every container stopped %v after its owner was killed", time.Since(killed).Round(time.Millisecond))
	b := newTestBackend(t, Config{})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelManaged+"=true")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if strings.Contains(c.Labels[labelOwner], owner) {
			t.Errorf("container %s of the killed owner is still there after a new start", short(c.ID))
		}
	}
	// Its state directories too, with their staging file systems
	// unmounted (they would otherwise stay mounted, and every mount
	// slows the namespace backend's setup).
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, d := range stateDirs {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("state directory %s of the killed owner is still there after a new start", d)
		}
		if strings.Contains(string(mounts), d+"/") {
			t.Errorf("a file system below %s is still mounted", d)
		}
	}
}

// ownedStateDirs lists the state directories in the default StateDir
// whose owner file names a process with pid as in owner ("/PID/").
func ownedStateDirs(t *testing.T, owner string) []string {
	t.Helper()
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), statePrefix) {
			continue
		}
		d := filepath.Join(os.TempDir(), e.Name())
		if o, err := readOwner(d); err == nil && strings.Contains(o, owner) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// TestLifelineWithoutWriter: a container whose PID 1 starts after
// codeagent died (no writer on its lifeline: the open would wait for one
// forever) ends within seconds on its own.
func TestLifelineWithoutWriter(t *testing.T) {
	b := newTestBackend(t, Config{})
	defer b.Close()
	dir := t.TempDir()
	f, p, err := openLifeline(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // codeagent is gone before the container starts
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := b.createContainer(ctx, &container.Config{Image: b.cfg.Image, Cmd: lifelineInit, Labels: map[string]string{labelManaged: "true", labelOwner: ownerID()}},
		&container.HostConfig{Binds: []string{p + ":" + lifelinePath + ":ro"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
	if _, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	w := b.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the container still runs 10 s after it started without a writer on its lifeline")
	}
	t.Logf("ended %v after its start", time.Since(started).Round(time.Millisecond))
}
