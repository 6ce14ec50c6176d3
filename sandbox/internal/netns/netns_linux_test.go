package netns

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenerFD is a descriptor of a TCP socket bound to addr, listening or
// not.
func listenerFD(t *testing.T, addr [4]byte, listen bool) (int, int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr}); err != nil {
		t.Fatal(err)
	}
	if listen {
		if err := unix.Listen(fd, 1); err != nil {
			t.Fatal(err)
		}
	}
	sa, _ := unix.Getsockname(fd)
	return fd, sa.(*unix.SockaddrInet4).Port
}

// TestCheckListener: a helper's descriptor is taken only when it is a
// listening TCP socket on 127.0.0.1 and the expected port.
func TestCheckListener(t *testing.T) {
	fd, port := listenerFD(t, [4]byte{127, 0, 0, 1}, true)
	if err := CheckListener(fd, port); err != nil {
		t.Errorf("a listener on 127.0.0.1:%d: %v", port, err)
	}
	if err := CheckListener(fd, port+1); err == nil {
		t.Errorf("another port accepted")
	}
	if fd, port := listenerFD(t, [4]byte{127, 0, 0, 1}, false); CheckListener(fd, port) == nil {
		t.Errorf("a socket that does not listen accepted")
	}
	if fd, port := listenerFD(t, [4]byte{0, 0, 0, 0}, true); CheckListener(fd, port) == nil {
		t.Errorf("a listener on every address accepted")
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if CheckListener(int(f.Fd()), port) == nil {
		t.Errorf("a file accepted")
	}
}

// TestReceiveFD: exactly one descriptor is taken; more are closed and
// refused, none times out.
func TestReceiveFD(t *testing.T) {
	pair := func() (*os.File, int) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.SetNonblock(fds[0], true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[1]) })
		f := os.NewFile(uintptr(fds[0]), "ours")
		t.Cleanup(func() { f.Close() })
		return f, fds[1]
	}
	lfd, port := listenerFD(t, [4]byte{127, 0, 0, 1}, true)
	ours, theirs := pair()
	if err := unix.Sendmsg(theirs, []byte("L"), unix.UnixRights(lfd), nil, 0); err != nil {
		t.Fatal(err)
	}
	fd, err := ReceiveFD(ours, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, err := FileListener(fd)
	if err != nil || l.Addr().(*net.TCPAddr).Port != port {
		t.Fatalf("listener %v, %v", l, err)
	}
	l.Close()
	ours, theirs = pair()
	if err := unix.Sendmsg(theirs, []byte("L"), unix.UnixRights(lfd, lfd), nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ReceiveFD(ours, 5*time.Second); err == nil {
		t.Errorf("two descriptors accepted")
	}
	ours, _ = pair()
	if _, err := ReceiveFD(ours, 100*time.Millisecond); err == nil {
		t.Errorf("nothing sent, yet a descriptor")
	}
}
