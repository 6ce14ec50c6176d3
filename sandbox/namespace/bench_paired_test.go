//go:build linux && (amd64 || arm64)

package namespace

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkPairedServe runs one warm iteration (bare, then sandboxed) per
// line read from stdin and prints "PAIRED <bare µs> <sandbox µs>", so that
// scripts/bench-paired.py can alternate two builds (say, two commits of
// this package) iteration by iteration: machine noise then hits both
// alike, and the difference of their sandbox times is paired. Without
// CODEAGENT_BENCH_PAIRED it is skipped. Copy this file into the other
// checkout to compare with one that lacks it.
func BenchmarkPairedServe(b *testing.B) {
	if os.Getenv("CODEAGENT_BENCH_PAIRED") == "" {
		b.Skip("driven by scripts/bench-paired.py")
	}
	sb, err := New(Config{Warm: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	ws := b.TempDir()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		sb.quiesce()
		t0 := time.Now()
		runBare(b)
		t1 := time.Now()
		runSandboxed(b, sb, ws)
		fmt.Printf("PAIRED %d %d\n", t1.Sub(t0).Microseconds(), time.Since(t1).Microseconds())
	}
}
