package sandboxtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// HostDir makes a host directory standing for ~/.ssh, with a file that an
// attack would overwrite, and returns it with its state (see HostState).
func HostDir(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host", ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte("ssh-ed25519 AAAA the-owner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, HostState(t, dir)
}

// HostState describes a host directory: every entry with its type, size,
// content and modification time (a file created and removed again changes
// its directory's).
func HostState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// CheckHost fails the test if dir is no longer as HostState described it.
func CheckHost(t *testing.T, dir, before string) {
	t.Helper()
	if after := HostState(t, dir); after != before {
		t.Errorf("the host directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
