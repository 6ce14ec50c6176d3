package workspace_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/workspace"
)

// benchFolder makes a folder of n files of size bytes each (10,000 of
// 104,858 bytes: 1 GiB) under dir.
func benchFolder(b *testing.B, dir string, n, size int) {
	b.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.csv", i))
		if i < 100 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFolderView measures what a run in a folder adds to its first
// execution: the workspace made ready (the folder scanned and copied, or
// one --file copied in) and one small program run in it, interleaved A/B
// in each iteration on one backend (CODEAGENT_BENCH_BACKEND, default
// namespace). Reported: ms-file (one small --file), ms-folder (a folder of
// 10,000 files, 1 GiB), their difference, and ms-cp-a, `cp -a` of the
// folder, the floor of any copy; removing the workspaces is not timed. See docs/BENCHMARKS.md.
func BenchmarkFolderView(b *testing.B) {
	backend := os.Getenv("CODEAGENT_BENCH_BACKEND")
	if backend == "" {
		backend = "namespace"
	}
	sb, err := backends.Open(backend, backends.Options{AllowWeakIsolation: true,
		Kubernetes: backends.KubernetesOptions{Kubeconfig: os.Getenv("CODEAGENT_KUBECONFIG")}})
	if err != nil {
		b.Skip(err)
	}
	defer sb.Close()
	root := b.TempDir()
	folder := filepath.Join(root, "project")
	benchFolder(b, folder, 10000, 104858)
	small := filepath.Join(root, "sales.csv")
	os.WriteFile(small, []byte("a,b\n1,2\n"), 0o644)
	run := func(ws *workspace.Workspace) {
		res, err := sb.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", "print(1)"}, Workspace: ws.Dir})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	var file, view, cp time.Duration
	for i := range b.N {
		t0 := time.Now()
		ws, err := workspace.NewTemp(root, "ws-")
		if err == nil {
			_, err = ws.CopyIn(small, 0)
		}
		if err != nil {
			b.Fatal(err)
		}
		run(ws)
		file += time.Since(t0)
		ws.Close()

		t0 = time.Now()
		f, err := workspace.ScanFolder(folder, workspace.DefaultFolderLimits())
		if err != nil {
			b.Fatal(err)
		}
		ws, err = workspace.NewTemp(root, "ws-")
		if err == nil {
			err = f.Seed(ws)
		}
		if err != nil {
			b.Fatal(err)
		}
		run(ws)
		view += time.Since(t0)
		ws.Close()

		// The floor of any copy: cp -a of the folder.
		dst := filepath.Join(root, fmt.Sprintf("cp%d", i))
		t0 = time.Now()
		if out, err := exec.Command("cp", "-a", folder, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		cp += time.Since(t0)
		os.RemoveAll(dst)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cp.Milliseconds())/n, "ms-cp-a")
	b.ReportMetric(float64(file.Milliseconds())/n, "ms-file")
	b.ReportMetric(float64(view.Milliseconds())/n, "ms-folder")
	b.ReportMetric(float64((view-file).Milliseconds())/n, "ms-added")
}

// BenchmarkApply measures applying 1,000 changed files (10 KiB each) to a
// folder against `cp -a` of the same files into a copy of it, interleaved
// in each iteration. Reported: ms-apply, ms-cp and their ratio.
func BenchmarkApply(b *testing.B) {
	root := b.TempDir()
	var apply, cp time.Duration
	for i := range b.N {
		folder := filepath.Join(root, fmt.Sprintf("folder%d", i))
		benchFolder(b, folder, 1000, 10240)
		f, err := workspace.ScanFolder(folder, workspace.DefaultFolderLimits())
		if err != nil {
			b.Fatal(err)
		}
		ws, err := workspace.NewTemp(root, "ws-")
		if err == nil {
			err = f.Seed(ws)
		}
		if err != nil {
			b.Fatal(err)
		}
		for rel := range f.Files {
			if err := os.WriteFile(filepath.Join(ws.Dir, rel), []byte("changed\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		changes, _, err := f.FolderChanges(ws, workspace.Limits{})
		if err != nil || len(changes) != 1000 {
			b.Fatalf("%d changes, %v", len(changes), err)
		}
		target := filepath.Join(root, fmt.Sprintf("cp%d", i))
		benchFolder(b, target, 1000, 10240)

		runCp := func() {
			t0 := time.Now()
			out, err := exec.Command("cp", "-a", ws.Dir+"/.", target).CombinedOutput()
			if err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			cp += time.Since(t0)
		}
		runApply := func() {
			t0 := time.Now()
			res, err := workspace.Apply(folder, ws.Dir, f.Files, changes, workspace.ApplyOptions{})
			if err != nil || len(res.Applied) != 1000 || !res.Complete() {
				b.Fatalf("applied %d, refused %v, %v", len(res.Applied), res.Refused, err)
			}
			apply += time.Since(t0)
		}
		// Each starts with no dirty pages of the setup (or of the other)
		// to write back, and they take turns going first.
		first, second := runCp, runApply
		if i%2 == 1 {
			first, second = runApply, runCp
		}
		unix.Sync()
		first()
		unix.Sync()
		second()
		ws.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(apply.Microseconds())/1000/n, "ms-apply")
	b.ReportMetric(float64(cp.Microseconds())/1000/n, "ms-cp")
	b.ReportMetric(float64(apply)/float64(cp), "apply/cp")
}
