package outage

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

const namespace = "outage"

func boundPod(name, node, cpu, memory string) corev1.Pod {
	p := testenv.Pod(namespace, name, "some-scheduler", cpu, memory)
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
	if diff := cmp.Diff(want, Overcommitted(pods, nodes)); diff != "" {
		t.Errorf("overcommitted (-want +got):\n%s", diff)
	}

	var full []corev1.Pod
	for i := range 111 {
		full = append(full, boundPod(fmt.Sprintf("p%d", i), "n2", "", ""))
	}
	want = []string{"node n2 overcommitted: pods 111 requested, 110 allocatable"}
	if diff := cmp.Diff(want, Overcommitted(full, nodes)); diff != "" {
		t.Errorf("overcommitted by pod count (-want +got):\n%s", diff)
	}

	// An init container's request counts when it is the larger: the pod
	// needs it to start.
	withInit := boundPod("init", "n1", "100m", "100Mi")
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}}}
	want = []string{"node n1 overcommitted: cpu 2 requested, 1 allocatable"}
	if diff := cmp.Diff(want, Overcommitted([]corev1.Pod{withInit}, nodes)); diff != "" {
		t.Errorf("overcommitted by an init container (-want +got):\n%s", diff)
	}
}

func TestUnaccounted(t *testing.T) {
	pending := func(name string, conditions ...corev1.PodCondition) corev1.Pod {
		p := boundPod(name, "", "", "")
		p.Status.Conditions = conditions
		return p
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient cpu."}
	pods := []corev1.Pod{
		boundPod("bound", "n1", "", ""),
		pending("unschedulable", unschedulable),
		pending("never-seen"),
		pending("no-message", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}),
		pending("scheduled-but-unbound", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}),
	}
	want := []string{
		"pod outage/never-seen is not bound and has no PodScheduled condition",
		`pod outage/no-message is not bound and its PodScheduled condition gives no reason: PodScheduled=False "Unschedulable" ""`,
		`pod outage/scheduled-but-unbound is not bound and its PodScheduled condition gives no reason: PodScheduled=True "" ""`,
	}
	if diff := cmp.Diff(want, Unaccounted(pods)); diff != "" {
		t.Errorf("Unaccounted (-want +got):\n%s", diff)
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
		`pod outage/p2 has a Scheduled event for node n1 but is bound to "n2"`,
		"pod outage/p2 has Scheduled events for nodes n1 and n2",
	}
	if diff := cmp.Diff(want, ScheduledElsewhere(events, pods)); diff != "" {
		t.Errorf("scheduledElsewhere (-want +got):\n%s", diff)
	}
}

func TestPodWatch(t *testing.T) {
	w := NewPodWatch()
	t0 := time.Now()
	pending := boundPod("p1", "", "", "")
	w.Observe(&pending, t0)
	if w.Bound() != 0 || !w.LastBinding().IsZero() {
		t.Fatalf("a pending pod counted as bound")
	}
	bound := boundPod("p1", "n1", "", "")
	w.Observe(&bound, t0.Add(time.Second))
	w.Observe(&bound, t0.Add(2*time.Second)) // a later update of the same binding
	other := boundPod("p2", "n2", "", "")
	w.Observe(&other, t0.Add(3*time.Second))
	if w.Bound() != 2 || !w.LastBinding().Equal(t0.Add(3*time.Second)) {
		t.Errorf("bound %d, last at %v; want 2, at %v", w.Bound(), w.LastBinding(), t0.Add(3*time.Second))
	}
	if b, ok := w.FirstBindingAfter(t0.Add(time.Second)); !ok || b.Pod != "outage/p2" {
		t.Errorf("first binding after 1s = %+v, %v; want outage/p2", b, ok)
	}
	if _, ok := w.FirstBindingAfter(t0.Add(3 * time.Second)); ok {
		t.Errorf("a binding found after the last one")
	}
	if changes := w.NodeChanges(); len(changes) != 0 {
		t.Errorf("node changes %v, want none", changes)
	}
	moved := boundPod("p1", "n2", "", "")
	w.Observe(&moved, t0.Add(4*time.Second))
	if diff := cmp.Diff([]string{"pod outage/p1 moved from node n1 to n2"}, w.NodeChanges()); diff != "" {
		t.Errorf("node changes (-want +got):\n%s", diff)
	}
}
