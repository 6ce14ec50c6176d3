package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

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
		if got, err := ResolveWorkspace(p); !errors.Is(err, ErrSymlinkInPath) {
			t.Errorf("ResolveWorkspace(%s) = %q, %v; want a symlink error", p, got, err)
		}
	}
	got, err := ResolveWorkspace(filepath.Join(ws, "real"))
	if err != nil || got != filepath.Join(ws, "real") {
		t.Fatalf("ResolveWorkspace(real) = %q, %v", got, err)
	}
	f, err := OpenWorkspace(got)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := OpenWorkspace(filepath.Join(ws, "data")); !errors.Is(err, ErrSymlinkInPath) {
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
	if err := MarkWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, "data"), filepath.Join(ws, "sub", "data")} {
		if got, err := ResolveWorkspace(p); !errors.Is(err, ErrSymlinkInPath) {
			t.Errorf("ResolveWorkspace(%s) = %q, %v; want a symlink error", p, got, err)
		}
	}
	// Outside a workspace a root-owned link is the system's layout.
	if got, err := ResolveWorkspace(filepath.Join(base, "system")); err != nil || got != host {
		t.Errorf("ResolveWorkspace(system link) = %q, %v; want %s", got, err, host)
	}
}
