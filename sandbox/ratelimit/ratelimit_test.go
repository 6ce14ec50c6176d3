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
	for i := range 120 {
		l.lim.Allow() // spend the burst without running 120 programs
		_ = i
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
	if l.perMinute != DefaultPerMinute || l.lim.Burst() != DefaultPerMinute {
		t.Fatalf("default %d burst %d", l.perMinute, l.lim.Burst())
	}
}
