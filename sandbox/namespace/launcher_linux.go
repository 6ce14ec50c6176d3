//go:build linux && (amd64 || arm64)

package namespace

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// launcher is a bwrap process started before its execution's options are
// known: it blocks reading them from its --args descriptor, and meanwhile it
// is moved into a fresh cgroup. A move between cgroups waits for an RCU grace
// period in the kernel (milliseconds), which a warm launcher takes off the
// critical path. bwrap makes the namespaces only once the options arrive, so
// every execution still gets a fresh sandbox. The command is fixed when the
// launcher starts (bwrap takes it only from its real command line), so
// launchers are kept per command.
type launcher struct {
	key string
	cmd *exec.Cmd
	// uid is the host uid (and gid) of the sandbox when root, its own
	// among the sandboxes of this host (see hostids), -1 otherwise;
	// releaseUID gives it back once nothing of the sandbox is left.
	uid        int
	releaseUID func()
	cg         runCgroup     // nil without cgroups
	moved      chan struct{} // closed when the move into cg is done
	moveErr    error
	closed     bool
	ownPidNS   bool          // bwrap is the first process of a PID namespace of its own
	live       *atomic.Int64 // the backend's count of cgroups not yet removed

	// upper is the launcher's upper file system when workspaces are
	// overlays (see prepareUpper), ready once upperDone is closed.
	upper     *upperFS
	upperErr  error
	upperDone chan struct{}

	// held are descriptors of the sandbox's namespaces (see holdNamespaces).
	held []int
	// endThread lets the thread that forked the launcher end (see
	// startInMinimalRoot); nil for the shared fork thread.
	endThread func()

	argsW, seccompW, infoR, blockW, usernsW *os.File
	dataW                                   []*os.File
	stdinW, stdoutR, stderrR                *os.File
	all                                     []*os.File
}

// launcherKey identifies launchers that can serve a spec.
func (b *Backend) launcherKey(spec sandbox.Spec) string {
	return strconv.Itoa(b.dataFiles(spec)) + "\x00" + strings.Join(spec.Command, "\x00")
}

// dataFiles is how many files bwrap reads from descriptors for spec: its
// Files, then its files in /tmp.
func (b *Backend) dataFiles(spec sandbox.Spec) int {
	return len(spec.Files) + len(b.tmpFilesFor(spec))
}

// newLauncher starts bwrap for spec's command and number of files.
func (b *Backend) newLauncher(spec sandbox.Spec) (*launcher, error) {
	l := &launcher{key: b.launcherKey(spec), moved: make(chan struct{}), uid: -1}
	if b.asRoot() {
		uid, err := b.ids.Acquire()
		if err != nil {
			return nil, err
		}
		l.uid, l.releaseUID = uid, func() { b.ids.Release(uid) }
		b.prepareIdmap(uid)
	}
	// The cgroup is made while bwrap starts: creating a group in each v1
	// hierarchy costs about 2 ms here, as much as the rest of the start.
	cgc := b.newCgroupAsync()
	var launched chan<- int // for the upper file system, made meanwhile too
	if b.overlays.Load() {
		launched = b.prepareUpper(l)
	}
	// Closed before a discard, which waits for the upper file system.
	doneLaunching := sync.OnceFunc(func() {
		if launched != nil {
			close(launched)
		}
	})
	defer doneLaunching()
	took := false // the cgroup's result, which comes once
	takeCgroup := func() error {
		took = true
		return l.takeCgroup(cgc, b)
	}
	// fail undoes a start that went wrong.
	fail := func(err error) (*launcher, error) {
		if !took {
			_ = takeCgroup() // discard removes it
		}
		doneLaunching()
		close(l.moved)
		l.discard()
		return nil, err
	}
	var child []*os.File // bwrap's descriptors 3, 4, ...
	var std [3]*os.File  // bwrap's stdin, stdout, stderr
	var err error
	pipe := func() (r, w *os.File) {
		if err == nil {
			if r, w, err = os.Pipe(); err == nil {
				l.all = append(l.all, r, w)
			}
		}
		return r, w
	}
	var r *os.File
	r, l.argsW = pipe()
	child = append(child, r)
	r, l.seccompW = pipe()
	child = append(child, r)
	l.infoR, r = pipe()
	child = append(child, r)
	r, l.blockW = pipe()
	child = append(child, r)
	r, l.usernsW = pipe()
	child = append(child, r)
	for range b.dataFiles(spec) {
		var w *os.File
		r, w = pipe()
		child = append(child, r)
		l.dataW = append(l.dataW, w)
	}
	std[0], l.stdinW = pipe()
	l.stdoutR, std[1] = pipe()
	l.stderrR, std[2] = pipe()
	if err != nil {
		return fail(err)
	}

	args := append([]string{"--args", strconv.Itoa(fdArgs), "--"}, spec.Command...)
	l.cmd = exec.Command(b.bwrap, args...)
	l.cmd.Env = []string{}
	l.cmd.Dir = "/" // the minimal root's, as root (see startInMinimalRoot)
	l.cmd.Stdin, l.cmd.Stdout, l.cmd.Stderr = std[0], std[1], std[2]
	l.cmd.ExtraFiles = child
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	markCloseOnExec()
	if b.asRoot() {
		// A private mount namespace with the minimal root (for the
		// workspace mount, see attachWorkspace) and a network namespace
		// of its own, then the backend's own uid.
		id := uint32(l.uid)
		l.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: id, Gid: id, Groups: []uint32{}}
		// bwrap as the first process of a PID namespace of its own, so
		// that when it dies (with the backend, PR_SET_PDEATHSIG) the
		// kernel ends every process it forked, whatever state they are
		// in. The sandbox's first process gets its own --die-with-parent
		// only late in its setup: before that, while it waits for the id
		// maps, it would outlive a launcher killed with the backend and
		// wait forever, re-parented to init. See childPid.
		if !b.noPidNS {
			l.cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
			l.ownPidNS = true
		}
		l.endThread, err = b.startInMinimalRoot(l.cmd)
	} else {
		err = startOnForkThread(l.cmd)
	}
	if err != nil {
		l.cmd = nil
		return fail(err)
	}
	if launched != nil {
		launched <- l.cmd.Process.Pid
	}
	doneLaunching()
	for _, f := range append(child, std[:]...) {
		_ = f.Close()
	}
	if err := takeCgroup(); err != nil {
		return fail(err)
	}
	if l.cg != nil {
		go func() {
			l.moveErr = l.cg.Add(l.cmd.Process.Pid)
			close(l.moved)
		}()
	} else {
		close(l.moved)
	}
	return l, nil
}

// cgroupResult is a cgroup made in the background, or why it was not.
type cgroupResult struct {
	cg  runCgroup
	err error
}

// newCgroupAsync starts making a launcher's cgroup, with the default
// limits until a run sets its own; nil without cgroups.
func (b *Backend) newCgroupAsync() chan cgroupResult {
	if b.cgroups == nil {
		return nil
	}
	c := make(chan cgroupResult, 1)
	go func() {
		cg, err := b.cgroups.New(cgroupLimitsOf(sandbox.DefaultLimits()))
		c <- cgroupResult{cg, err}
	}()
	return c
}

// takeCgroup waits for the cgroup newCgroupAsync makes and gives it to l
// (which removes it on discard), or returns why there is none.
func (l *launcher) takeCgroup(c chan cgroupResult, b *Backend) error {
	if c == nil {
		return nil
	}
	r := <-c
	if r.err != nil {
		return r.err
	}
	l.cg, l.live = r.cg, &b.liveCgroups
	l.live.Add(1)
	return nil
}

// start hands bwrap its options and the contents it reads during setup.
func (l *launcher) start(opts []string, seccomp []byte, files []sandbox.File, tmp []tmpFile, stdin io.Reader) {
	var buf bytes.Buffer
	for _, a := range opts {
		buf.WriteString(a)
		buf.WriteByte(0)
	}
	go func() {
		_, _ = l.argsW.Write(buf.Bytes())
		_ = l.argsW.Close()
		_, _ = l.seccompW.Write(seccomp)
		_ = l.seccompW.Close()
		for i, f := range files {
			_, _ = l.dataW[i].Write(f.Data)
			_ = l.dataW[i].Close()
		}
		for i, f := range tmp {
			w := l.dataW[len(files)+i]
			_, _ = w.Write(f.data)
			_ = w.Close()
		}
	}()
	if stdin == nil {
		_ = l.stdinW.Close()
		return
	}
	go func() {
		_, _ = io.Copy(l.stdinW, stdin)
		_ = l.stdinW.Close()
	}()
}

// collect copies stdout and stderr to the writers; the returned function
// waits until both are drained, or gives up after grace (a pipe can only be
// held open by a process outside our control).
func (l *launcher) collect(stdout, stderr io.Writer) func(grace time.Duration) {
	done := make(chan struct{}, 2)
	copyOut := func(w io.Writer, r *os.File) {
		_, _ = io.Copy(w, r)
		done <- struct{}{}
	}
	go copyOut(stdout, l.stdoutR)
	go copyOut(stderr, l.stderrR)
	return func(grace time.Duration) {
		t := time.NewTimer(grace)
		defer t.Stop()
		for range 2 {
			select {
			case <-done:
			case <-t.C:
				return
			}
		}
	}
}

// discard kills bwrap if it still runs and releases everything. It is safe
// to call more than once.
func (l *launcher) discard() {
	if l.closed {
		return
	}
	l.closed = true
	if l.cmd != nil && l.cmd.Process != nil {
		_ = l.cmd.Process.Kill()
		if l.cmd.ProcessState == nil {
			_ = l.cmd.Wait()
		}
	}
	if l.endThread != nil {
		l.endThread() // the launcher is gone: its death signal no longer matters
	}
	for _, f := range l.all {
		_ = f.Close()
	}
	l.releaseNamespaces()
	if l.upperDone != nil {
		<-l.upperDone
		if l.upper != nil {
			l.upper.close() // the last reference: unmounted, the loop device detaches
		}
	}
	if l.cg != nil {
		select {
		case <-l.moved:
		case <-time.After(5 * time.Second):
		}
		if err := l.cg.Destroy(); err != nil {
			// Its last processes are still exiting (under load, or with a
			// mount namespace to tear down): try again for a while rather
			// than leave the group for the life of this process.
			go destroyLater(l.cg, l.live, l.releaseUID)
			return
		} else if l.live != nil {
			l.live.Add(-1)
		}
	}
	if l.releaseUID != nil {
		l.releaseUID()
	}
}

// destroyLater retries cg.Destroy for up to a minute, then gives up: the
// next start of codeagent sweeps what is left (see sweepStale). The
// sandbox's host uid is given back (release, when not nil) only once its
// group is empty and gone; else it stays taken for this process's life.
func destroyLater(cg runCgroup, live *atomic.Int64, release func()) {
	for i := 0; i < 120; i++ {
		time.Sleep(500 * time.Millisecond)
		if cg.Destroy() == nil {
			if live != nil {
				live.Add(-1)
			}
			if release != nil {
				release()
			}
			return
		}
	}
}

// setupMessage is what bwrap printed before it failed, or err.
func setupMessage(stderr []byte, err error) string {
	if msg := strings.TrimSpace(string(bytes.ToValidUTF8(stderr, nil))); msg != "" {
		return msg
	}
	return err.Error()
}
