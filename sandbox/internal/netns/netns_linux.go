// Package netns opens a TCP listener inside a sandbox's network namespace
// for codeagent's egress proxy (sandbox.Gateway). The listener belongs to
// codeagent's process: the program connects to it on its own loopback and
// gains no route, no process and no file it did not have.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox/internal/osthread"
)

// Listen opens 127.0.0.1:port in the network namespace of process pid.
// As root it enters the namespace from a thread of its own; otherwise it
// cannot (setns needs CAP_SYS_ADMIN over the namespace), and a helper
// started in the sandbox's user and network namespaces (nsenter, then
// python3, both from the host's /usr) opens the socket and hands it back.
func Listen(pid, port int) (net.Listener, error) {
	if os.Geteuid() == 0 {
		return listenSetns(pid, port)
	}
	return listenHelper(pid, port)
}

// listenSetns creates the socket on a thread that joined the namespace;
// the thread is never given back to Go's scheduler and ends with it.
func listenSetns(pid, port int) (net.Listener, error) {
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's network namespace: %w", err)
	}
	defer unix.Close(ns)
	var l net.Listener
	err = osthread.Run(func() error {
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter the sandbox's network namespace: %w", err)
		}
		fd, err := socketFD(port)
		if err != nil {
			return err
		}
		l, err = fileListener(fd)
		return err
	})
	return l, err
}

// socketFD makes the listening socket in the calling thread's network
// namespace. IP_FREEBIND: the sandbox's loopback may not be up yet (bwrap
// raises it during setup); connections arrive once it is.
func socketFD(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	for _, o := range []int{unix.SO_REUSEADDR} {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("IP_FREEBIND: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind 127.0.0.1:%d in the sandbox: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen: %w", err)
	}
	return fd, nil
}

func fileListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "egress-listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	return l, nil
}

// HelperScript is the helper's program for python3 -c: it opens the
// listener in the namespace it runs in and sends it over the Unix socket
// on descriptor 3, or at the path given as its second argument.
const HelperScript = `import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(128)
if len(sys.argv) > 2:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[2])
else:
    c = socket.socket(fileno=3)
socket.send_fds(c, [b"L"], [s.fileno()])
`

// listenHelper runs the helper in pid's network namespace and the user
// namespace that owns it. That is not always pid's own: unprivileged,
// bwrap maps root first (for /dev/pts) and then nests a second user
// namespace for the program, which has no power over the network.
func listenHelper(pid, port int) (net.Listener, error) {
	netFD, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's network namespace: %w", err)
	}
	netNS := os.NewFile(uintptr(netFD), "netns")
	defer netNS.Close()
	userFD, err := unix.IoctlRetInt(netFD, unix.NS_GET_USERNS)
	if err != nil {
		return nil, fmt.Errorf("the user namespace that owns the sandbox's network: %w", err)
	}
	userNS := os.NewFile(uintptr(userFD), "userns")
	defer userNS.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	ours := os.NewFile(uintptr(fds[0]), "egress-helper")
	theirs := os.NewFile(uintptr(fds[1]), "egress-helper")
	defer ours.Close()
	cmd := exec.Command("/usr/bin/nsenter", "--user=/proc/self/fd/4", "--net=/proc/self/fd/5", "--preserve-credentials",
		"--", "/usr/bin/python3", "-I", "-S", "-c", HelperScript, strconv.Itoa(port))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{theirs, userNS, netNS}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &limitedBuffer{max: 4096}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return nil, fmt.Errorf("start the listener helper: %w", err)
	}
	theirs.Close()
	fd, rerr := ReceiveFD(ours, 10*time.Second)
	werr := cmd.Wait()
	if rerr != nil {
		if werr != nil {
			return nil, fmt.Errorf("the listener helper (nsenter, python3): %v: %s", werr, out.String())
		}
		return nil, rerr
	}
	if err := CheckListener(fd, port); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return fileListener(fd)
}

// CheckListener makes sure a descriptor a helper sent is what it should
// be: a listening TCP socket on 127.0.0.1:port.
func CheckListener(fd, port int) error {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return errors.New("the helper's descriptor is not a listening socket")
	}
	sa, err := unix.Getsockname(fd)
	in4, ok := sa.(*unix.SockaddrInet4)
	if err != nil || !ok || in4.Port != port || in4.Addr != [4]byte{127, 0, 0, 1} {
		return errors.New("the helper's socket is not on 127.0.0.1")
	}
	return nil
}

// FileListener turns a received descriptor into a listener.
func FileListener(fd int) (net.Listener, error) { return fileListener(fd) }

// ReceiveFD reads one descriptor sent with SCM_RIGHTS on c.
func ReceiveFD(c *os.File, timeout time.Duration) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return -1, fmt.Errorf("receive the listener: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || n == 0 {
		return -1, errors.New("receive the listener: no message")
	}
	var got []int
	for _, m := range msgs {
		if fds, err := unix.ParseUnixRights(&m); err == nil {
			got = append(got, fds...)
		}
	}
	if len(got) != 1 {
		for _, fd := range got {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("receive the listener: %d descriptors", len(got))
	}
	return got[0], nil
}

type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
