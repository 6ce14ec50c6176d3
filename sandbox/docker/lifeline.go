package docker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A container's limits must hold when codeagent is gone (killed, crashed):
// the engine has no maximum run time, so each container's first process
// (PID 1 of its PID namespace, which its own programs cannot signal) is a
// shell that lives on a lifeline. The lifeline is a FIFO in the box
// directory, bound read-only into the container, whose writing end only
// codeagent holds: while the container is idle, PID 1 waits for a line;
// EOF, which the kernel delivers the moment codeagent's descriptor closes,
// ends it and with it every process of the container. Taken for an
// execution, the container is told how long it may live (the wall-clock
// limit plus a grace), and PID 1 then ends at that deadline or at EOF,
// whichever comes first. codeagent's own timer normally ends a program
// well before; the lifeline is the backstop that needs no codeagent.
//
// The FIFO belongs to codeagent with mode 0644: the program (another uid)
// can open it for reading only, and so can neither write a line nor keep
// a writer open.

// lifelinePath is where the FIFO appears in the container.
const lifelinePath = "/run/codeagent-lifeline"

// lifelineGrace is how much longer than its wall-clock limit a container
// may live when codeagent is alive but its timer failed to act.
const lifelineGrace = 5 * time.Second

// lifelineInit is PID 1's program. Opening a FIFO for reading waits for a
// writer, so a container that starts just as codeagent dies would wait in
// that open forever: a watchdog (in a process group of its own, so that
// it goes away whole) signals PID 1, which has a handler and so can be
// signalled, if the open takes more than 2 s.
var lifelineInit = []string{"bash", "-c", `trap 'exit 0' USR1
set -m
(sleep 2; kill -USR1 $$) & w=$!
set +m
exec 3<` + lifelinePath + ` || exit 1
kill -- -$w 2>/dev/null
read -r life <&3 || exit 0
read -r -t "$life" _ <&3
exit 0`}

// openLifeline makes the FIFO in dir and opens its writing end.
func openLifeline(dir string) (*os.File, string, error) {
	p := filepath.Join(dir, "lifeline")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		return nil, "", fmt.Errorf("make lifeline: %w", err)
	}
	if err := os.Chmod(p, 0o644); err != nil { // past the umask
		return nil, "", fmt.Errorf("make lifeline: %w", err)
	}
	// O_RDWR opens a FIFO without waiting for a reader; codeagent never
	// reads from it.
	f, err := os.OpenFile(p, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open lifeline: %w", err)
	}
	return f, p, nil
}

// setDeadline tells the container of bx to end after d plus the grace.
func (bx *box) setDeadline(d time.Duration) error {
	if bx.lifeline == nil {
		return nil
	}
	secs := int64(math.Ceil((d + lifelineGrace).Seconds()))
	_, err := fmt.Fprintf(bx.lifeline, "%d\n", secs)
	return err
}
