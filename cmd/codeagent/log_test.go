package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/store"
)

// TestLogSelects: `log --run ID` (or the start of it the RUN column
// shows), `--since` (an RFC 3339 time or how long ago) and `--tail N`
// select records, together and with --session, oldest first (log printed
// every record, with no way to narrow them but --session); a run or a
// time it cannot read is a usage error.
func TestLogSelects(t *testing.T) {
	data := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(data, "codeagent.db"))
	if err != nil {
		t.Fatal(err)
	}
	runA, runB := "aaaaaaaa0123456789abcdef", "bbbbbbbb0123456789abcdef"
	for i := 1; i <= 3; i++ {
		if _, err := st.AuditRun(ctx, "sales", runA, int64(i), "step", map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond) // the log keeps milliseconds
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	for i := 1; i <= 4; i++ {
		if _, err := st.AuditRun(ctx, "", runB, int64(i), "step", map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	seqs := func(args ...string) []int64 {
		t.Helper()
		code, out, errOut := runCLI(t, "", append([]string{"log", "--data-dir", data, "--json"}, args...)...)
		var recs []store.Record
		if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil {
			t.Fatalf("log %v: exit %d, %v, %s", args, code, err, errOut)
		}
		var got []int64
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		return got
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "[1 2 3 4 5 6 7]"},
		{[]string{"--run", runB}, "[4 5 6 7]"},
		{[]string{"--run", runA[:8]}, "[1 2 3]"},
		{[]string{"--since", cut.Format(time.RFC3339Nano)}, "[4 5 6 7]"},
		{[]string{"--since", "1h"}, "[1 2 3 4 5 6 7]"},
		{[]string{"--since", "2d"}, "[1 2 3 4 5 6 7]"},
		{[]string{"--tail", "2"}, "[6 7]"},
		{[]string{"--run", runA[:8], "--tail", "1"}, "[3]"},
		{[]string{"--session", "sales", "--since", cut.Format(time.RFC3339Nano)}, "[]"},
		{[]string{"--session", "sales", "--tail", "2"}, "[2 3]"},
	} {
		if got := fmt.Sprint(seqs(c.args...)); got != c.want {
			t.Errorf("log %v: records %v, want %s", c.args, got, c.want)
		}
	}
	code, out, _ := runCLI(t, "", "log", "--data-dir", data, "--tail", "1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "7 ") || !strings.Contains(lines[1], "bbbbbbbb") {
		t.Errorf("log --tail 1: exit %d:\n%s", code, out)
	}
	for _, args := range [][]string{{"--run", "cccccccc"}, {"--since", "yesterday"}, {"--tail", "-1"}} {
		if code, _, errOut := runCLI(t, "", append([]string{"log", "--data-dir", data}, args...)...); code != exitUsage {
			t.Errorf("log %v: exit %d, want 2: %s", args, code, errOut)
		}
	}
}

// TestLogSinceAgo: --since 90m and 1.5d mean that long before now.
func TestLogSinceAgo(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var got time.Time
	f := sinceFlag{t: &got, now: func() time.Time { return now }}
	for in, want := range map[string]time.Time{
		"90m":                  now.Add(-90 * time.Minute),
		"1.5d":                 now.Add(-36 * time.Hour),
		"2026-04-30T08:00:00Z": time.Date(2026, 4, 30, 8, 0, 0, 0, time.UTC),
	} {
		if err := f.Set(in); err != nil || !got.Equal(want) {
			t.Errorf("--since %s: %v, %v; want %v", in, got, err, want)
		}
	}
}
