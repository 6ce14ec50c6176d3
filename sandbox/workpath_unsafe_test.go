package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wantUnsafe checks that err refuses dir as a workspace, recognisably and
// with a message that names it and says what to do.
func wantUnsafe(t *testing.T, what, dir string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: %s accepted as a workspace", what, dir)
	case !errors.Is(err, ErrUnsafeWorkspace) || !errors.Is(err, ErrInvalidSpec):
		t.Errorf("%s: %v; want ErrUnsafeWorkspace (and ErrInvalidSpec)", what, err)
	case !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "give a"):
		t.Errorf("%s: %q does not name %s and say what to give instead", what, err, dir)
	}
}

func TestCheckWorkspaceDirRefusesSystemDirectories(t *testing.T) {
	for _, d := range append(append([]string{"/"}, systemTrees...), systemParents...) {
		wantUnsafe(t, "CheckWorkspaceDir", d, CheckWorkspaceDir(d))
	}
	// Below a system tree, and unclean forms of the same directories.
	for _, d := range []string{"/etc/ssl", "/usr/lib/python3", "/proc/self", "/sys/fs/cgroup", "/dev/shm",
		"/boot/grub", "/run/codeagent/uids", "/var/tmp/codeagent/upper"} {
		wantUnsafe(t, "CheckWorkspaceDir", d, CheckWorkspaceDir(d))
	}
	for given, dir := range map[string]string{"/etc/": "/etc", "//etc": "/etc", "/tmp/../etc": "/etc", "/home/": "/home"} {
		wantUnsafe(t, "CheckWorkspaceDir("+given+")", dir, CheckWorkspaceDir(given))
	}
	// A project directory below the directories that hold others is fine.
	for _, d := range []string{"/tmp/project", "/var/tmp/project", "/var/lib/codeagent", "/srv/project",
		"/opt/project", "/mnt/data/project", "/root/project", "/run/user-project", "/etcetera", "/usrlocal"} {
		if err := CheckWorkspaceDir(d); err != nil {
			t.Errorf("CheckWorkspaceDir(%s) = %v; want nil", d, err)
		}
	}
}

func TestCheckWorkspaceDirRefusesHomeDirectories(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, other := filepath.Join(base, "home", "me"), filepath.Join(base, "home", "alice")
	for _, d := range []string{home, other, filepath.Join(home, "project")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The caller's own home ($HOME), reached directly or through a link.
	t.Setenv("HOME", home)
	wantUnsafe(t, "$HOME", home, CheckWorkspaceDir(home))
	if err := os.Symlink(home, filepath.Join(base, "me")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(base, "me"))
	wantUnsafe(t, "$HOME through a link", home, CheckWorkspaceDir(home))
	t.Setenv("HOME", home)
	// Another account's home: `sudo codeagent exec --workdir .` in it.
	passwd := filepath.Join(base, "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:"+other+"/:/bin/bash\nbroken line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := passwdFile
	passwdFile = passwd
	t.Cleanup(func() { passwdFile = old })
	err = CheckWorkspaceDir(other)
	wantUnsafe(t, "another account's home", other, err)
	if err != nil && !strings.Contains(err.Error(), "alice") {
		t.Errorf("the refusal does not say whose home %s is: %v", other, err)
	}
	// Below a home is where projects live.
	for _, d := range []string{filepath.Join(home, "project"), filepath.Join(other, "project"), filepath.Join(base, "home")} {
		if err := CheckWorkspaceDir(d); err != nil {
			t.Errorf("CheckWorkspaceDir(%s) = %v; want nil", d, err)
		}
	}
	if got, err := ResolveDir(filepath.Join(home, "project")); err != nil || got != filepath.Join(home, "project") || CheckWorkspaceDir(got) != nil {
		t.Errorf("ResolveDir(a project below the home) = %q, %v; CheckWorkspaceDir: %v", got, err, CheckWorkspaceDir(got))
	}
}

// TestCheckWorkspaceDirRefusesTheSystemsHomes checks the accounts of the
// real /etc/passwd: none of their homes is a workspace.
func TestCheckWorkspaceDirRefusesTheSystemsHomes(t *testing.T) {
	homes, err := readPasswdHomes(passwdFile)
	if err != nil || len(homes) == 0 {
		t.Skipf("no accounts in %s: %v", passwdFile, err)
	}
	for _, h := range homes {
		wantUnsafe(t, "home of "+h.user, h.dir, CheckWorkspaceDir(h.dir))
	}
}
