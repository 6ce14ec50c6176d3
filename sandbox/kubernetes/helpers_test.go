package kubernetes

import (
	"log/slog"
	"os"
	"testing"
)

// testLogger writes the backend's warnings to standard error (a test
// log would be written after the test ends by background deletions).
func testLogger(testing.TB) *slog.Logger {
	if os.Getenv("CODEAGENT_KUBE_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
