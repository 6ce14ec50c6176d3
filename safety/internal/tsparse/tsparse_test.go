package tsparse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	python "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

func newPy(t testing.TB) *Parser {
	p, err := NewParser(NewLanguage(python.Language()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestParseTree(t *testing.T) {
	p := newPy(t)
	src := []byte("import os\nx = f(1, 'a')\n")
	nodes, err := p.Parse(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) == 0 || nodes[0].Parent != -1 || nodes[0].End != uint32(len(src)) {
		t.Fatalf("bad root: %+v", nodes[:1])
	}
	// Every child link must point back to its parent, in order.
	for i, n := range nodes {
		prev := uint32(0)
		for c := n.FirstChild; c >= 0; c = nodes[c].NextSibling {
			if nodes[c].Parent != int32(i) {
				t.Fatalf("node %d: child %d has parent %d", i, c, nodes[c].Parent)
			}
			if nodes[c].Start < prev {
				t.Fatalf("children out of order")
			}
			prev = nodes[c].Start
		}
	}
	lang := p.lang
	var kinds []string
	for _, n := range nodes {
		if n.Flags&Named != 0 {
			k, _ := lang.KindName(n.Kind)
			kinds = append(kinds, k)
		}
	}
	want := "module import_statement dotted_name identifier expression_statement assignment identifier call identifier argument_list integer string string_start string_content string_end"
	if got := join(kinds); got != want {
		t.Fatalf("kinds:\n got %s\nwant %s", got, want)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestParseCanceled(t *testing.T) {
	p := newPy(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Parse(ctx, []byte("x = 1\n"), nil); err == nil {
		t.Fatal("want error for a canceled context")
	}
	// The parser stays usable afterwards.
	if _, err := p.Parse(context.Background(), []byte("x = 1\n"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseEmpty(t *testing.T) {
	p := newPy(t)
	nodes, err := p.Parse(context.Background(), nil, nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes=%v err=%v", nodes, err)
	}
}

func BenchmarkParse200(b *testing.B) {
	src, err := os.ReadFile("../../testdata/bench/analysis.py")
	if err != nil {
		b.Fatal(err)
	}
	p := newPy(b)
	var buf []Node
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		buf, err = p.Parse(context.Background(), src, buf)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "nodes")
}

// TestCancelAfterParseThenClose is a regression test: the cancel callback
// used to be able to write the C flag after Parse returned and the parser
// was closed, corrupting the C heap.
func TestCancelAfterParseThenClose(t *testing.T) {
	lang := NewLanguage(python.Language())
	for i := 0; i < 2000; i++ {
		p, err := NewParser(lang)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := p.Parse(ctx, []byte("x = 1\n"), nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		p.Close()
	}
}

// TestParseBudget: a parse over its time budget returns ErrTooComplex, and
// the parser stays usable.
func TestParseBudget(t *testing.T) {
	p := newPy(t)
	p.Budget = func(int) time.Duration { return time.Nanosecond }
	src := []byte(strings.Repeat("x = f(1, 'a')\n", 2000))
	if _, err := p.Parse(context.Background(), src, nil); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("err = %v, want ErrTooComplex", err)
	}
	p.Budget = nil
	if _, err := p.Parse(context.Background(), src, nil); err != nil {
		t.Fatal(err)
	}
}

// TestParseKeep: the tree ParseKeep returns can be freed on another
// goroutine while the parser parses again.
func TestParseKeep(t *testing.T) {
	p := newPy(t)
	src := []byte(strings.Repeat("x = f(1, 'a')\n", 200))
	var buf []Node
	for i := 0; i < 50; i++ {
		nodes, tr, err := p.ParseKeep(context.Background(), src, buf)
		if err != nil {
			t.Fatal(err)
		}
		buf = nodes
		done := make(chan struct{})
		go func() { tr.Free(); close(done) }()
		if _, err := p.Parse(context.Background(), src, nil); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	Tree{}.Free()
}

// TestCancelAtEveryPointThenParse stops parses of a program at each of the
// last progress callbacks (tree-sitter balances the finished tree last)
// and at points spread over the rest, then parses again with the same
// parser. A parse stopped while tree-sitter balances used to leave the
// parser in a state ts_parser_reset does not clear, and the next parse
// aborted the process (ts_parser_parse: Assertion
// 'self->finished_tree.ptr' failed).
func TestCancelAtEveryPointThenParse(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 64<<10; i++ {
		fmt.Fprintf(&b, "def f%d(a, b):\n    x = [a * %d for a in range(b)]\n    return {'k': x, 'n': len(x)}\n\n", i, i)
	}
	src := []byte(b.String())
	p := newPy(t)
	if _, err := p.Parse(context.Background(), src, nil); err != nil {
		t.Fatal(err)
	}
	total := p.callbacks()
	stops := map[int64]bool{}
	for k := total; k > 0 && k > total-64; k-- {
		stops[k] = true
	}
	for k := int64(1); k < total; k += max(1, total/64) {
		stops[k] = true
	}
	for k := range stops {
		p.stopAt(k)
		_, err := p.Parse(context.Background(), src, nil)
		p.stopAt(0)
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("stopped at callback %d of %d: %v", k, total, err)
		}
		if _, err := p.Parse(context.Background(), []byte("x = 1\n"), nil); err != nil {
			t.Fatalf("stopped at callback %d of %d: the parser is unusable afterwards: %v", k, total, err)
		}
	}
}

// A parse over its memory budget stops there, while tree-sitter builds the
// tree, and the parser stays usable; within budget the peak is counted.
func TestMemoryBudgetStopsTheParse(t *testing.T) {
	p := newPy(t)
	dense := []byte("x = " + strings.Repeat("1+", 1<<20) + "1\n") // 2 MiB, some 3 million nodes
	const budget = 8 << 20
	p.MemBudget = func(int) int64 { return budget }
	began := time.Now()
	if _, err := p.Parse(context.Background(), dense, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	// Stopped at the first progress callback past the budget: a few
	// hundred parse operations' allocations later.
	if peak := p.MemPeak(); peak < budget || peak > budget+(1<<20) {
		t.Errorf("peak %d bytes, budget %d", peak, budget)
	}
	t.Logf("stopped after %v at %d bytes", time.Since(began), p.MemPeak())
	p.MemBudget = nil
	nodes, err := p.Parse(context.Background(), []byte("x = 1\n"), nil)
	if err != nil || len(nodes) == 0 || p.MemPeak() <= 0 || p.MemPeak() > 1<<20 {
		t.Fatalf("after: %d nodes, err %v, peak %d", len(nodes), err, p.MemPeak())
	}
	// The flattened nodes count too: a budget the tree fits in but not
	// with its nodes.
	small := []byte(strings.Repeat("x = 1\n", 400))
	nodes, err = p.Parse(context.Background(), small, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree := p.MemPeak()
	limit := tree + int64(len(nodes))*28/2
	p.MemBudget = func(int) int64 { return limit }
	if _, err := p.Parse(context.Background(), small, nil); !errors.Is(err, ErrTooLarge) || p.MemPeak() > limit {
		t.Errorf("tree plus nodes over budget: err = %v (peak %d, without a budget %d)", err, p.MemPeak(), tree)
	}
}
