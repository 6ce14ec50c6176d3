package main

import (
	"strings"
	"testing"
)

// TestServeApprovalAndReviewFlags: --approval-timeout is bounded and a
// reviewer endpoint that cannot be used is a usage error.
func TestServeApprovalAndReviewFlags(t *testing.T) {
	code, _, stderr := runCLI(t, "", "serve", "--approval-timeout", "0")
	if code != exitUsage || !strings.Contains(stderr, "for flag -approval-timeout:") {
		t.Errorf("--approval-timeout 0: exit %d, %q", code, stderr)
	}
	data := t.TempDir()
	code, _, stderr = runCLI(t, "", "serve", "--data-dir", data, "--addr", "127.0.0.1:0", "--review-provider", "nope")
	if code != exitUsage || !strings.Contains(stderr, "review model") {
		t.Errorf("--review-provider nope: exit %d, %q", code, stderr)
	}
}
