package osthread

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// onMain counts the calls of fn, made from the main goroutine in TestMain,
// that ran on the main thread. Called from a goroutine on the main thread
// that then blocks, a new goroutine usually runs next on that same
// thread: the case Run must avoid.
var onMain, calls, goOnMain, goCalls int

func TestMain(m *testing.M) {
	for range 20 {
		if unix.Gettid() != os.Getpid() {
			continue // the main goroutine moved to another thread
		}
		calls++
		_ = Run(func() error {
			if unix.Gettid() == os.Getpid() {
				onMain++
			}
			return nil
		})
		if unix.Gettid() == os.Getpid() {
			goCalls++
			main := make(chan bool)
			Go(func() { main <- unix.Gettid() == os.Getpid() })
			if <-main {
				goOnMain++
			}
		}
	}
	os.Exit(m.Run())
}

func TestNeverMainThread(t *testing.T) {
	if calls == 0 {
		t.Skip("the main goroutine never ran on the main thread")
	}
	if onMain > 0 {
		t.Fatalf("%d of %d calls ran on the main thread", onMain, calls)
	}
	// And the main thread is still usable: this test passing at all
	// (run from the main goroutine's thread pool) shows it was not parked.
}

func TestError(t *testing.T) {
	want := os.ErrInvalid
	if err := Run(func() error { return want }); err != want {
		t.Fatalf("Run returned %v, want %v", err, want)
	}
}

func TestGoNeverMainThread(t *testing.T) {
	if goCalls == 0 {
		t.Skip("the main goroutine never ran on the main thread")
	}
	if goOnMain > 0 {
		t.Fatalf("%d of %d calls of Go ran on the main thread", goOnMain, goCalls)
	}
}
