package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestExecKeepsAProjectsOwners: a new user's `codeagent exec --workdir .`
// in a git repository of theirs (as root here, the project another user's)
// changes what the program changed and nothing else: every owner and mode
// stays, the workspace directory's too, new files are the project owner's,
// and git, run as that owner, still works and shows the program's changes.
func TestExecKeepsAProjectsOwners(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := os.Geteuid() == 0
	forBackends(t, func(t *testing.T, backend string) {
		base, err := os.MkdirTemp("", "codeagent-owners-") // searchable by the owner, unlike t.TempDir's parent
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		proj := filepath.Join(base, "proj")
		for rel, data := range map[string]string{"main.py": "print(1)\n", "data/in.csv": "a\n1\n", ".ssh/config": "Host x\n"} {
			p := filepath.Join(proj, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Join(proj, ".ssh"), 0o700); err != nil {
			t.Fatal(err)
		}
		const owner = 1500
		if root {
			_ = filepath.Walk(proj, func(p string, _ os.FileInfo, err error) error {
				if err == nil {
					err = os.Lchown(p, owner, owner)
				}
				return err
			})
		}
		git := func(args ...string) string {
			t.Helper()
			cmd := exec.Command("git", args...)
			cmd.Dir = proj
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
				"GIT_AUTHOR_NAME=o", "GIT_AUTHOR_EMAIL=o@x.test", "GIT_COMMITTER_NAME=o", "GIT_COMMITTER_EMAIL=o@x.test"}
			if root {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: owner, Gid: owner}}
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		git("init", "-q")
		git("add", "main.py", "data/in.csv")
		git("commit", "-q", "-m", "first")
		type meta struct {
			uid, gid uint32
			mode     uint32
		}
		snap := func() map[string]meta {
			m := map[string]meta{}
			_ = filepath.Walk(proj, func(p string, fi os.FileInfo, err error) error {
				if err == nil {
					st := fi.Sys().(*syscall.Stat_t)
					rel, _ := filepath.Rel(proj, p)
					m[rel] = meta{st.Uid, st.Gid, st.Mode}
				}
				return err
			})
			return m
		}
		before := snap()
		prog := writeProgram(t, "edit.py", `import os
open("main.py", "a").write("print(2)\n")
open("out.txt", "w").write("result\n")
os.chmod(".", 0o777)
os.chmod("data", 0o777)
print("edited")
`)
		code, stdout, stderr := runBinary(t, proj, nil, "exec", "--backend", backend, "--workdir", ".", prog)
		if code != 0 || !strings.Contains(stdout, "edited") {
			t.Fatalf("exec: exit %d\n%s%s", code, stdout, stderr)
		}
		after := snap()
		for rel, was := range before {
			if strings.HasPrefix(rel, ".git") && rel != ".git" {
				continue // git's own files may change as git runs
			}
			if got := after[rel]; got != was {
				t.Errorf("%s: %+v, was %+v", rel, got, was)
			}
		}
		if got, wantUID := after["out.txt"], before["."].uid; got.uid != wantUID || got.mode&0o022 != 0 {
			t.Errorf("out.txt: %+v, want the project owner's (%d), not writable by others", got, wantUID)
		}
		if status := git("status", "--porcelain"); status != " M main.py\n?? .ssh/\n?? out.txt\n" {
			t.Errorf("git status --porcelain as the project's owner:\n%s", status)
		}
	})
}
