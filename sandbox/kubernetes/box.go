package kubernetes

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/codeagent/codeagent/sandbox"
)

//go:embed agent.py
var agentSource string

// programWrapper is the program's exec until a run: it reads the argv
// (a count, then NUL-terminated arguments) from its standard input and
// execs it; what follows on standard input is the program's. bash reads a
// pipe a byte at a time, so nothing of the program's input is lost.
const programWrapper = `IFS= read -r n || exit 125; a=(); for ((i = 0; i < n; i++)); do IFS= read -r -d "" x || exit 125; a+=("$x"); done; exec "${a[@]}"`

// box is one sandbox Pod with its two exec streams opened ahead: the
// program's, waiting for its argv, and the agent's (agent.py).
type box struct {
	name  string
	class class
	start time.Time // the Pod's start, from which activeDeadlineSeconds counts

	cancel  context.CancelFunc // ends both streams
	agent   *frameWriter
	agentIn *io.PipeWriter
	frames  chan frame
	// agentDone is closed when the agent's exec ended.
	agentDone chan struct{}
	// gone is closed when the Pod was deleted or ended (podWatch).
	gone     chan struct{}
	goneOnce sync.Once
	agentLog *sandbox.CappedBuffer

	progIn           *io.PipeWriter
	progOut, progErr *switchWriter
	progDone         chan struct{}
	progErrMu        sync.Mutex
	progExit         error
}

// dead reports whether one of the box's streams has ended.
func (bx *box) dead() bool {
	select {
	case <-bx.agentDone:
		return true
	case <-bx.gone:
		return true
	case <-bx.progDone:
		return true
	default:
		return false
	}
}

// markGone records that the box's Pod was deleted or ended.
func (bx *box) markGone() { bx.goneOnce.Do(func() { close(bx.gone) }) }

func (bx *box) exit() error {
	bx.progErrMu.Lock()
	defer bx.progErrMu.Unlock()
	return bx.progExit
}

// exitCode turns the program exec's outcome into an exit code; an error
// that is not an exit status means the stream broke.
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	return -1, err
}

// switchWriter forwards to the writer set last; before that it discards.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		_, _ = s.w.Write(p)
	}
	return len(p), nil
}

// createBox creates a Pod of class c, waits until it runs and opens its
// streams.
func (b *Backend) createBox(ctx context.Context, c class) (*box, error) {
	return b.createBoxWith(ctx, c, nil)
}

// createBoxWith is createBox for a spec with binds (binds.go): its Pod
// has the binds' volumes, filled before the streams open.
func (b *Backend) createBoxWith(ctx context.Context, c class, binds []sandbox.Bind) (*box, error) {
	spec := b.podSpec(c, b.cfg.PodLifetime)
	if len(binds) > 0 {
		sizes, err := bindSizes(binds)
		if err != nil {
			return nil, err
		}
		withBinds(spec, binds, sizes)
	}
	pod, err := b.api.pods(b.cfg.Namespace).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod: %w", err)
	}
	bx := &box{name: pod.Name, class: c, gone: make(chan struct{})}
	b.watch.add(bx)
	fail := func(err error) (*box, error) {
		b.watch.remove(bx)
		dctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if derr := b.deletePod(dctx, pod.Name); derr != nil {
			b.log.Warn("kubernetes: delete a Pod that did not start", "pod", pod.Name, "err", derr)
		}
		return nil, err
	}
	if bx.start, err = b.waitRunning(ctx, pod); err != nil {
		return fail(err)
	}
	if err := b.stageBinds(ctx, pod.Name, binds); err != nil {
		return fail(err)
	}
	if err := b.arm(bx); err != nil {
		bx.cancel()
		return fail(err)
	}
	return bx, nil
}

// waitRunning watches pod until its container runs, and returns its start.
func (b *Backend) waitRunning(ctx context.Context, pod *corev1.Pod) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	w, err := b.api.pods(b.cfg.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: pod.ResourceVersion})
	if err != nil {
		return time.Time{}, fmt.Errorf("watch Pod %s: %w", pod.Name, err)
	}
	defer w.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("Pod %s did not start in %v (%s): %w", pod.Name, b.cfg.StartTimeout, last, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, fmt.Errorf("watch of Pod %s ended (%s)", pod.Name, last)
			}
			if ev.Type == watch.Deleted {
				return time.Time{}, fmt.Errorf("Pod %s was deleted while starting", pod.Name)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			last = describe(p)
			if err := permanent(p); err != nil {
				return time.Time{}, fmt.Errorf("Pod %s cannot start: %w", pod.Name, err)
			}
			switch p.Status.Phase {
			case corev1.PodFailed, corev1.PodSucceeded:
				return time.Time{}, fmt.Errorf("Pod %s ended before use: %s", pod.Name, last)
			case corev1.PodRunning:
				// Every container (the stager too, when there is one).
				running := 0
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Running != nil {
						running++
					}
				}
				if running == len(pod.Spec.Containers) && p.Status.StartTime != nil {
					return p.Status.StartTime.Time, nil
				}
			}
		}
	}
}

// permanent returns the error of a Pod that will never start and that
// waiting would only hide: a Localhost seccomp profile the node does not
// have (errSeccompProfile).
func permanent(p *corev1.Pod) error {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && strings.HasPrefix(w.Reason, "CreateContainer") &&
			strings.Contains(strings.ToLower(w.Message), "seccomp profile") {
			return fmt.Errorf("%w: %s", errSeccompProfile, w.Message)
		}
	}
	return nil
}

// describe says where a Pod is in its start, for errors.
func describe(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += "; " + string(c.Type) + ": " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			s += "; " + w.Reason + ": " + w.Message
		}
	}
	return s
}

// arm opens the box's two streams and waits until the agent has found the
// program's exec.
func (b *Backend) arm(bx *box) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	marker := hex.EncodeToString(r[:])
	ctx, cancel := context.WithCancel(context.Background())
	bx.cancel = cancel
	progR, progW := io.Pipe()
	bx.progIn, bx.progOut, bx.progErr = progW, &switchWriter{}, &switchWriter{}
	bx.progDone = make(chan struct{})
	go func() {
		err := b.stream(ctx, bx.name, []string{"bash", "-c", programWrapper, "codeagent-program-" + marker}, progR, bx.progOut, bx.progErr)
		bx.progErrMu.Lock()
		bx.progExit = err
		bx.progErrMu.Unlock()
		_ = progR.CloseWithError(io.EOF)
		close(bx.progDone)
	}()
	agentR, agentW := io.Pipe()
	outR, outW := io.Pipe()
	bx.agentIn, bx.agent = agentW, &frameWriter{w: agentW}
	bx.agentDone, bx.frames = make(chan struct{}), make(chan frame, 64)
	bx.agentLog = &sandbox.CappedBuffer{Cap: 64 << 10}
	go func() {
		err := b.stream(ctx, bx.name, []string{"python3", "-I", "-S", "-c", agentSource, marker}, agentR, outW, bx.agentLog)
		if err != nil {
			b.log.Debug("kubernetes: agent stream ended", "pod", bx.name, "err", err, "stderr", string(bx.agentLog.Bytes()))
		}
		_ = agentR.CloseWithError(io.EOF)
		_ = outW.Close()
		close(bx.agentDone)
	}()
	go readFrames(outR, bx.frames)
	t := time.NewTimer(b.cfg.StartTimeout)
	defer t.Stop()
	select {
	case f, ok := <-bx.frames:
		if !ok {
			return fmt.Errorf("the agent ended before it was ready: %s", bx.agentLog.Bytes())
		}
		var ready struct{ PID int }
		if f.t != frameReady || json.Unmarshal(f.p, &ready) != nil || ready.PID <= 0 {
			return fmt.Errorf("the agent did not find the program's exec (%c %s)", f.t, f.p)
		}
		return nil
	case <-t.C:
		return errors.New("the agent did not answer")
	}
}

// readFrames sends the agent's frames to ch and closes it at the end.
func readFrames(r io.ReadCloser, ch chan<- frame) {
	defer close(ch)
	defer r.Close()
	fr := newFrameReader(r)
	for {
		f, err := fr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ch <- frame{t: frameError, p: []byte(fmt.Sprintf("{\"error\":%q}", err.Error()))}
			}
			return
		}
		ch <- f
	}
}

// stream runs cmd in pod's sandbox container through the exec API
// (WebSocket, or SPDY where the server lacks it) until it ends.
func (b *Backend) stream(ctx context.Context, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return b.streamIn(ctx, pod, container, cmd, stdin, stdout, stderr)
}

// streamIn is stream in another of the Pod's containers (the stager).
func (b *Backend) streamIn(ctx context.Context, pod, ctr string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
	u := b.api.execURL(b.cfg.Namespace, pod, &corev1.PodExecOptions{Container: ctr, Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true})
	ex, err := b.executor(u)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

func (b *Backend) executor(u *url.URL) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", u)
	if err != nil || b.cfg.Transport == "spdy" {
		return spdy, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", u.String())
	if err != nil || b.cfg.Transport == "websocket" {
		return ws, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// setDeadline lowers the Pod's activeDeadlineSeconds so that it ends d
// from now (plus a grace) even without codeagent.
func (b *Backend) setDeadline(ctx context.Context, bx *box, d time.Duration) error {
	secs := int64((time.Since(bx.start) + d + deadlineGrace).Seconds()) + 1
	patch := fmt.Sprintf(`{"spec":{"activeDeadlineSeconds":%d}}`, secs)
	_, err := b.api.pods(b.cfg.Namespace).Patch(ctx, bx.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// deadlineGrace is how much longer than its wall-clock limit a taken Pod
// may live.
const deadlineGrace = 10 * time.Second
