//go:build linux && (amd64 || arm64)

package namespace

import (
	"os"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox/sandboxtest"
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
	// CODEAGENT_TEST_AS_USER_RUN narrows the suite, e.g. to
	// '^TestConformance$/Warm./Security/DiskLimit' to measure the reactive
	// disk limit.
	run := "^TestConformance$"
	if r := os.Getenv(asUserRunEnv); r != "" {
		run = r
	}
	out, err := sandboxtest.AsUser(t, unprivilegedUID, unprivilegedUID, run, 10*time.Minute, asUserEnv+"=1")
	if err != nil {
		t.Fatalf("the suite as uid %d failed: %v\n%s\nthe whole output:\n%s", unprivilegedUID, err, sandboxtest.FailureSummary(out), out)
	}
	t.Logf("as uid %d:\n%s", unprivilegedUID, out)
}
