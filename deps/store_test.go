package deps_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

var (
	sbOnce sync.Once
	sb     sandbox.Sandbox
	sbErr  error
)

// realSandbox is the namespace backend with its egress layer, shared by
// the package's tests.
func realSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sbOnce.Do(func() { sb, sbErr = backends.Open("namespace", backends.Options{}) })
	if sbErr != nil {
		t.Skipf("no sandbox here: %v", sbErr)
	}
	return sb
}

func dist(t *testing.T, name, version string, files map[string]string, requires ...string) pyindex.Dist {
	t.Helper()
	fn, data, err := pyindex.Wheel(name, version, files, requires)
	if err != nil {
		t.Fatal(err)
	}
	return pyindex.Dist{Project: name, Filename: fn, Data: data}
}

// birds is an index of two projects, seabird needing gull.
func birds(t *testing.T) *pyindex.Index {
	return pyindex.New(t,
		dist(t, "seabird", "1.0", map[string]string{"seabird/__init__.py": "import gull\nVALUE = 40 + gull.TWO\n"}, "gull>=0.5"),
		dist(t, "gull", "0.7", map[string]string{"gull/__init__.py": "TWO = 2\n"}))
}

func newStore(t *testing.T) *deps.Store {
	return &deps.Store{Dir: filepath.Join(t.TempDir(), "envs"), Sandbox: realSandbox(t), Platform: "test",
		Limits: sandbox.Limits{WallTime: 2 * time.Minute}}
}

// run runs a Python program with lease's environment (none when nil).
func run(t *testing.T, lease *deps.Lease, code string) sandbox.Result {
	t.Helper()
	spec := sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: t.TempDir(),
		Limits: sandbox.Limits{WallTime: time.Minute}}
	if lease != nil {
		lease.Apply(&spec)
	}
	res, err := realSandbox(t).Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestInstallUseAndReuseOffline(t *testing.T) {
	ix := birds(t)
	s := newStore(t)
	ctx := context.Background()
	req := deps.Request{Python: []string{"seabird==1.0"}, IndexURL: ix.URL()}
	lease, err := s.Ensure(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Installed || len(lease.Packages) != 2 || ix.Files() != 2 {
		t.Fatalf("first use: installed %v, packages %+v, %d files fetched", lease.Installed, lease.Packages, ix.Files())
	}
	for _, p := range lease.Packages {
		if p.SHA256 == "" || p.Version == "" {
			t.Errorf("package without version or hash: %+v", p)
		}
	}
	// The program sees the packages and the image's own.
	res := run(t, lease, "import seabird, pandas; print(seabird.VALUE)")
	if res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout)) != "42" {
		t.Fatalf("with the environment: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// ...but may neither change them nor reach the index.
	res = run(t, lease, `
import os, urllib.request
for f in ("/deps/python/seabird/__init__.py", "/deps/python/new.py"):
    try:
        open(f, "a").write("x")
        print("wrote", f)
    except OSError:
        pass
try:
    urllib.request.urlopen("`+ix.URL()+`", timeout=5)
    print("reached the index")
except Exception:
    pass
`)
	if res.Status != sandbox.StatusOK || len(res.Stdout) != 0 {
		t.Fatalf("the run phase changed the environment or reached the index: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	lease.Release()
	before := ix.Requests()

	// The same request, written differently, is a hit without the index;
	// with the index gone it still works.
	ix.Close()
	again, err := s.Ensure(ctx, deps.Request{Python: []string{"SeaBird == 1.0"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Installed || again.Key != lease.Key || ix.Requests() != before {
		t.Errorf("second use installed again (%v) or asked the index (%d requests, %d before)", again.Installed, ix.Requests(), before)
	}
	if res := run(t, again, "import seabird; print(seabird.VALUE)"); strings.TrimSpace(string(res.Stdout)) != "42" {
		t.Errorf("offline: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// A program that did not declare it does not have it.
	if res := run(t, nil, "import seabird"); res.Status == sandbox.StatusOK || !strings.Contains(string(res.Stderr), "ModuleNotFoundError") {
		t.Errorf("without the environment: %s %q", res.Status, res.Stderr)
	}
}

func TestConcurrentFirstUseInstallsOnce(t *testing.T) {
	ix := birds(t)
	s := newStore(t)
	other := &deps.Store{Dir: s.Dir, Sandbox: s.Sandbox, Platform: s.Platform, Limits: s.Limits} // as another process
	var wg sync.WaitGroup
	leases := make([]*deps.Lease, 4)
	errs := make([]error, 4)
	for i := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			leases[i], errs[i] = st.Ensure(context.Background(), deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()})
		}()
	}
	wg.Wait()
	installed := 0
	for i, l := range leases {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if l.Installed {
			installed++
		}
		l.Release()
	}
	if installed != 1 || ix.Files() != 2 {
		t.Errorf("%d installs, %d files fetched; want 1 and 2", installed, ix.Files())
	}
}

// Two processes that both find the environment missing must not wait
// for each other: the one that installs keeps a shared lease for as long
// as its execution lasts, which an exclusive lock would wait for forever.
func TestTwoProcessesThatBothFindItMissingBothGetIt(t *testing.T) {
	ix := birds(t)
	s := newStore(t)
	other := &deps.Store{Dir: s.Dir, Sandbox: s.Sandbox, Platform: s.Platform, Limits: s.Limits} // as another process
	req := deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()}
	r, err := req.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	key, err := r.Key(s.Platform)
	if err != nil {
		t.Fatal(err)
	}
	// A third process looking (shared) keeps both from taking the
	// exclusive lock until both have seen the key missing.
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	looker, err := os.OpenFile(filepath.Join(s.Dir, key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(looker.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type got struct {
		lease *deps.Lease
		err   error
	}
	done := make(chan got, 2)
	for _, st := range []*deps.Store{s, other} {
		go func() {
			l, err := st.Ensure(ctx, req)
			done <- got{l, err} // each holds its lease, as a running execution
		}()
	}
	time.Sleep(500 * time.Millisecond)
	looker.Close()
	installed := 0
	for range 2 {
		g := <-done
		if g.err != nil {
			t.Fatalf("a process did not get the environment: %v", g.err)
		}
		defer g.lease.Release()
		if g.lease.Installed {
			installed++
		}
	}
	if installed != 1 {
		t.Errorf("%d installs, want 1", installed)
	}
}

func TestFailedInstallLeavesNothing(t *testing.T) {
	ix := birds(t)
	failsLeavingNothing(t, newStore(t), deps.Request{Python: []string{"seabird==1.0", "albatross==2.0"}, IndexURL: ix.URL()}, "albatross")
}

// A source distribution's setup script runs only inside the install's
// sandbox, and only when allowed: what it writes to the host's paths
// stays absent.
func TestSourceBuildStaysInTheSandbox(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	// A host file the script points links at, where codeagent, as root,
	// writes and reads its own files after the install.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setup := "import os\nfor p in (" + "'" + marker + "', '/tmp/pwned-by-setup'):\n" +
		"    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n" +
		"for n in ('env.json', '../env.json', 'report.json.old'):\n" +
		"    try:\n        os.symlink('" + victim + "', '/workspace/' + n)\n    except OSError:\n        pass\n" +
		"from setuptools import setup\nsetup(name='puffin', version='1.0', packages=['puffin'])\n"
	fn, data, err := pyindex.Sdist("puffin", "1.0", setup)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.New(t, pyindex.Dist{Project: "puffin", Filename: fn, Data: data})
	s := newStore(t)
	_, err = s.Ensure(context.Background(), deps.Request{Python: []string{"puffin"}, IndexURL: ix.URL()})
	if err == nil {
		t.Fatal("a source distribution was built without --allow-source-builds")
	}
	lease, err := s.Ensure(context.Background(), deps.Request{Python: []string{"puffin"}, IndexURL: ix.URL(), AllowSource: true})
	if err != nil {
		t.Fatal(err)
	}
	lease.Release()
	for _, p := range []string{marker, "/tmp/pwned-by-setup"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the setup script wrote the host's %s", p)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "the user's\n" {
		t.Errorf("codeagent wrote through a link the setup script planted: %q", b)
	}
	if envs, _ := s.List(); len(envs) != 1 || len(envs[0].Packages) != 1 {
		t.Errorf("environments %+v", envs)
	}
}

func TestFindLinksNeedsNoNetwork(t *testing.T) {
	ix := birds(t)
	wheels := t.TempDir()
	if err := pyindex.WriteWheelhouse(wheels,
		dist(t, "seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 7\n"})); err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	lease, err := s.Ensure(context.Background(), deps.Request{Python: []string{"seabird"}, FindLinks: wheels})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if res := run(t, lease, "import seabird; print(seabird.VALUE)"); strings.TrimSpace(string(res.Stdout)) != "7" {
		t.Errorf("from the wheelhouse: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	if ix.Requests() != 0 {
		t.Errorf("the index was asked")
	}
}

func TestPruneSparesEnvironmentsInUse(t *testing.T) {
	ix := birds(t)
	s := newStore(t)
	ctx := context.Background()
	a, err := s.Ensure(ctx, deps.Request{Python: []string{"gull"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Ensure(ctx, deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if err := s.Remove(a.Key); !errors.Is(err, deps.ErrInUse) {
		t.Errorf("removing an environment in use: %v", err)
	}
	removed, err := s.Prune(0)
	if err != nil || len(removed) != 1 || removed[0].Key != b.Key {
		t.Fatalf("prune removed %v, %v; want only %s", removed, err, b.Key)
	}
	if res := run(t, a, "import gull; print(gull.TWO)"); strings.TrimSpace(string(res.Stdout)) != "2" {
		t.Errorf("the environment in use went: %s %q", res.Status, res.Stderr)
	}
	a.Release()
	if err := s.Remove(a.Key[:8]); err != nil {
		t.Fatal(err)
	}
	if envs, _ := s.List(); len(envs) != 0 {
		t.Errorf("left: %v", envs)
	}
}

// Past the size cap the least recently used environment goes.
func TestEvictionKeepsTheCap(t *testing.T) {
	ix := birds(t)
	s := newStore(t)
	s.MaxBytes = 1 // every install evicts the others not in use
	ctx := context.Background()
	a, err := s.Ensure(ctx, deps.Request{Python: []string{"gull"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	b, err := s.Ensure(ctx, deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()})
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	envs, _ := s.List()
	if len(envs) != 1 || envs[0].Key != b.Key {
		t.Errorf("after eviction: %v, want only %s", envs, b.Key)
	}
}
