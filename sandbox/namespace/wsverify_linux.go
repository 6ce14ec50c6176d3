//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// Run by an ordinary user, bwrap binds the workspace by its path, which it
// looks up again after codeagent opened it without following links: a
// program of another sandbox that can write a parent directory could swap
// in a link in between. So before the program starts, codeagent checks
// that what the sandbox has at /workspace is the directory it opened.

// verifyWorkspace waits until the sandbox's first process has finished its
// setup (it then blocks reading the --block-fd descriptor) and compares the
// sandbox's /workspace with ws.
func verifyWorkspace(pid int, ws *os.File) error {
	if err := awaitBlocked(pid, fdBlock, 5*time.Second); err != nil {
		return err
	}
	var want, got unix.Stat_t
	if err := unix.Fstat(int(ws.Fd()), &want); err != nil {
		return err
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/root"+sandbox.WorkspacePath, &got); err != nil {
		return fmt.Errorf("look at the sandbox's workspace: %w", err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("%w: the workspace changed while the sandbox was set up", sandbox.ErrSymlinkInPath)
	}
	return nil
}

// awaitBlocked polls /proc/PID/syscall until process pid sleeps in read(2)
// on descriptor fd.
func awaitBlocked(pid, fd int, timeout time.Duration) error {
	want := strconv.Itoa(unix.SYS_READ) + " 0x" + strconv.FormatInt(int64(fd), 16) + " "
	file := "/proc/" + strconv.Itoa(pid) + "/syscall"
	deadline := time.Now().Add(timeout)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return errors.New("bubblewrap exited during setup")
			}
			return fmt.Errorf("watch the sandbox's setup: %w", err)
		}
		if strings.HasPrefix(string(b), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the sandbox's setup did not finish")
		}
		time.Sleep(delay)
	}
}
