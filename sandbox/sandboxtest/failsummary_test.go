package sandboxtest

import (
	"strings"
	"testing"
)

func TestFailureSummary(t *testing.T) {
	out := `=== RUN   TestConformance
=== RUN   TestConformance/Warm0
=== RUN   TestConformance/Warm0/Benign
    benign.go:10: ran fine
=== RUN   TestConformance/Warm0/Security/DiskLimit
    security_disk.go:42: wrote 2 GiB past the limit
=== RUN   TestConformance/Warm0/Security/HostUID
    security_escapes.go:394: inside 1000
--- FAIL: TestConformance (3.00s)
    --- FAIL: TestConformance/Warm0 (3.00s)
        --- PASS: TestConformance/Warm0/Benign (1.00s)
        --- FAIL: TestConformance/Warm0/Security/DiskLimit (1.00s)
        --- PASS: TestConformance/Warm0/Security/HostUID (1.00s)
FAIL
`
	got := FailureSummary(out)
	if !strings.Contains(got, "--- FAIL: TestConformance/Warm0/Security/DiskLimit\n    security_disk.go:42: wrote 2 GiB past the limit") {
		t.Errorf("summary lacks the failing test's log:\n%s", got)
	}
	if strings.Contains(got, "ran fine") || strings.Contains(got, "inside 1000") {
		t.Errorf("summary carries passing tests' logs:\n%s", got)
	}
	if FailureSummary(strings.ReplaceAll(out, "FAIL", "PASS")) != "" {
		t.Error("a passing run has a failure summary")
	}
}
