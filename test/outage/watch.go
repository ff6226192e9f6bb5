package outage

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Binding is a pod seen bound by a PodWatch, and when.
type Binding struct {
	At time.Time
	// Pod is namespace/name.
	Pod  string
	Node string
}

// PodWatch follows pods through an informer: when each was first seen
// bound, and every change of a nodeName once set, which the API server
// should make impossible and which would mean a pod was bound twice.
type PodWatch struct {
	mu         sync.Mutex
	bindings   []Binding
	nodeOf     map[types.UID]string
	violations []string
}

// NewPodWatch returns a watch that has seen nothing yet.
func NewPodWatch() *PodWatch { return &PodWatch{nodeOf: map[types.UID]string{}} }

// Handler is the watch's event handler for a pod informer.
func (w *PodWatch) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.Observe(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { w.Observe(obj, time.Now()) },
	}
}

// Observe records obj, a pod, as seen at at.
func (w *PodWatch) Observe(obj any, at time.Time) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch prev, seen := w.nodeOf[pod.UID]; {
	case !seen:
		w.nodeOf[pod.UID] = pod.Spec.NodeName
		w.bindings = append(w.bindings, Binding{At: at, Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName})
	case prev != pod.Spec.NodeName:
		w.violations = append(w.violations, fmt.Sprintf("pod %s/%s moved from node %s to %s", pod.Namespace, pod.Name, prev, pod.Spec.NodeName))
		w.nodeOf[pod.UID] = pod.Spec.NodeName
	}
}

// FirstBindingAfter is the first binding seen after t, if any.
func (w *PodWatch) FirstBindingAfter(t time.Time) (Binding, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bindings {
		if b.At.After(t) {
			return b, true
		}
	}
	return Binding{}, false
}

// BindingOf is the binding of the pod namespace/name, if it was seen bound.
func (w *PodWatch) BindingOf(pod string) (Binding, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bindings {
		if b.Pod == pod {
			return b, true
		}
	}
	return Binding{}, false
}

// LastBinding is when the last binding was seen; zero if none was.
func (w *PodWatch) LastBinding() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bindings) == 0 {
		return time.Time{}
	}
	return w.bindings[len(w.bindings)-1].At
}

// Bound is how many pods were seen bound.
func (w *PodWatch) Bound() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bindings)
}

// NodeChanges are the nodeName changes seen so far.
func (w *PodWatch) NodeChanges() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}
