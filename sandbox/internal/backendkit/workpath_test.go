package backendkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// wantUnsafe checks that err refuses dir as a workspace, recognisably and
// with a message that names it and says what to do.
func wantUnsafe(t *testing.T, what, dir string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: %s accepted as a workspace", what, dir)
	case !errors.Is(err, sandbox.ErrUnsafeWorkspace) || !errors.Is(err, sandbox.ErrInvalidSpec):
		t.Errorf("%s: %v; want ErrUnsafeWorkspace (and ErrInvalidSpec)", what, err)
	case !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "give a"):
		t.Errorf("%s: %q does not name %s and say what to give instead", what, err, dir)
	}
}

func TestResolveWorkspaceRefusesPlantedLinks(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(base, "host")
	ws := filepath.Join(base, "ws")
	for _, d := range []string{host, ws, filepath.Join(ws, "real")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// What a program leaves behind: links to a host directory, at the end
	// of a path and in its middle.
	if err := os.Symlink(host, filepath.Join(ws, "data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(ws, "root")); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		// codeagent never runs programs as root: their links belong to
		// another uid.
		for _, l := range []string{"data", "root"} {
			if err := os.Lchown(filepath.Join(ws, l), DefaultHostUID, DefaultHostUID); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []string{filepath.Join(ws, "data"), filepath.Join(ws, "root", "etc"), filepath.Join(ws, "data") + "/sub/.."} {
		if got, err := ResolveWorkspace(p); !errors.Is(err, sandbox.ErrSymlinkInPath) {
			t.Errorf("ResolveWorkspace(%s) = %q, %v; want a symlink error", p, got, err)
		}
	}
	got, err := ResolveWorkspace(filepath.Join(ws, "real"))
	if err != nil || got != filepath.Join(ws, "real") {
		t.Fatalf("ResolveWorkspace(real) = %q, %v", got, err)
	}
	f, err := sandbox.OpenWorkspace(got)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := sandbox.OpenWorkspace(filepath.Join(ws, "data")); !errors.Is(err, sandbox.ErrSymlinkInPath) {
		t.Fatalf("OpenWorkspace through a link: %v", err)
	}
	if _, err := ResolveWorkspace(filepath.Join(ws, "missing")); err == nil {
		t.Fatal("a missing workspace resolved")
	}
}

func TestResolveWorkspaceRefusesRootLinksInsideWorkspaces(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("marks are for a root codeagent, whose programs can make root-owned links")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host, ws := filepath.Join(base, "host"), filepath.Join(base, "ws")
	for _, d := range []string{host, ws, filepath.Join(ws, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Root-owned links, as a program of a root codeagent leaves them.
	for _, l := range []string{filepath.Join(ws, "data"), filepath.Join(ws, "sub", "data"), filepath.Join(base, "system")} {
		if err := os.Symlink(host, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := sandbox.MarkWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, "data"), filepath.Join(ws, "sub", "data")} {
		if got, err := ResolveWorkspace(p); !errors.Is(err, sandbox.ErrSymlinkInPath) {
			t.Errorf("ResolveWorkspace(%s) = %q, %v; want a symlink error", p, got, err)
		}
	}
	// Outside a workspace a root-owned link is the system's layout.
	if got, err := ResolveWorkspace(filepath.Join(base, "system")); err != nil || got != host {
		t.Errorf("ResolveWorkspace(system link) = %q, %v; want %s", got, err, host)
	}
}

func TestResolveWorkspaceRefusesSystemDirectoriesHoweverNamed(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	up := strings.Repeat("../", strings.Count(base, "/")+2) // more than enough: /.. is /
	for given, dir := range map[string]string{
		up + "etc":            "/etc",
		up + "etc/":           "/etc",
		up + "usr/lib/../bin": "/usr/bin",
		up:                    "/",
		"/etc/":               "/etc",
		"/tmp/../etc":         "/etc",
	} {
		got, err := ResolveWorkspace(given)
		wantUnsafe(t, "ResolveWorkspace("+given+")", dir, err)
		if got != "" {
			t.Errorf("ResolveWorkspace(%s) returned %q with its error", given, got)
		}
	}
	// sandbox.ResolveDir, for directories that are no workspace (a data
	// directory, $TMPDIR, the parents of one to create), still resolves them.
	if got, err := sandbox.ResolveDir(up + "tmp"); err != nil || got != "/tmp" {
		t.Errorf("ResolveDir(/tmp) = %q, %v", got, err)
	}
	if os.Getuid() == 0 {
		// A root-owned link outside any workspace is followed as the
		// system's layout, and what it leads to is still refused.
		if err := os.Symlink("/etc", filepath.Join(base, "config")); err != nil {
			t.Fatal(err)
		}
		_, err := ResolveWorkspace("config")
		wantUnsafe(t, "ResolveWorkspace(root's link to /etc)", "/etc", err)
		_, err = ResolveWorkspace(filepath.Join(base, "config", "ssl"))
		wantUnsafe(t, "ResolveWorkspace(root's link to /etc, then ssl)", "/etc/ssl", err)
	}
	// A temporary directory, as tests and temporary workspaces use, is fine.
	if got, err := ResolveWorkspace("."); err != nil || got != base {
		t.Errorf("ResolveWorkspace(temporary directory) = %q, %v", got, err)
	}
}
