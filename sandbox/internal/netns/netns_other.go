//go:build !linux

package netns

import (
	"errors"
	"net"
	"os"
	"time"
)

var errUnsupported = errors.New("network namespaces are Linux only")

// HelperScript is the Linux helper's program; unused elsewhere.
const HelperScript = ""

func Listen(pid, port int) (net.Listener, error)               { return nil, errUnsupported }
func ReceiveFD(c *os.File, timeout time.Duration) (int, error) { return -1, errUnsupported }
func CheckListener(fd, port int) error                         { return errUnsupported }
func FileListener(fd int) (net.Listener, error)                { return nil, errUnsupported }
