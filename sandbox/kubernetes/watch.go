package kubernetes

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// podWatch follows the backend's Pods, so that a box whose Pod is deleted
// (behind codeagent's back, or evicted) or ends is known dead at once: its
// exec streams may stay open until the kubelet stops the container.
type podWatch struct {
	b     *Backend
	mu    sync.Mutex
	boxes map[string]*box
	stop  context.CancelFunc
	done  chan struct{}
}

func newPodWatch(b *Backend) *podWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatch{b: b, boxes: map[string]*box{}, stop: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// add follows bx's Pod; remove stops following it.
func (w *podWatch) add(bx *box) {
	w.mu.Lock()
	w.boxes[bx.name] = bx
	w.mu.Unlock()
}

func (w *podWatch) remove(bx *box) {
	w.mu.Lock()
	delete(w.boxes, bx.name)
	w.mu.Unlock()
}

func (w *podWatch) close() {
	w.stop()
	<-w.done
}

// run watches the pool's Pods until ctx ends, watching again after a
// broken watch (an API server restart), with a list to catch up.
func (w *podWatch) run(ctx context.Context) {
	defer close(w.done)
	sel := metav1.ListOptions{LabelSelector: labelPool + "=" + w.b.id}
	for ctx.Err() == nil {
		followed := w.followed()
		list, err := w.b.api.pods(w.b.cfg.Namespace).List(ctx, sel)
		if err == nil {
			w.catchUp(list.Items, followed)
			opts := sel
			opts.ResourceVersion = list.ResourceVersion
			var wi watch.Interface
			if wi, err = w.b.api.pods(w.b.cfg.Namespace).Watch(ctx, opts); err == nil {
				w.follow(ctx, wi)
				wi.Stop()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (w *podWatch) follow(ctx context.Context, wi watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type == watch.Deleted || ended(p) {
				w.gone(p.Name)
			}
		}
	}
}

// followed is the boxes followed now: taken before a list, it is the
// boxes whose Pods the list must show.
func (w *podWatch) followed() map[string]*box {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.boxes)
}

// catchUp marks gone the boxes of followed (taken before pods were
// listed) whose Pods are not in pods or ended. A box followed since may
// have a Pod created after the list: the watch that follows the list
// reports what happens to it.
func (w *podWatch) catchUp(pods []corev1.Pod, followed map[string]*box) {
	have := map[string]bool{}
	for i := range pods {
		if !ended(&pods[i]) {
			have[pods[i].Name] = true
		}
	}
	w.mu.Lock()
	var lost []string
	for name, bx := range followed {
		if !have[name] && w.boxes[name] == bx {
			lost = append(lost, name)
		}
	}
	w.mu.Unlock()
	for _, name := range lost {
		w.gone(name)
	}
}

func (w *podWatch) gone(name string) {
	w.mu.Lock()
	bx := w.boxes[name]
	delete(w.boxes, name)
	w.mu.Unlock()
	if bx != nil {
		bx.markGone()
	}
}

// ended reports whether p is being deleted or has stopped.
func ended(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}
