package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/netns"
)

// openGateway gives an execution with a network its egress proxy: a
// listener on 127.0.0.1 of the container's own network namespace (network
// "none": loopback only), before the program starts. As root codeagent
// opens it from a thread that enters the namespace; otherwise a helper
// exec'd in the container opens it and passes it back over a Unix socket
// in the box's code directory, removed before the program starts.
func (b *Backend) openGateway(ctx context.Context, bx *box, gw sandbox.Gateway) error {
	if gw == nil {
		return nil
	}
	var l net.Listener
	var err error
	if b.root {
		l, err = b.listenAsRoot(ctx, bx, gw.Port())
	} else {
		l, err = b.listenByHelper(ctx, bx, gw.Port())
	}
	if err != nil {
		return fmt.Errorf("the egress proxy's listener: %w", err)
	}
	go gw.Serve(l)
	return nil
}

func (b *Backend) listenAsRoot(ctx context.Context, bx *box, port int) (net.Listener, error) {
	pid, _ := strconv.Atoi(bx.cg.firstProcessID)
	if pid <= 0 {
		ins, err := b.cli.ContainerInspect(ctx, bx.id, client.ContainerInspectOptions{})
		if err != nil || ins.Container.State == nil || ins.Container.State.Pid <= 0 {
			return nil, errors.New("the container's first process is not visible")
		}
		pid = ins.Container.State.Pid
	}
	return netns.Listen(pid, port)
}

// gatewaySocket is the helper's way back, in the box's code directory.
const gatewaySocket = ".egress.sock"

func (b *Backend) listenByHelper(ctx context.Context, bx *box, port int) (net.Listener, error) {
	path := filepath.Join(bx.code, gatewaySocket)
	_ = os.Remove(path)
	ul, err := listenUnixIn(bx.code, gatewaySocket)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer ul.Close()
	if err := os.Chmod(path, 0o777); err != nil { // the container's uid connects
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := []string{"/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
		"python3", "-I", "-S", "-c", netns.HelperScript, strconv.Itoa(port), CodePath + "/" + gatewaySocket}
	done := make(chan error, 1)
	go func() { _, err := b.execOutput(ctx, bx, cmd); done <- err }()
	_ = ul.SetDeadline(time.Now().Add(20 * time.Second))
	type got struct {
		fd  int
		err error
	}
	ch := make(chan got, 1)
	go func() {
		c, err := ul.AcceptUnix()
		if err != nil {
			ch <- got{-1, err}
			return
		}
		defer c.Close()
		f, err := c.File()
		if err != nil {
			ch <- got{-1, err}
			return
		}
		defer f.Close()
		fd, err := netns.ReceiveFD(f, 20*time.Second)
		ch <- got{fd, err}
	}()
	var r got
	select {
	case r = <-ch:
	case err := <-done:
		if err == nil {
			err = errors.New("the helper sent nothing")
		}
		_ = ul.Close()
		return nil, fmt.Errorf("the listener helper: %w", err)
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := <-done; err != nil {
		_ = closeFD(r.fd)
		return nil, fmt.Errorf("the listener helper: %w", err)
	}
	if err := netns.CheckListener(r.fd, port); err != nil {
		_ = closeFD(r.fd)
		return nil, err
	}
	return netns.FileListener(r.fd)
}

func closeFD(fd int) error { return os.NewFile(uintptr(fd), "").Close() }

// listenUnixIn listens on a Unix socket called name in dir. The address
// goes through a descriptor of dir, so that a long state directory does
// not run past the 108 bytes of a socket's path.
func listenUnixIn(dir, name string) (*net.UnixListener, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("the helper's socket: %w", err)
	}
	defer d.Close()
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name)
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the helper's socket in %s: %w", dir, err)
	}
	ul.SetUnlinkOnClose(false) // the name goes through a descriptor closed by then: the caller removes it
	return ul, nil
}
