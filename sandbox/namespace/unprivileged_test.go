//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// asUserEnv marks the run of this test binary as an ordinary user.
const asUserEnv = "CODEAGENT_TEST_AS_USER"

// asUserRunEnv, when set, is the -test.run pattern of that run.
const asUserRunEnv = "CODEAGENT_TEST_AS_USER_RUN"

// unprivilegedUID is the user the suite runs as for the second time: nobody.
const unprivilegedUID = 65534

// TestConformanceUnprivileged runs the conformance suite again as an
// ordinary user when the tests run as root, so that both ways codeagent
// is used are attacked: as root (programs run as codeagent's own host uid)
// and as a user (programs run as that user; no cgroups to delegate on a
// v1 host, so rlimits are the fallback).
func TestConformanceUnprivileged(t *testing.T) {
	if os.Getenv(asUserEnv) != "" || os.Geteuid() != 0 {
		t.Skip("not root: TestConformance already runs as an ordinary user")
	}
	if testing.Short() {
		t.Skip("short mode")
	}
	dir, err := os.MkdirTemp("", "codeagent-asuser-") // t.TempDir's parent is closed to others
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "namespace.test")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, unprivilegedUID, unprivilegedUID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// CODEAGENT_TEST_AS_USER_RUN narrows the suite, e.g. to
	// '^TestConformance$/Warm./Security/DiskLimit' to measure the reactive
	// disk limit.
	run := "^TestConformance$"
	if r := os.Getenv(asUserRunEnv); r != "" {
		run = r
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run", run, "-test.count=1", "-test.v")
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, asUserEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivilegedUID, Gid: unprivilegedUID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite as uid %d failed: %v\n%s", unprivilegedUID, err, out)
	}
	t.Logf("as uid %d:\n%s", unprivilegedUID, out)
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
