package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCatchUpSparesPodsCreatedAfterTheList is the race that failed a CI
// run: the watch lists the pool's Pods, a Pod is created and followed
// meanwhile, and the catch-up on that older list marked the new box dead
// ("a stream ended while idle" before its first run). Only boxes
// followed before the list may be found missing from it.
func TestCatchUpSparesPodsCreatedAfterTheList(t *testing.T) {
	w := &podWatch{boxes: map[string]*box{}}
	old := &box{name: "old", gone: make(chan struct{})}
	deleted := &box{name: "deleted", gone: make(chan struct{})}
	w.add(old)
	w.add(deleted)
	followed := w.followed() // taken before the list, as run does
	fresh := &box{name: "fresh", gone: make(chan struct{})}
	w.add(fresh) // created and followed while the list was on its way
	list := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "old"}}}
	w.catchUp(list, followed)
	isGone := func(bx *box) bool {
		select {
		case <-bx.gone:
			return true
		default:
			return false
		}
	}
	if isGone(fresh) {
		t.Error("a box whose Pod was created after the list was marked gone")
	}
	if isGone(old) {
		t.Error("a box whose Pod is in the list was marked gone")
	}
	if !isGone(deleted) {
		t.Error("a box followed before the list, whose Pod is not in it, was not marked gone")
	}
}
