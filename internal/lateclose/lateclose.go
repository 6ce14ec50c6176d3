// Package lateclose closes the descriptors whose last close makes the
// kernel work or wait: an inotify instance (its close waits for an RCU
// grace period, 0.1 to 15 ms here), the last reference to a mount
// namespace or to a mounted file system (the unmount, which writes an ext4
// file system's metadata out).
//
// A long-running process closes them as it goes. A process about to exit
// (`codeagent exec`) would wait for that work in its own exit, which its
// caller waits for: it calls Keep first and HandOff last, and a
// short-lived child that inherits the kept descriptors does the work in
// its exit, after the process is gone. A kept descriptor stays open until
// HandOff (or the process's exit, which closes it as before).
package lateclose

import (
	"os"
	"sync"
)

var state struct {
	mu    sync.Mutex
	keeps int        // Keep calls not yet handed off
	kept  []*os.File // closed by HandOff
}

// Keep makes Close and CloseLater keep descriptors for HandOff, until as
// many HandOff calls as Keep calls have been made.
func Keep() {
	state.mu.Lock()
	state.keeps++
	state.mu.Unlock()
}

// keep reports whether f was kept for HandOff.
func keep(f *os.File) bool {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.keeps == 0 {
		return false
	}
	state.kept = append(state.kept, f)
	return true
}

// Close closes f now, or keeps it for HandOff.
func Close(f *os.File) {
	if f != nil && !keep(f) {
		_ = f.Close()
	}
}

// CloseLater closes f in the background (nothing waits for it), or keeps
// it for HandOff.
func CloseLater(f *os.File) {
	if f != nil && !keep(f) {
		go func() { _ = f.Close() }()
	}
}

// FD wraps a raw descriptor for Close and CloseLater.
func FD(fd int, name string) *os.File { return os.NewFile(uintptr(fd), name) }

// helpers are programs that exit at once without touching their
// descriptors; absolute paths, never looked up in PATH, since the child
// holds descriptors of sandboxes.
var helpers = []string{"/usr/bin/true", "/bin/true"}

// HandOff ends one Keep. At the last, it starts a child that inherits the
// kept descriptors and exits, closes them here (no longer the last
// references) and returns without waiting for the child, whose exit
// closes them for good. Without such a program it closes them itself.
func HandOff() {
	state.mu.Lock()
	if state.keeps > 0 {
		state.keeps--
	}
	var files []*os.File
	if state.keeps == 0 {
		files, state.kept = state.kept, nil
	}
	state.mu.Unlock()
	if len(files) == 0 {
		return
	}
	for _, h := range helpers {
		attr := &os.ProcAttr{Dir: "/", Env: []string{}, Files: append([]*os.File{nil, nil, nil}, files...)}
		if p, err := os.StartProcess(h, []string{h}, attr); err == nil {
			go func() { _, _ = p.Wait() }() // reaped if the process lives on
			break
		}
	}
	for _, f := range files {
		_ = f.Close()
	}
}
