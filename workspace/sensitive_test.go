package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// What a program may not plant for the host, at any depth and in any case,
// and what it may write.
func TestSensitiveNames(t *testing.T) {
	never := []string{".git", ".git/config", "sub/.git/config", "sub/.git", "a/b/.git/hooks/pre-commit",
		".GIT/config", "vendor/lib/.Git", ".git./config", "sub/git~1/config"}
	refused := []string{".npmrc", "web/.npmrc", ".yarnrc", ".yarnrc.yml", ".envrc", "sub/.envrc", ".pre-commit-config.yaml",
		".vscode/tasks.json", ".vscode/settings.json", ".idea/runConfigurations/x.xml", ".idea/workspace.xml",
		".gitattributes", "lib/.gitattributes", ".gitmodules", ".env", ".env.local", "deploy/.env.production", "id_rsa",
		"keys/id_ed25519", "cert.pem", "tls/server.KEY", "credentials.json", ".ssh/authorized_keys", ".aws/credentials",
		".husky/pre-commit", ".github/workflows/ci.yml", ".venv/bin/python", "mise.toml", "rust-toolchain.toml",
		"src/sitecustomize.py", ".bashrc", ".tools.sh", ".NPMRC", ".pnpmfile.cjs", ".devcontainer/devcontainer.json"}
	allowed := []string{"report.txt", "out/plot.png", "Makefile", "package.json", ".gitignore", "sub/.gitignore",
		".editorconfig", ".env.example", "git/notes.md", "src/gitignore", "digit~1", "docs/.keep", "x.git", "legit/.gitkeep"}
	for _, p := range never {
		if why, nev := Sensitive(p); !nev || why == "" {
			t.Errorf("Sensitive(%q) = %q, %v; want never", p, why, nev)
		}
	}
	for _, p := range refused {
		if why, nev := Sensitive(p); nev || why == "" {
			t.Errorf("Sensitive(%q) = %q, %v; want refused unless named", p, why, nev)
		}
	}
	for _, p := range allowed {
		if why, nev := Sensitive(p); nev || why != "" {
			t.Errorf("Sensitive(%q) = %q, %v; want allowed", p, why, nev)
		}
	}
}

// A program plants files for the host's tools: a nested repository's
// config and hook, a submodule's .git file, an .npmrc with a script shell
// and the shell itself, secrets and an editor's task. None reaches the
// folder, whatever the change list says; nothing else of the set is
// written; --apply-sensitive lets one named file through, never .git.
func TestApplyRefusesPlantedHostFiles(t *testing.T) {
	dir := project(t)
	for rel, data := range map[string]string{"vendor/lib/.git/config": "[core]\n", "mod/.git": "gitdir: ../.git/modules/mod\n"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644)
	}
	f, ws := seeded(t, dir)
	plant := map[string]string{
		"vendor/lib/.git/config":           "[core]\n\tfsmonitor = touch /tmp/pwned\n",
		"vendor/lib/.git/hooks/pre-commit": "#!/bin/sh\ntouch /tmp/pwned\n",
		"mod/.git":                         "gitdir: ../somewhere\n",
		".npmrc":                           "script-shell=./.tools.sh\n",
		".tools.sh":                        "#!/bin/sh\ntouch /tmp/pwned\n",
		".env":                             "TOKEN=planted\n",
		"id_rsa":                           "-----BEGIN OPENSSH PRIVATE KEY-----\n",
		".envrc":                           "touch /tmp/pwned\n",
		".vscode/tasks.json":               `{"tasks": [{"runOptions": {"runOn": "folderOpen"}, "command": "touch /tmp/pwned"}]}`,
		"report.txt":                       "ok\n",
	}
	for rel, data := range plant {
		os.MkdirAll(filepath.Join(ws.Dir, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(ws.Dir, rel), []byte(data), 0o755)
	}
	changes, skipped, err := f.FolderChanges(ws, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// .git below the top is skipped like the top's: never a change.
	for _, rel := range []string{"vendor/lib/.git/config", "vendor/lib/.git/hooks/pre-commit", "mod/.git"} {
		found := false
		for _, s := range skipped {
			found = found || s.Path == rel && strings.Contains(s.Reason, ".git")
		}
		for _, c := range changes {
			if c.Path == rel {
				t.Errorf("%s is offered as a change", rel)
			}
		}
		if !found {
			t.Errorf("%s is not listed as skipped: %v", rel, skipped)
		}
	}
	// The others are changes marked with the reason, and refused.
	for _, c := range changes {
		if (c.Sensitive == "") != (c.Path == "report.txt") {
			t.Errorf("change %+v", c)
		}
	}
	before := treeOf(t, dir)
	// Forged: the list says nothing is sensitive, and holds the .git ones.
	forged := append([]Change(nil), changes...)
	for i := range forged {
		forged[i].Sensitive = ""
	}
	forged = append(forged, Change{Path: "vendor/lib/.git/config", Kind: ChangeModified, Size: 30},
		Change{Path: "mod/.git", Kind: ChangeModified, Size: 20})
	f.Files["vendor/lib/.git/config"], f.Files["mod/.git"] = FolderFile{}, FolderFile{}
	res, err := Apply(dir, ws.Dir, f.Files, forged, ApplyOptions{Sensitive: []string{"mod/.git", "vendor"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || len(res.Refused) != len(forged)-1 {
		t.Errorf("applied %v, refused %v", res.Applied, res.Refused)
	}
	if after := treeOf(t, dir); after != before {
		t.Fatalf("the folder changed:\nbefore %s\nafter %s", before, after)
	}
	// Named, .npmrc alone goes through with report.txt.
	var two []Change
	for _, c := range changes {
		if c.Path == ".npmrc" || c.Path == "report.txt" {
			two = append(two, c)
		}
	}
	res, err = Apply(dir, ws.Dir, f.Files, two, ApplyOptions{Sensitive: []string{".npmrc"}})
	if err != nil || len(res.Applied) != 2 || !res.Complete() {
		t.Fatalf("named: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".npmrc")); string(b) != plant[".npmrc"] {
		t.Errorf(".npmrc = %q", b)
	}
}

// A file of the folder with another hard link is replaced at its name
// alone: the other link keeps the old contents. A FIFO the run made is
// never a change, and one in the folder is not replaced nor blocks.
func TestApplyHardLinksAndFIFOs(t *testing.T) {
	dir := project(t)
	if err := os.Link(filepath.Join(dir, "sales.csv"), filepath.Join(dir, "sales-link.csv")); err != nil {
		t.Fatal(err)
	}
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "sales.csv"), []byte("new\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "pipe"), []byte("run's\n"), 0o644)
	syscall.Mkfifo(filepath.Join(ws.Dir, "fifo"), 0o644)
	changes, skipped, _ := f.FolderChanges(ws, Limits{})
	if len(changes) != 2 || len(skipped) != 1 || skipped[0].Path != "fifo" {
		t.Fatalf("changes %v skipped %v", changes, skipped)
	}
	// The user makes a FIFO where the run's new file goes.
	syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644)
	res, _ := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{Force: []string{"pipe"}})
	if len(res.Applied) != 0 || len(res.Refused) != 1 || res.Refused[0].Path != "pipe" {
		t.Fatalf("over a FIFO: %+v", res)
	}
	os.Remove(filepath.Join(dir, "pipe"))
	res, _ = Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if !res.Complete() || len(res.Applied) != 2 {
		t.Fatalf("apply: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sales.csv")); string(b) != "new\n" {
		t.Errorf("sales.csv = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sales-link.csv")); string(b) != "month,revenue\njan,10\n" {
		t.Errorf("the other hard link = %q, want the old contents", b)
	}
}

// An apply killed on its way leaves temporary files; the next one removes
// those of a dead process and never those of a live one.
func TestApplySweepsADeadApplysLeftovers(t *testing.T) {
	dir := project(t)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "notes/new.txt"), []byte("x\n"), 0o644)
	changes, _, _ := f.FolderChanges(ws, Limits{})
	dead := filepath.Join(dir, "notes", applyTempPrefix+"1.1.deadbeef-0123456789ab")
	live := filepath.Join(dir, "notes", applyTempPrefix+"1.1-notag")
	os.WriteFile(dead, []byte("old contents"), 0o600)
	os.WriteFile(live, []byte("?"), 0o600)
	res, _ := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if !res.Complete() {
		t.Fatalf("%+v", res)
	}
	if _, err := os.Lstat(dead); err == nil {
		t.Error("a dead apply's temporary file stayed")
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("an untagged file was removed: %v", err)
	}
}

// Changes the folder's file system has no room for are refused before
// anything is written.
func TestApplyChecksSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := filepath.Join(t.TempDir(), "small")
	os.Mkdir(dir, 0o755)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	f, ws := seeded(t, dir)
	os.WriteFile(filepath.Join(ws.Dir, "a.txt"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(ws.Dir, "big.bin"), make([]byte, 2<<20), 0o644)
	changes, _, _ := f.FolderChanges(ws, Limits{})
	res, err := Apply(dir, ws.Dir, f.Files, changes, ApplyOptions{})
	if err != nil || len(res.Applied) != 0 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, "not enough space") {
		t.Fatalf("%+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a\n" {
		t.Errorf("a.txt = %q: written although the set did not fit", b)
	}
}
