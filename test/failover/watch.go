package main

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// binding is a pod seen bound by the harness's watch, and when.
type binding struct {
	at   time.Time
	pod  string
	node string
}

// podWatch follows the benchmark's pods: when each was seen bound, and
// every change of a nodeName once set, which the API server should make
// impossible and which would mean a pod was bound twice.
type podWatch struct {
	mu         sync.Mutex
	bindings   []binding
	nodeOf     map[types.UID]string
	violations []string
}

func newPodWatch() *podWatch { return &podWatch{nodeOf: map[types.UID]string{}} }

// handler is the watch's event handler for a pod informer.
func (w *podWatch) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj, time.Now()) },
		UpdateFunc: func(_, obj any) { w.observe(obj, time.Now()) },
	}
}

func (w *podWatch) observe(obj any, at time.Time) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch prev, seen := w.nodeOf[pod.UID]; {
	case !seen:
		w.nodeOf[pod.UID] = pod.Spec.NodeName
		w.bindings = append(w.bindings, binding{at: at, pod: pod.Namespace + "/" + pod.Name, node: pod.Spec.NodeName})
	case prev != pod.Spec.NodeName:
		w.violations = append(w.violations, fmt.Sprintf("pod %s/%s moved from node %s to %s", pod.Namespace, pod.Name, prev, pod.Spec.NodeName))
		w.nodeOf[pod.UID] = pod.Spec.NodeName
	}
}

// firstBindingAfter is the first binding seen after t, if any.
func (w *podWatch) firstBindingAfter(t time.Time) (binding, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bindings {
		if b.at.After(t) {
			return b, true
		}
	}
	return binding{}, false
}

// lastBinding is when the last binding was seen; zero if none was.
func (w *podWatch) lastBinding() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bindings) == 0 {
		return time.Time{}
	}
	return w.bindings[len(w.bindings)-1].at
}

// bound is how many pods were seen bound.
func (w *podWatch) bound() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bindings)
}

// nodeChanges are the nodeName changes seen so far.
func (w *podWatch) nodeChanges() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}
