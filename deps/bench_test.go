package deps_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/internal/npmreg"
	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkCachedEnvExec runs the same small Python program with a cached
// environment (bound, on PYTHONPATH) and without one, alternating (ABBA),
// on the namespace backend with sandboxes started ahead (no warm
// interpreters: the warm pool takes only programs without binds).
// Reported: the medians and their difference.
func BenchmarkCachedEnvExec(b *testing.B) {
	sb, err := backends.Open("namespace", backends.Options{Warm: 2})
	if err != nil {
		b.Skip(err)
	}
	defer sb.Close()
	fn, data, err := pyindex.Wheel("seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ix := pyindex.New(b, pyindex.Dist{Project: "seabird", Filename: fn, Data: data})
	st := &deps.Store{Dir: filepath.Join(b.TempDir(), "envs"), Sandbox: sb, Platform: "bench"}
	lease, err := st.Ensure(context.Background(), deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release()
	b.ResetTimer()
	with, without := withAndWithout(b, sb, lease, []string{"python3", "-c", "print(1)"}, b.N)
	b.ReportMetric(float64(median(with).Microseconds())/1000, "ms-with-env")
	b.ReportMetric(float64(median(without).Microseconds())/1000, "ms-without")
	b.ReportMetric(float64((median(with)-median(without)).Microseconds())/1000, "ms-added")
}

// BenchmarkFirstInstall installs three wheels from the loopback index:
// through the store (a sandbox whose only network is the index) and, in
// turn, with pip run directly on the host into a temporary directory.
func BenchmarkFirstInstall(b *testing.B) {
	sb, err := backends.Open("namespace", backends.Options{})
	if err != nil {
		b.Skip(err)
	}
	defer sb.Close()
	var dists []pyindex.Dist
	for i, name := range []string{"seabird", "gull", "tern"} {
		var req []string
		if i == 0 {
			req = []string{"gull", "tern"}
		}
		fn, data, err := pyindex.Wheel(name, "1.0", map[string]string{name + "/__init__.py": "X = 1\n"}, req)
		if err != nil {
			b.Fatal(err)
		}
		dists = append(dists, pyindex.Dist{Project: name, Filename: fn, Data: data})
	}
	ix := pyindex.New(b, dists...)
	var store, pip time.Duration
	b.ResetTimer()
	for i := range b.N {
		viaStore := func() {
			st := &deps.Store{Dir: filepath.Join(b.TempDir(), "envs"), Sandbox: sb, Platform: fmt.Sprint("bench", i)}
			t0 := time.Now()
			lease, err := st.Ensure(context.Background(), deps.Request{Python: []string{"seabird"}, IndexURL: ix.URL()})
			if err != nil {
				b.Fatal(err)
			}
			store += time.Since(t0)
			lease.Release()
		}
		direct := func() {
			cmd := exec.Command("/usr/bin/python3", "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
				"--no-cache-dir", "--only-binary", ":all:", "--target", b.TempDir(), "--index-url", ix.URL(), "seabird")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + b.TempDir(), "PIP_CONFIG_FILE=/dev/null", "NO_PROXY=*"}
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("pip: %v %s", err, out)
			}
			pip += time.Since(t0)
		}
		if i%2 == 0 {
			viaStore()
			direct()
		} else {
			direct()
			viaStore()
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(store.Milliseconds())/n, "ms-store")
	b.ReportMetric(float64(pip.Milliseconds())/n, "ms-pip")
	b.ReportMetric(float64(store)/float64(pip), "store/pip")

}

// BenchmarkNPMEnv measures a first npm install of two packages from a
// loopback registry (a fresh store each time), a cache hit, and a small
// node program with the cached environment and without (ABBA), on the
// namespace backend. Reported: medians.
func BenchmarkNPMEnv(b *testing.B) {
	sb, err := backends.Open("namespace", backends.Options{Warm: 2})
	if err != nil {
		b.Skip(err)
	}
	defer sb.Close()
	reg := npmreg.New(b,
		npmreg.Package{Name: "kiwi", Version: "1.0.0", Dependencies: map[string]string{"moa": "^2.0.0"}, Files: map[string]string{"index.js": "exports.x = 1\n"}},
		npmreg.Package{Name: "moa", Version: "2.0.1", Files: map[string]string{"index.js": "exports.two = 2\n"}})
	req := deps.Request{JavaScript: []string{"kiwi@1.0.0"}, NPMRegistry: reg.URL()}
	var installs, hits []time.Duration
	var st *deps.Store
	for range 5 {
		st = &deps.Store{Dir: filepath.Join(b.TempDir(), "envs"), Sandbox: sb, Platform: "bench"}
		t0 := time.Now()
		lease, err := st.Ensure(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		installs = append(installs, time.Since(t0))
		lease.Release()
	}
	for range 20 {
		t0 := time.Now()
		lease, err := st.Ensure(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		hits = append(hits, time.Since(t0))
		lease.Release()
	}
	lease, err := st.Ensure(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	defer lease.Release()
	with, without := withAndWithout(b, sb, lease, []string{"node", "-e", "console.log(1)"}, 20)
	b.ReportMetric(float64(median(installs).Milliseconds()), "install-ms")
	b.ReportMetric(float64(median(hits).Microseconds()), "hit-µs")
	b.ReportMetric(float64(median(with).Microseconds()), "with-env-µs")
	b.ReportMetric(float64(median(without).Microseconds()), "without-µs")
}

// withAndWithout runs cmd n times with lease's environment and n times
// without, in turns of which goes first (ABBA), after one of each to warm
// up, and returns their durations.
func withAndWithout(b *testing.B, sb sandbox.Sandbox, lease *deps.Lease, cmd []string, n int) (with, without []time.Duration) {
	ws := b.TempDir()
	run := func(withEnv bool) time.Duration {
		spec := sandbox.Spec{Command: cmd, Workspace: ws}
		if withEnv {
			lease.Apply(&spec)
		}
		t0 := time.Now()
		res, err := sb.Run(context.Background(), spec)
		if err != nil || res.Status != sandbox.StatusOK {
			b.Fatalf("%v %v %s", err, res.Status, res.Stderr)
		}
		return time.Since(t0)
	}
	run(true)
	run(false)
	for i := range n {
		first := i%2 == 0
		for _, w := range []bool{first, !first} {
			if d := run(w); w {
				with = append(with, d)
			} else {
				without = append(without, d)
			}
		}
	}
	return with, without
}
