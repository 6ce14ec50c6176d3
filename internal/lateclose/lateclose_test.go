package lateclose

import (
	"io"
	"os"
	"testing"
	"time"
)

// eof reports whether reading r ends (its last writer closed) within d.
func eof(t *testing.T, r *os.File, d time.Duration) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, w
}

func TestCloseWithoutKeepClosesAtOnce(t *testing.T) {
	r, w := pipe(t)
	Close(w)
	if !eof(t, r, 5*time.Second) {
		t.Fatal("Close did not close the descriptor")
	}
	r2, w2 := pipe(t)
	CloseLater(w2)
	if !eof(t, r2, 5*time.Second) {
		t.Fatal("CloseLater did not close the descriptor")
	}
}

// A kept descriptor stays open until the last HandOff, and then closes
// for good: the child that inherited it has exited.
func TestKeptUntilHandOff(t *testing.T) {
	Keep()
	Keep()
	r, w := pipe(t)
	Close(w)
	r2, w2 := pipe(t)
	CloseLater(w2)
	HandOff() // one Keep is left
	if eof(t, r, 200*time.Millisecond) {
		t.Fatal("a kept descriptor was closed before the last HandOff")
	}
	HandOff()
	if !eof(t, r, 10*time.Second) || !eof(t, r2, 10*time.Second) {
		t.Fatal("the kept descriptors were never closed after HandOff")
	}
	// Keeping is over: Close closes at once again.
	r3, w3 := pipe(t)
	Close(w3)
	if !eof(t, r3, 5*time.Second) {
		t.Fatal("Close kept a descriptor after the last HandOff")
	}
}

// Without a helper program HandOff closes the descriptors itself.
func TestHandOffWithoutHelper(t *testing.T) {
	old := helpers
	helpers = []string{"/nonexistent/true"}
	defer func() { helpers = old }()
	Keep()
	r, w := pipe(t)
	Close(w)
	HandOff()
	if !eof(t, r, 5*time.Second) {
		t.Fatal("HandOff without a helper left the descriptor open")
	}
}
