package docker

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenUnixInLongDirectory: the helper's socket is made in a
// directory whose path is longer than a socket address may be.
func TestListenUnixInLongDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ul, err := listenUnixIn(dir, gatewaySocket)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	fi, err := os.Stat(filepath.Join(dir, gatewaySocket))
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("no socket in %s: %v %v", dir, fi, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), gatewaySocket))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
