package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

func boundPod(name, node, cpu, memory string) corev1.Pod {
	p := testenv.Pod(namespace, name, schedulerName, cpu, memory)
	p.UID = types.UID(name)
	p.Spec.NodeName = node
	return *p
}

func TestOvercommitted(t *testing.T) {
	nodes := []corev1.Node{*testenv.Node("n1", "1", "1Gi", nil), *testenv.Node("n2", "1", "1Gi", nil)}
	pods := []corev1.Pod{
		boundPod("p1", "n1", "600m", "100Mi"),
		boundPod("p2", "n1", "500m", "100Mi"),
		boundPod("p3", "n2", "1", "1Gi"),
		boundPod("pending", "", "4", "4Gi"),
	}
	want := []string{"node n1 overcommitted: cpu 1100m requested, 1 allocatable"}
	if diff := cmp.Diff(want, overcommitted(pods, nodes)); diff != "" {
		t.Errorf("overcommitted (-want +got):\n%s", diff)
	}

	var full []corev1.Pod
	for i := range 111 {
		full = append(full, boundPod(fmt.Sprintf("p%d", i), "n2", "", ""))
	}
	want = []string{"node n2 overcommitted: pods 111 requested, 110 allocatable"}
	if diff := cmp.Diff(want, overcommitted(full, nodes)); diff != "" {
		t.Errorf("overcommitted by pod count (-want +got):\n%s", diff)
	}
}

func TestScheduledElsewhere(t *testing.T) {
	scheduled := func(pod, node string) eventsv1.Event {
		return eventsv1.Event{
			Reason:    "Scheduled",
			Regarding: corev1.ObjectReference{Namespace: namespace, Name: pod, UID: types.UID(pod)},
			Note:      "Successfully assigned " + namespace + "/" + pod + " to " + node,
		}
	}
	pods := []corev1.Pod{boundPod("p1", "n1", "", ""), boundPod("p2", "n2", "", ""), boundPod("p3", "n1", "", "")}
	events := []eventsv1.Event{
		scheduled("p1", "n1"),
		scheduled("p1", "n1"), // the same decision reported twice is fine
		scheduled("p2", "n1"),
		scheduled("p2", "n2"),
		{Reason: "FailedScheduling", Regarding: corev1.ObjectReference{Namespace: namespace, Name: "p3", UID: "p3"}, Note: "0/2 nodes are available"},
	}
	want := []string{
		`pod failover/p2 has a Scheduled event for node n1 but is bound to "n2"`,
		"pod failover/p2 has Scheduled events for nodes n1 and n2",
	}
	if diff := cmp.Diff(want, scheduledElsewhere(events, pods)); diff != "" {
		t.Errorf("scheduledElsewhere (-want +got):\n%s", diff)
	}
}

func TestPodWatch(t *testing.T) {
	w := newPodWatch()
	t0 := time.Now()
	pending := boundPod("p1", "", "", "")
	w.observe(&pending, t0)
	if w.bound() != 0 || !w.lastBinding().IsZero() {
		t.Fatalf("a pending pod counted as bound")
	}
	bound := boundPod("p1", "n1", "", "")
	w.observe(&bound, t0.Add(time.Second))
	w.observe(&bound, t0.Add(2*time.Second)) // a later update of the same binding
	other := boundPod("p2", "n2", "", "")
	w.observe(&other, t0.Add(3*time.Second))
	if w.bound() != 2 || !w.lastBinding().Equal(t0.Add(3*time.Second)) {
		t.Errorf("bound %d, last at %v; want 2, at %v", w.bound(), w.lastBinding(), t0.Add(3*time.Second))
	}
	if b, ok := w.firstBindingAfter(t0.Add(time.Second)); !ok || b.pod != "failover/p2" {
		t.Errorf("first binding after 1s = %+v, %v; want failover/p2", b, ok)
	}
	if _, ok := w.firstBindingAfter(t0.Add(3 * time.Second)); ok {
		t.Errorf("a binding found after the last one")
	}
	if changes := w.nodeChanges(); len(changes) != 0 {
		t.Errorf("node changes %v, want none", changes)
	}
	moved := boundPod("p1", "n2", "", "")
	w.observe(&moved, t0.Add(4*time.Second))
	if diff := cmp.Diff([]string{"pod failover/p1 moved from node n1 to n2"}, w.nodeChanges()); diff != "" {
		t.Errorf("node changes (-want +got):\n%s", diff)
	}
}
