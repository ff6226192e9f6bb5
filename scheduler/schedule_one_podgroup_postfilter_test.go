package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// fakePodGroupPostFilter is upstream's fakePodGroupPlugin at
// PodGroupPostFilter: it records its calls and answers status, nominating
// each unscheduled pod named in nominations.
type fakePodGroupPostFilter struct {
	status      *framework.Status
	nominations map[string]*framework.NominatingInfo

	mu    sync.Mutex
	calls int
	// placed is what the group's algorithm placed when the plugin ran it.
	placed []string
}

func (*fakePodGroupPostFilter) Name() string { return "FakePodGroupPostFilter" }

func (f *fakePodGroupPostFilter) PodGroupPostFilter(ctx context.Context, _ framework.PodGroupCycleState, pgInfo *framework.PodGroupInfo, pgSchedulingFunc framework.PodGroupSchedulingFunc) (*framework.PodGroupPostFilterResult, *framework.Status) {
	assignments, _ := pgSchedulingFunc(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.placed = nil
	for _, a := range assignments.ProposedAssignments {
		f.placed = append(f.placed, a.GetPod().Name+"@"+a.GetNodeName())
	}
	if f.nominations == nil {
		return nil, f.status
	}
	n := make(map[types.NamespacedName]*framework.NominatingInfo)
	for _, pod := range pgInfo.GetUnscheduledPods() {
		n[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = f.nominations[pod.Name]
	}
	return &framework.PodGroupPostFilterResult{NominatingInfos: n}, f.status
}

func (f *fakePodGroupPostFilter) called() (int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.placed
}

// gangOf returns PodGroup pg with minCount n and its n pods p0...
func gangOf(pg string, n int) []k8sruntime.Object {
	objs := []k8sruntime.Object{st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name(pg).MinCount(int32(n)).Obj()}
	for i := range n {
		objs = append(objs, gangPod(fmt.Sprintf("p%d", i), pg))
	}
	return objs
}

func nominatedNode(t *testing.T, cs *fake.Clientset, pod string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status.NominatedNodeName
}

// TestPodGroupCycle_PodGroupPostFilter is upstream's: a gang that does
// not fit runs the profile's PodGroupPostFilter plugins, which run the
// group's algorithm again; a profile without any does not.
func TestPodGroupCycle_PodGroupPostFilter(t *testing.T) {
	t.Run("runs pod group post filter when the profile has a PodGroupPostFilter plugin", func(t *testing.T) {
		pl := &fakePodGroupPostFilter{status: framework.NewStatus(framework.Unschedulable, "fake podgroup postfilter failure")}
		_, cs := startWorkloadLoop(t, 1, pl)
		createAll(t, cs, gangOf("pg", 2)...)
		poll(t, "PodGroupPostFilter to run", func() bool { n, _ := pl.called(); return n > 0 })
		// The algorithm placed the first pod and found no node for the second.
		if _, placed := pl.called(); !cmp.Equal(placed, []string{"p0@node-0"}) {
			t.Errorf("the group's algorithm run by the plugin placed %v, want [p0@node-0]", placed)
		}
		want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable,
			Message: "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, fake podgroup postfilter failure"}
		poll(t, "the PodGroup to carry the plugin's reason", func() bool { return cmp.Equal(want, initiallyScheduled(t, cs, "pg")) })
	})

	t.Run("does not run pod group post filter when the profile has no PodGroupPostFilter plugin", func(t *testing.T) {
		_, cs := startWorkloadLoop(t, 1)
		createAll(t, cs, gangOf("pg", 2)...)
		want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable,
			// As upstream, the empty answer of no plugin is appended too.
			Message: "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, "}
		poll(t, "the PodGroup to say it is unschedulable", func() bool { return cmp.Equal(want, initiallyScheduled(t, cs, "pg")) })
	})
}

// TestPodGroupCycle_NominatedNodes is upstream's: the nominations a
// successful PodGroupPostFilter returns reach the group's pods, and a pod
// it does not nominate stays without one; the group waits on preemption.
func TestPodGroupCycle_NominatedNodes(t *testing.T) {
	pl := &fakePodGroupPostFilter{
		status:      framework.NewStatus(framework.Success, "fake preemption"),
		nominations: map[string]*framework.NominatingInfo{"p0": {NominatingMode: framework.ModeOverride, NominatedNodeName: "node-0"}},
	}
	_, cs := startWorkloadLoop(t, 1, pl)
	createAll(t, cs, gangOf("pg", 2)...)
	poll(t, "p0 to be nominated to node-0", func() bool { return nominatedNode(t, cs, "p0") == "node-0" })
	if got := nominatedNode(t, cs, "p1"); got != "" {
		t.Errorf("p1 was nominated to %q, want none", got)
	}
	want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable,
		Message: "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining, fake preemption"}
	poll(t, "the PodGroup to wait on preemption", func() bool { return cmp.Equal(want, initiallyScheduled(t, cs, "pg")) })
	if diff := cmp.Diff(map[string]string{"p0": "", "p1": ""}, boundNodes(cs, "p0", "p1")); diff != "" {
		t.Errorf("pods of a group waiting on preemption were bound (-want +got):\n%s", diff)
	}
}
