package safety

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func readBenchFile() ([]byte, error) { return os.ReadFile("testdata/bench/analysis.py") }

// BenchmarkCheck200 checks a realistic 210-line data-analysis file with a
// reused Checker (its parser is pooled).
func BenchmarkCheck200(b *testing.B) {
	src, err := readBenchFile()
	if err != nil {
		b.Fatal(err)
	}
	c := newTestChecker(b)
	ctx := context.Background()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Check(ctx, Python, src)
		if err != nil || !r.Safe() {
			b.Fatalf("err=%v findings=%v", err, r.Findings)
		}
	}
}

// BenchmarkCheckSize sweeps the input size to show linear scaling: ns/line
// should stay flat.
func BenchmarkCheckSize(b *testing.B) {
	src, err := readBenchFile()
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Count(src, []byte("\n"))
	c := newTestChecker(b)
	ctx := context.Background()
	for _, n := range []int{1000, 10000, 100000} {
		var buf bytes.Buffer
		for buf.Len() == 0 || bytes.Count(buf.Bytes(), []byte("\n")) < n {
			buf.Write(src)
		}
		code := buf.Bytes()
		total := (n + lines - 1) / lines * lines
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(code)))
			for b.Loop() {
				if _, err := c.Check(ctx, Python, code); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/line")
		})
	}
}

func BenchmarkCheckJavaScript(b *testing.B) {
	code := bytes.Repeat([]byte("const fs = require('fs');\nconst d = JSON.parse(fs.readFileSync('in.json', 'utf8'));\nconsole.log(d.items.map(x => x * 2).join(','));\n"), 60)
	c := newTestChecker(b)
	for b.Loop() {
		if _, err := c.Check(context.Background(), JavaScript, code); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckBash(b *testing.B) {
	code := bytes.Repeat([]byte("for f in *.csv; do\n  wc -l \"$f\" >> lines.txt\ndone\ncat lines.txt | sort > sorted.txt\n"), 50)
	c := newTestChecker(b)
	for b.Loop() {
		if _, err := c.Check(context.Background(), Bash, code); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHumanEval checks each of the 164 HumanEval prompts with its
// canonical solution (what an attempt checks) and reports the median over
// programs of each one's median check time, and the time of all 164.
func BenchmarkHumanEval(b *testing.B) {
	progs := humanEvalPrograms(b)
	c := newTestChecker(b)
	ctx := context.Background()
	codes := make([][]byte, len(progs))
	for i, p := range progs {
		codes[i] = []byte(p)
	}
	times := make([][]time.Duration, len(codes))
	var total time.Duration
	for b.Loop() {
		for i, code := range codes {
			t0 := time.Now()
			if _, err := c.Check(ctx, Python, code); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			times[i] = append(times[i], d)
			total += d
		}
	}
	var med []time.Duration
	for _, t := range times {
		med = append(med, median(t))
	}
	b.ReportMetric(float64(median(med))/float64(time.Microsecond), "µs/check-median")
	b.ReportMetric(float64(total)/float64(b.N)/float64(time.Microsecond), "µs/164-checks")
}
