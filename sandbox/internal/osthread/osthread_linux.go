// Package osthread runs a function on an OS thread of its own that ends
// with it, for changes a thread cannot undo: entering another namespace
// (setns), unsharing its file system context, changing its credentials.
//
// The thread is never the process's main thread. The kernel shows the
// main thread's namespaces, root and credentials as the whole process's
// (/proc/self/mountinfo, /proc/self/ns, /proc/self/status), and Go does
// not end a main thread whose goroutine exits locked but parks it forever:
// a namespace entered there would stay the process's view for good (its
// mount table read by every later /proc/self/mountinfo).
package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Run calls fn on a fresh OS thread that is not the main thread, locked to
// it, and lets the thread end afterwards; it returns fn's error.
func Run(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked below: the thread ends with the goroutine
		if unix.Gettid() == unix.Getpid() {
			// The main thread: hold it while another thread does the
			// work (a locked thread runs no other goroutine), then give
			// it back unchanged.
			err := Run(fn)
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Go runs fn on a fresh OS thread that is not the main thread, locked to
// it, and lets the thread end when fn returns; it does not wait for fn.
// For a thread that must outlive its caller: one that forks a process
// which dies with it (PR_SET_PDEATHSIG names the forking thread).
func Go(fn func()) {
	go func() {
		runtime.LockOSThread() // never unlocked below: the thread ends with the goroutine
		if unix.Gettid() == unix.Getpid() {
			// The main thread, held while fn's goroutine locks another
			// (a locked thread runs no other goroutine), then given back.
			locked := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				close(locked)
				fn()
			}()
			<-locked
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
}
