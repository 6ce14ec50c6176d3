package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestCells: a session's kernel cells are kept with their code, output,
// displays and figures, listed newest first by page, cut to MaxCellText,
// bounded per session, and removed with their session.
func TestCells(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	s.keepCells = 3
	a, _ := s.CreateSession(ctx, "a", "/a")
	b, _ := s.CreateSession(ctx, "b", "/b")
	start := time.UnixMilli(time.Now().UnixMilli())
	first, err := s.AddCell(ctx, Cell{SessionID: a.ID, ExecutionCount: 1, StartedAt: start, Wall: 1500 * time.Millisecond,
		Code: "print('hi')\nplt.plot([1, 2])", Stdout: "hi\n", Stderr: "warn\n", Status: "ok",
		Display: json.RawMessage(`[{"kind":"figure","data":{"text/plain":"<Figure 1>"},"file":"figure-1.png"}]`),
		Images:  []string{"figure-1.png"}})
	if err != nil || first.N != 1 {
		t.Fatalf("add: %+v, %v", first, err)
	}
	if _, err := s.AddCell(ctx, Cell{SessionID: b.ID, Code: "b's", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	got, more, err := s.Cells(ctx, a.ID, 0, 0, 10)
	if err != nil || more || len(got) != 1 {
		t.Fatalf("cells: %+v %v %v", got, more, err)
	}
	c := got[0]
	if c.Code != first.Code || c.Stdout != "hi\n" || c.Stderr != "warn\n" || c.Status != "ok" || c.ExecutionCount != 1 ||
		!c.StartedAt.Equal(start) || c.Wall != 1500*time.Millisecond || len(c.Images) != 1 || c.Images[0] != "figure-1.png" ||
		!strings.Contains(string(c.Display), `"figure-1.png"`) {
		t.Fatalf("kept: %+v", c)
	}

	// Texts are cut, at a character's boundary, with a note.
	big := strings.Repeat("é", MaxCellText) // twice the bound in bytes
	for i := 2; i <= 5; i++ {
		c := Cell{SessionID: a.ID, ExecutionCount: i, Code: "x", Status: "error", ErrorName: "ValueError"}
		if i == 5 {
			c.Stdout, c.Stderr, c.Code = big, big, big
		}
		if c, err = s.AddCell(ctx, c); err != nil || c.N != int64(i) {
			t.Fatalf("add %d: %+v %v", i, c, err)
		}
	}
	got, more, err = s.Cells(ctx, a.ID, 0, 0, 10)
	if err != nil || more || len(got) != 3 || got[0].N != 3 || got[2].N != 5 {
		t.Fatalf("bounded to 3 cells, oldest first: %+v %v %v", got, more, err)
	}
	last := got[2]
	for name, v := range map[string]string{"code": last.Code, "stdout": last.Stdout, "stderr": last.Stderr} {
		if len(v) > MaxCellText+100 || !utf8.ValidString(v) || !strings.HasSuffix(v, "\n[cut: 65536 more bytes not kept]") {
			t.Errorf("%s: %d bytes, ends %q", name, len(v), v[max(0, len(v)-60):])
		}
	}
	if got[0].ErrorName != "ValueError" || got[0].Status != "error" {
		t.Errorf("error: %+v", got[0])
	}

	// Pages: the newest limit, then older ones before the first.
	page, more, err := s.Cells(ctx, a.ID, 0, 0, 2)
	if err != nil || !more || len(page) != 2 || page[0].N != 4 || page[1].N != 5 {
		t.Fatalf("newest 2: %+v %v %v", page, more, err)
	}
	page, more, err = s.Cells(ctx, a.ID, 0, page[0].N, 2)
	if err != nil || more || len(page) != 1 || page[0].N != 3 {
		t.Fatalf("before 4: %+v %v %v", page, more, err)
	}
	page, _, err = s.Cells(ctx, a.ID, 4, 0, 10)
	if err != nil || len(page) != 1 || page[0].N != 5 {
		t.Fatalf("after 4: %+v %v", page, err)
	}

	// Another session's cells are its own; removing a session removes its.
	if got, _, _ := s.Cells(ctx, b.ID, 0, 0, 10); len(got) != 1 || got[0].Code != "b's" {
		t.Fatalf("b's cells: %+v", got)
	}
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM cells WHERE session_id = ?`, a.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d cells survived their session (%v)", n, err)
	}
	if err := s.RemoveSession(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM cells`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d cells survived RemoveSession (%v)", n, err)
	}
}
