package ratelimit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

func touch(ws, name string) sandbox.Spec {
	return sandbox.Spec{Command: []string{"bash", "-c", "touch " + name}, Workspace: ws}
}

// TestLimit runs real sandboxes through the limiter: a burst is admitted,
// the next execution waits when the wait fits the deadline and is refused,
// without running, when it does not.
func TestLimit(t *testing.T) {
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := New(sb, 120) // a burst of 120, then one every 500 ms
	defer l.Close()
	ws := t.TempDir()
	ctx := context.Background()
	for range 120 { // spend the burst without running 120 programs
		if r, _ := l.bucket.Take(ctx, 0); !r.OK {
			t.Fatal("the burst was refused")
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = l.Run(short, touch(ws, "refused"))
	var le *LimitError
	if !errors.As(err, &le) || le.PerMinute != 120 || le.Wait <= 0 {
		t.Fatalf("over the limit with a short deadline: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "refused")); err == nil {
		t.Fatal("a refused execution ran")
	}
	long, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	res, err := l.Run(long, touch(ws, "waited"))
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("over the limit with time to wait: %v %v", err, res.Status)
	}
	if _, err := os.Stat(filepath.Join(ws, "waited")); err != nil {
		t.Fatal("the execution that waited did not run")
	}
}

func TestDefault(t *testing.T) {
	l := New(nil, 0)
	if l.perMinute != DefaultPerMinute {
		t.Fatalf("default %d", l.perMinute)
	}
	for range DefaultPerMinute {
		if r, _ := l.bucket.Take(context.Background(), 0); !r.OK {
			t.Fatal("the default burst is smaller than the limit")
		}
	}
	if r, _ := l.bucket.Take(context.Background(), 0); r.OK {
		t.Fatal("the default burst is larger than the limit")
	}
}

// TestCancelledWaitGivesBack: a wait cut short by its context returns its
// token, so the next caller is not charged for an execution that never ran.
func TestCancelledWaitGivesBack(t *testing.T) {
	l := New(nil, 60) // one a second
	ctx := context.Background()
	for range 60 {
		l.bucket.Take(ctx, 0)
	}
	c, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := l.Run(c, sandbox.Spec{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	r, _ := l.bucket.Take(ctx, time.Hour)
	if !r.OK || r.Wait > 1100*time.Millisecond {
		t.Fatalf("after a cancelled wait the next token is %v away", r.Wait)
	}
}

// nothing runs nothing and says it ran.
type nothing struct{}

func (nothing) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{Status: sandbox.StatusOK}, nil
}
func (nothing) Close() error { return nil }

// TestWaitNotice: an execution that waits for the limit first says so to
// the notice its context carries, with the wait and the limit; one that
// does not wait says nothing.
func TestWaitNotice(t *testing.T) {
	l := New(nothing{}, 600) // a burst of 600, then one every 100 ms
	var waits []time.Duration
	ctx := WithWaitNotice(context.Background(), func(wait time.Duration, perMinute int) {
		if perMinute != 600 {
			t.Errorf("notice of a limit of %d a minute, want 600", perMinute)
		}
		waits = append(waits, wait)
	})
	if _, err := l.Run(ctx, sandbox.Spec{}); err != nil || len(waits) != 0 {
		t.Fatalf("within the burst: %v, %d notices", err, len(waits))
	}
	for range 599 {
		l.bucket.Take(ctx, 0)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := l.Run(wctx, sandbox.Spec{}); err != nil || len(waits) != 1 || waits[0] <= 0 {
		t.Fatalf("over the burst: %v, notices %v", err, waits)
	}
}
