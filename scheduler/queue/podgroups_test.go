package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// Tests of the queue's pod groups, ported from kube-scheduler 1.37.2's
// queue tests for pod group members (TestAddPodGroupMember and others):
// "wl" is a workload-aware profile, "plain" one that is not.

const (
	wl    = "wl"
	plain = "plain"
	ns    = "ns1"
	pg    = "pg"
)

func newWorkloadQueue(t *testing.T, clk *clocktesting.FakeClock, opts []Option, profiles ...framework.Framework) (*PriorityQueue, klog.Logger) {
	logger, ctx := ktesting.NewTestContext(t)
	opts = append([]Option{WithClock(clk), WithWorkloadAwareProfiles(func(fwk framework.Framework) bool { return fwk.ProfileName() == wl })}, opts...)
	q := New(opts...)
	for _, fwk := range profiles {
		q.SetProfile(ctx, fwk)
	}
	return q, logger
}

// newGroupQueue is newWorkloadQueue on a fake clock with one profile, the
// workload-aware wl, running PrioritySort and plugins.
func newGroupQueue(t *testing.T, opts []Option, plugins ...framework.Plugin) (*PriorityQueue, *clocktesting.FakeClock, klog.Logger) {
	clk := clocktesting.NewFakeClock(time.Now())
	q, logger := newWorkloadQueue(t, clk, opts, newProfile(t, wl, prioritySort{}, plugins...))
	return q, clk, logger
}

// queueGroup has q observe the PodGroup pg, unless initial is
// "incomplete", queues pods, and takes their group where initial says:
// "popped" (being scheduled), "backoff" (rejected by Fit once) or
// "unschedulable" (rejected by Fit, then in the pool); otherwise it stays
// queued.
func queueGroup(t *testing.T, q *PriorityQueue, logger klog.Logger, initial string, pods ...*v1.Pod) {
	t.Helper()
	if initial != "incomplete" {
		q.AddPodGroup(logger, podGroup(pg, 0))
	}
	for _, p := range pods {
		q.Add(logger, p)
	}
	switch initial {
	case "popped":
		popGroup(t, q, logger)
	case "backoff":
		// As upstream, a rejected group backs off: it does not wait in
		// the pool for an event.
		failGroup(t, q, logger, rejected(), "Fit")
	case "unschedulable":
		failGroup(t, q, logger, rejected(), "Fit")
		toPool(q, pg)
	}
}

// checkGroup compares where q holds the group pg and q's summary with
// what is wanted.
func checkGroup(t *testing.T, q *PriorityQueue, want groupState, wantSum Summary) {
	t.Helper()
	if diff := cmp.Diff(want, groupOf(q, pg)); diff != "" {
		t.Errorf("group (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSum, q.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// member returns a pod of profile named name in pod group group of ns.
func member(name, profile, group string) *st.PodWrapper {
	w := pod(name, profile).Namespace(ns).UID(name)
	w.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
	return w
}

func podGroup(name string, priority int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedulingv1beta1.PodGroupSpec{Priority: &priority},
	}
}

// groupState is where the queue holds a pod group and its pods' names in
// the group's order.
type groupState struct {
	Queue string
	Gated bool
	Pods  []string
}

func groupOf(q *PriorityQueue, name string) groupState {
	key := groupEntityKey(ns, name)
	var queue string
	var e framework.QueuedEntityInfo
	for _, pq := range q.ring {
		if e = pq.activeQ.get(key); e != nil {
			queue = activeQ
			break
		}
	}
	if e == nil {
		if e = q.backoffQ.get(key); e != nil {
			queue = backoffQ
		} else if u, ok := q.unschedulable[key]; ok {
			e, queue = u.entity, unschedulableQ
		} else {
			return groupState{}
		}
	}
	return groupState{Queue: queue, Gated: e.Gated(), Pods: podNames(e)}
}

func podNames(e framework.QueuedEntityInfo) []string {
	var names []string
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		names = append(names, pInfo.Pod.Name)
		return true
	})
	return names
}

// popGroup pops an entity that must be a pod group.
func popGroup(t *testing.T, q *PriorityQueue, logger klog.Logger) *framework.QueuedPodGroupInfo {
	t.Helper()
	e, err := q.Pop(logger)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := e.(*framework.QueuedPodGroupInfo)
	if !ok {
		t.Fatalf("popped %T %s, want a pod group", e, e.GetName())
	}
	return g
}

// failMember hands back a popped member as rejected by plugins.
func failMember(t *testing.T, q *PriorityQueue, logger klog.Logger, pInfo *framework.QueuedPodInfo, plugins ...string) {
	t.Helper()
	pInfo.UnschedulablePlugins = sets.New(plugins...)
	pInfo.PendingPlugins = sets.New[string]()
	if err := q.AddUnschedulableIfNotPresent(logger, pInfo, q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
}

// failGroup pops the group and hands it back, each pod rejected by
// plugins, its attempt ending with status.
func failGroup(t *testing.T, q *PriorityQueue, logger klog.Logger, status *framework.Status, plugins ...string) *framework.QueuedPodGroupInfo {
	t.Helper()
	g := popGroup(t, q, logger)
	g.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		failMember(t, q, logger, pInfo, plugins...)
		return true
	})
	if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), status); err != nil {
		t.Fatal(err)
	}
	return g
}

// toPool moves a group from the backoff queue to the pool, as upstream's
// tests do to start there.
func toPool(q *PriorityQueue, name string) {
	q.addUnschedulable(q.backoffQ.delete(groupEntityKey(ns, name)))
}

func rejected() *framework.Status { return framework.NewStatus(framework.Unschedulable, "no") }

func TestAddPodGroupMember(t *testing.T) {
	p1 := member("pod1", wl, pg).Obj()
	p2 := member("pod2", wl, pg).Obj()
	gatedP1 := member("pod1", wl, pg).Label("gated", "true").Obj()
	gatedP2 := member("pod2", wl, pg).Label("gated", "true").Obj()

	tests := []struct {
		name string
		// initial is the group's state before the pod comes: "" (no
		// member queued), "popped", "active", "backoff", "unschedulable",
		// or "incomplete" (no PodGroup observed).
		initial     string
		initialPods []*v1.Pod
		incoming    *v1.Pod
		want        groupState
		wantSum     Summary
	}{
		{
			name:     "first member added (ungated), creates new pod group in activeQ",
			incoming: p1,
			want:     groupState{Queue: activeQ, Pods: []string{"pod1"}},
			wantSum:  Summary{Active: 1},
		},
		{
			name:     "first member added (gated), creates new pod group directly in unschedulableEntities",
			incoming: gatedP1,
			want:     groupState{Queue: unschedulableQ, Gated: true, Pods: []string{"pod1"}},
			wantSum:  Summary{Gated: 1},
		},
		{
			name:        "matching pod group is currently in flight (last popped), pod (ungated) goes to pendingPodGroupPods",
			initial:     "popped",
			initialPods: []*v1.Pod{p1},
			incoming:    p2,
			wantSum:     Summary{InFlight: 1, PendingPodGroupPods: 1},
		},
		{
			name:        "matching pod group is currently in flight (last popped), pod (gated) goes to pendingPodGroupPods",
			initial:     "popped",
			initialPods: []*v1.Pod{p1},
			incoming:    gatedP2,
			wantSum:     Summary{InFlight: 1, PendingPodGroupPods: 1},
		},
		{
			name:        "existing pod group in activeQ (ungated addition), stays in activeQ",
			initial:     "active",
			initialPods: []*v1.Pod{p1},
			incoming:    p2,
			want:        groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Active: 2},
		},
		{
			name:        "existing pod group in activeQ (gated addition), becomes gated and moves to unschedulableEntities",
			initial:     "active",
			initialPods: []*v1.Pod{p1},
			incoming:    gatedP2,
			want:        groupState{Queue: unschedulableQ, Gated: true, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Gated: 2},
		},
		{
			name:        "existing pod group in backoffQ (ungated addition), stays in backoffQ",
			initial:     "backoff",
			initialPods: []*v1.Pod{p1},
			incoming:    p2,
			want:        groupState{Queue: backoffQ, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Backoff: 2},
		},
		{
			// Upstream gates it at once: there PreEnqueue runs when an
			// entity enters the backoff queue (SchedulerPopFromBackoffQ),
			// here when it leaves it, as for single pods.
			name:        "existing pod group in backoffQ (gated addition), stays in backoffQ until its backoff ends",
			initial:     "backoff",
			initialPods: []*v1.Pod{p1},
			incoming:    gatedP2,
			want:        groupState{Queue: backoffQ, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Backoff: 2},
		},
		{
			name:        "existing pod group in unschedulableEntities (ungated addition), stays in unschedulableEntities as ungated",
			initial:     "unschedulable",
			initialPods: []*v1.Pod{p1},
			incoming:    p2,
			want:        groupState{Queue: unschedulableQ, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Unschedulable: 2},
		},
		{
			name:        "existing pod group in unschedulableEntities (gated addition), stays in unschedulableEntities as ungated",
			initial:     "unschedulable",
			initialPods: []*v1.Pod{p1},
			incoming:    gatedP2,
			want:        groupState{Queue: unschedulableQ, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Unschedulable: 2},
		},
		{
			name:        "existing gated pod group in unschedulableEntities (ungated addition), stays in unschedulableEntities as gated",
			initialPods: []*v1.Pod{gatedP1},
			incoming:    p2,
			want:        groupState{Queue: unschedulableQ, Gated: true, Pods: []string{"pod1", "pod2"}},
			wantSum:     Summary{Gated: 2},
		},
		{
			name:     "first member added before pod group exists, goes to incompletePodGroupPods",
			initial:  "incomplete",
			incoming: p1,
			wantSum:  Summary{IncompletePodGroupPods: 1},
		},
		{
			name:        "existing pod in incompletePodGroupPods, stays in incompletePodGroupPods",
			initial:     "incomplete",
			initialPods: []*v1.Pod{p1},
			incoming:    p2,
			wantSum:     Summary{IncompletePodGroupPods: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _, logger := newGroupQueue(t, nil, gate{}, &rejector{name: "Fit", events: []framework.ClusterEventWithHint{{Event: nodeAdd}}})
			queueGroup(t, q, logger, tt.initial, tt.initialPods...)
			q.Add(logger, tt.incoming)
			checkGroup(t, q, tt.want, tt.wantSum)
		})
	}
}

func TestPopPodGroup(t *testing.T) {
	q, clk, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "")
	// Members are ordered by priority, then attempts, then time, then name.
	for _, p := range []*v1.Pod{
		member("b", wl, pg).Priority(1).Obj(),
		member("low", wl, pg).Obj(),
		member("a", wl, pg).Priority(1).Obj(),
		member("high", wl, pg).Priority(5).Obj(),
	} {
		q.Add(logger, p)
	}
	clk.Step(time.Second)
	q.Add(logger, member("late", wl, pg).Priority(5).Obj())
	cycle := q.SchedulingCycle()
	g := popGroup(t, q, logger)
	if diff := cmp.Diff([]string{"high", "late", "a", "b", "low"}, podNames(g)); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	var unscheduled []string
	for _, p := range g.UnscheduledPods {
		unscheduled = append(unscheduled, p.Name)
	}
	if diff := cmp.Diff(podNames(g), unscheduled); diff != "" {
		t.Errorf("UnscheduledPods differ from the queued pods (-queued +unscheduled):\n%s", diff)
	}
	if g.Attempts != 1 || g.QueuedPodInfos[framework.PodGroupKey(ns, pg)][0].Attempts != 1 {
		t.Errorf("attempts: group %d, first pod %d; want 1 and 1", g.Attempts, g.QueuedPodInfos[framework.PodGroupKey(ns, pg)][0].Attempts)
	}
	if got := q.SchedulingCycle(); got != cycle+1 {
		t.Errorf("scheduling cycle %d after popping a group, want %d", got, cycle+1)
	}
	if diff := cmp.Diff(Summary{InFlight: 5}, q.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// A group is sorted against single pods by the profile's QueueSort as
// upstream's PrioritySort sorts entities: by the PodGroup's priority (not
// its pods'), then by the time the group was queued.
func TestPodGroupSortedAgainstPods(t *testing.T) {
	q, clk, logger := newGroupQueue(t, nil)
	q.AddPodGroup(logger, podGroup("mid-group", 5))
	q.AddPodGroup(logger, podGroup("old-group", 0))
	q.Add(logger, member("m1", wl, "old-group").Priority(100).Obj())
	clk.Step(time.Millisecond)
	q.Add(logger, pod("zero-pod", wl).UID("zero-pod").Obj())
	clk.Step(time.Millisecond)
	q.Add(logger, member("m2", wl, "mid-group").Obj())
	q.Add(logger, pod("high-pod", wl).UID("high-pod").Priority(10).Obj())
	clk.Step(time.Millisecond)
	q.Add(logger, pod("low-pod", wl).UID("low-pod").Priority(-1).Obj())
	var got []string
	for range 5 {
		e, err := q.Pop(logger)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Type())+"/"+e.GetName())
	}
	want := []string{"pod/high-pod", "podgroup/mid-group", "podgroup/old-group", "pod/zero-pod", "pod/low-pod"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}

	// A new priority for a queued group re-sorts it.
	q, _, logger = newGroupQueue(t, nil)
	queueGroup(t, q, logger, "", member("m", wl, pg).Obj())
	q.Add(logger, pod("p", wl).UID("p").Priority(1).Obj())
	q.UpdatePodGroup(logger, podGroup(pg, 2))
	if e, _ := q.Pop(logger); e.GetName() != pg {
		t.Errorf("popped %s first, want the group whose priority went up", e.GetName())
	}
}

// A profile that is not workload-aware queues pods that name a PodGroup
// exactly as pods that do not: one by one, in the same order and places.
func TestNotWorkloadAwareProfileQueuesPodsAsToday(t *testing.T) {
	type step struct {
		What    string
		Summary Summary
	}
	run := func(withGroup bool) []step {
		clk := clocktesting.NewFakeClock(time.Now())
		q, logger := newWorkloadQueue(t, clk, nil, newProfile(t, plain, prioritySort{}, gate{},
			&rejector{name: "Fit", events: []framework.ClusterEventWithHint{{Event: nodeAdd}}}))
		q.AddPodGroup(logger, podGroup(pg, 100))
		mk := func(name string) *st.PodWrapper {
			if withGroup {
				return member(name, plain, pg)
			}
			return pod(name, plain).Namespace(ns).UID(name)
		}
		var trace []step
		record := func(what string) { trace = append(trace, step{What: what, Summary: q.Summary()}) }
		q.Add(logger, mk("a").Priority(1).Obj())
		q.Add(logger, mk("b").Priority(3).Obj())
		q.Add(logger, mk("gated").Label("gated", "true").Obj())
		clk.Step(time.Millisecond)
		q.Add(logger, mk("c").Priority(3).Obj())
		record("added")
		if q.activeEntities() == 0 {
			t.Fatal("nothing to pop")
		}
		first := popPod(t, q, logger)
		record("popped " + first.Pod.Name)
		failMember(t, q, logger, first, "Fit")
		record("failed")
		q.MoveAllToActiveOrBackoffQueue(logger, nodeAdd, nil, nil, nil)
		record("node added")
		q.Update(logger, mk("gated").Label("gated", "true").Obj(), mk("gated").Obj())
		record("ungated")
		q.Delete(logger, mk("a").Obj())
		record("deleted")
		clk.Step(2 * time.Second)
		q.flushBackoffQCompleted(logger)
		for q.Summary().Active > 0 {
			record("popped " + popPod(t, q, logger).Pod.Name)
		}
		return trace
	}
	want, got := run(false), run(true)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods with a schedulingGroup in a profile that is not workload-aware (-without +with):\n%s", diff)
	}
}

func TestDeletePodGroupMember(t *testing.T) {
	p1, p2 := member("pod1", wl, pg).Obj(), member("pod2", wl, pg).Obj()
	tests := []struct {
		name    string
		initial string
		pods    []*v1.Pod
		deleted *v1.Pod
		want    groupState
		wantSum Summary
	}{
		{
			name:    "pod deleted from a group in activeQ, the group stays with the rest",
			pods:    []*v1.Pod{p1, p2},
			deleted: p1,
			want:    groupState{Queue: activeQ, Pods: []string{"pod2"}},
			wantSum: Summary{Active: 1},
		},
		{
			name:    "last pod deleted, the group leaves the queue",
			pods:    []*v1.Pod{p1},
			deleted: p1,
		},
		{
			name:    "pod deleted from a group in backoffQ, the group stays there",
			initial: "backoff",
			pods:    []*v1.Pod{p1, p2},
			deleted: p2,
			want:    groupState{Queue: backoffQ, Pods: []string{"pod1"}},
			wantSum: Summary{Backoff: 1},
		},
		{
			name:    "pod deleted from a group in unschedulableEntities, the group stays there",
			initial: "unschedulable",
			pods:    []*v1.Pod{p1, p2},
			deleted: p2,
			want:    groupState{Queue: unschedulableQ, Pods: []string{"pod1"}},
			wantSum: Summary{Unschedulable: 1},
		},
		{
			name:    "pod deleted from pendingPodGroupPods",
			initial: "popped",
			pods:    []*v1.Pod{p1},
			deleted: p2,
			wantSum: Summary{InFlight: 1},
		},
		{
			name:    "pod deleted from incompletePodGroupPods",
			initial: "incomplete",
			pods:    []*v1.Pod{p1, p2},
			deleted: p1,
			wantSum: Summary{IncompletePodGroupPods: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _, logger := newGroupQueue(t, nil)
			queueGroup(t, q, logger, tt.initial, tt.pods...)
			if tt.initial == "popped" {
				q.Add(logger, p2)
			}
			q.Delete(logger, tt.deleted)
			checkGroup(t, q, tt.want, tt.wantSum)
		})
	}
}

func TestUpdatePodGroupMember(t *testing.T) {
	targetLabel := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel}
	tests := []struct {
		name    string
		initial string
		// gated starts the member with the gate.
		gated   bool
		update  func(*st.PodWrapper) *st.PodWrapper
		want    groupState
		wantSum Summary
	}{
		{
			name:    "member of a group in activeQ is replaced in place",
			update:  func(w *st.PodWrapper) *st.PodWrapper { return w.Label("x", "y") },
			want:    groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
			wantSum: Summary{Active: 2},
		},
		{
			name:    "an update the rejecting plugin's hint accepts moves the group out of the pool",
			initial: "unschedulable",
			update:  func(w *st.PodWrapper) *st.PodWrapper { return w.Label("x", "y") },
			want:    groupState{Queue: backoffQ, Pods: []string{"pod1", "pod2"}},
			wantSum: Summary{Backoff: 2},
		},
		{
			name:    "lifting the gate of a member ungates the group",
			gated:   true,
			update:  func(w *st.PodWrapper) *st.PodWrapper { return w },
			want:    groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
			wantSum: Summary{Active: 2},
		},
		{
			name:    "an update of a member in flight is replayed, not queued",
			initial: "popped",
			update:  func(w *st.PodWrapper) *st.PodWrapper { return w.Label("x", "y") },
			wantSum: Summary{InFlight: 2},
		},
		{
			name:    "an update of a member waiting for its PodGroup is kept there",
			initial: "incomplete",
			update:  func(w *st.PodWrapper) *st.PodWrapper { return w.Label("x", "y") },
			wantSum: Summary{IncompletePodGroupPods: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _, logger := newGroupQueue(t, nil, gate{}, &rejector{name: "Fit", events: []framework.ClusterEventWithHint{{Event: targetLabel}}})
			old := member("pod1", wl, pg)
			if tt.gated {
				old.Label("gated", "true")
			}
			queueGroup(t, q, logger, tt.initial, old.Obj(), member("pod2", wl, pg).Obj())
			updated := tt.update(member("pod1", wl, pg)).Obj()
			q.Update(logger, old.Obj(), updated)
			checkGroup(t, q, tt.want, tt.wantSum)
			switch tt.initial {
			case "popped":
				if n := q.inFlightEvents.Len(); n != 3 {
					t.Errorf("%d entries in flight, want the 2 pods and the update", n)
				}
			case "incomplete":
				if got := q.incompletePodGroupPods.get(updated).Pod; got != updated {
					t.Errorf("the member waiting for its PodGroup was not replaced")
				}
			default:
				e := q.getEntity(groupEntityKey(ns, pg)).(*framework.QueuedPodGroupInfo)
				if e.UnscheduledPods[0] != updated || e.QueuedPodInfos[framework.PodGroupKey(ns, pg)][0].Pod != updated {
					t.Errorf("the queued member was not replaced")
				}
			}
		})
	}
}

func TestActivatePodGroupMember(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	p1 := member("pod1", wl, pg).Obj()
	queueGroup(t, q, logger, "unschedulable", p1, member("pod2", wl, pg).Obj())
	orphan := member("orphan", wl, "unobserved").Obj()
	q.Add(logger, orphan)
	q.Activate(logger, map[string]*v1.Pod{"ns1/pod1": p1, "ns1/orphan": orphan})
	if diff := cmp.Diff(groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}}, groupOf(q, pg)); diff != "" {
		t.Errorf("activating a member activates its group (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Summary{Active: 2, IncompletePodGroupPods: 1}, q.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestMoveAllToActiveOrBackoffQueuePodGroupMember(t *testing.T) {
	tests := []struct {
		name      string
		rejectors map[string][]string
		event     framework.ClusterEvent
		preCheck  PreEnqueueCheck
		wait      time.Duration
		want      string
	}{
		{
			name:      "an event one member's rejecting plugin registered moves the whole group",
			rejectors: map[string][]string{"pod1": {"Other"}, "pod2": {"Fit"}},
			event:     nodeAdd,
			want:      backoffQ,
		},
		{
			name:      "after the group's backoff it goes straight to activeQ",
			rejectors: map[string][]string{"pod1": {"Fit"}, "pod2": {"Other"}},
			event:     nodeAdd,
			wait:      time.Minute,
			want:      activeQ,
		},
		{
			name:      "an event no member's plugin registered leaves it",
			rejectors: map[string][]string{"pod1": {"Fit"}, "pod2": {"Fit"}},
			event:     assignedPodDelete,
			want:      unschedulableQ,
		},
		{
			name:      "preCheck passing one member is enough",
			rejectors: map[string][]string{"pod1": {"Fit"}, "pod2": {"Fit"}},
			event:     nodeAdd,
			preCheck:  func(p *v1.Pod) bool { return p.Name == "pod2" },
			want:      backoffQ,
		},
		{
			name:      "preCheck passing no member leaves it",
			rejectors: map[string][]string{"pod1": {"Fit"}, "pod2": {"Fit"}},
			event:     nodeAdd,
			preCheck:  func(*v1.Pod) bool { return false },
			want:      unschedulableQ,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clk, logger := newGroupQueue(t, nil,
				&rejector{name: "Fit", events: []framework.ClusterEventWithHint{{Event: nodeAdd}}},
				&rejector{name: "Other", events: []framework.ClusterEventWithHint{{Event: nodeLabel}}})
			queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj(), member("pod2", wl, pg).Obj())
			g := popGroup(t, q, logger)
			g.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
				failMember(t, q, logger, pInfo, tt.rejectors[pInfo.Pod.Name]...)
				return true
			})
			if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), rejected()); err != nil {
				t.Fatal(err)
			}
			toPool(q, pg)
			clk.Step(tt.wait)
			q.MoveAllToActiveOrBackoffQueue(logger, tt.event, nil, nil, tt.preCheck)
			if got := groupOf(q, pg).Queue; got != tt.want {
				t.Errorf("group in %q, want %q", got, tt.want)
			}
		})
	}
}

// A group backs off by its own counts, its maximum backoff grown by the
// square root of its size, as upstream's calculateBackoffDuration.
func TestPodGroupBackoffDuration(t *testing.T) {
	q := New()
	tests := []struct {
		count, size int
		want        time.Duration
	}{
		{0, 4, 0},
		{1, 1, time.Second},
		{3, 1, 4 * time.Second},
		{5, 1, 10 * time.Second},
		{5, 4, 16 * time.Second},
		{6, 4, 20 * time.Second},
		{100, 4, 20 * time.Second},
		{100, 9, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := q.calculateBackoffDuration(tt.count, tt.size); got != tt.want {
			t.Errorf("calculateBackoffDuration(%d, %d) = %v, want %v", tt.count, tt.size, got, tt.want)
		}
	}
}

func TestFlushBackoffQCompletedPodGroupMember(t *testing.T) {
	q, clk, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "")
	for _, name := range []string{"pod1", "pod2", "pod3", "pod4"} {
		q.Add(logger, member(name, wl, pg).Obj())
	}
	// Five rejections: the backoff of a single pod would be capped at 10s,
	// that of a group of 4 at 20s; 2^4 = 16s.
	for i := range 5 {
		failGroup(t, q, logger, rejected(), "Fit")
		if i < 4 {
			clk.Step(time.Minute)
			q.flushBackoffQCompleted(logger)
		}
	}
	clk.Step(15 * time.Second)
	q.flushBackoffQCompleted(logger)
	if got := groupOf(q, pg).Queue; got != backoffQ {
		t.Fatalf("group in %q 15s after its fifth rejection, want it backing off", got)
	}
	clk.Step(2 * time.Second)
	q.flushBackoffQCompleted(logger)
	if got := groupOf(q, pg).Queue; got != activeQ {
		t.Errorf("group in %q 17s after its fifth rejection, want active", got)
	}
}

func TestFlushUnschedulablePodsLeftoverPodGroupMember(t *testing.T) {
	q, clk, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "unschedulable", member("pod1", wl, pg).Obj())
	clk.Step(DefaultPodMaxInUnschedulablePodsDuration - time.Second)
	q.flushUnschedulablePodsLeftover(logger)
	if got := groupOf(q, pg).Queue; got != unschedulableQ {
		t.Fatalf("group in %q before 5 minutes, want %q", got, unschedulableQ)
	}
	clk.Step(2 * time.Second)
	q.flushUnschedulablePodsLeftover(logger)
	if got := groupOf(q, pg).Queue; got != activeQ {
		t.Errorf("group in %q after 5 minutes, want %q", got, activeQ)
	}
}

func TestAddUnschedulableIfNotPresentPodGroupMember(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj(), member("pod2", wl, pg).Obj())
	g := popGroup(t, q, logger)
	pInfos := g.QueuedPodInfos[framework.PodGroupKey(ns, pg)]

	// While its group is being scheduled, a failed member waits for it.
	failMember(t, q, logger, pInfos[0], "Fit")
	if diff := cmp.Diff(Summary{InFlight: 1, PendingPodGroupPods: 1}, q.Summary()); diff != "" {
		t.Errorf("member handed back during its group's attempt (-want +got):\n%s", diff)
	}
	if !pInfos[0].BackoffExpiration.IsZero() {
		t.Errorf("a member got its own backoff: %v", pInfos[0].BackoffExpiration)
	}
	if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), framework.NewStatus(framework.Success)); err != nil {
		t.Fatal(err)
	}
	// Once the attempt ended, a member handed back (its binding failed)
	// rejoins its queued group.
	failMember(t, q, logger, pInfos[1])
	checkGroup(t, q, groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}}, Summary{Active: 2})
}

func TestAddAttemptedPodGroupIfNeeded(t *testing.T) {
	tests := []struct {
		name string
		// pending are the pods waiting for the group, with their rejecting plugins.
		pending                map[string][]string
		disableBackoff         bool
		blockOnPreEnqueue      bool
		initialErrors          int
		status                 *framework.Status
		wantUnschedulableCount int
		wantConsecutiveErrors  int
		want                   groupState
		wantPreservedTimestamp bool
	}{
		{
			name: "No pending pods, pod group is not enqueued",
		},
		{
			name:                  "Pods present, pod group scheduling had an error, and pod group not backing off",
			pending:               map[string][]string{"pod1": nil, "pod2": nil},
			status:                framework.NewStatus(framework.Error),
			disableBackoff:        true,
			wantConsecutiveErrors: 1,
			want:                  groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
		},
		{
			name:                   "Pods present, pod group scheduling result is unschedulable, and pod group not backing off",
			pending:                map[string][]string{"pod1": {"Fit"}, "pod2": nil},
			initialErrors:          5,
			status:                 rejected(),
			disableBackoff:         true,
			wantUnschedulableCount: 1,
			want:                   groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
		},
		{
			name:                   "Pods present, pod group scheduling result is unschedulable, and pod group not backing off, but blocked on PreEnqueue",
			pending:                map[string][]string{"pod1": {"Fit"}, "pod2": nil},
			status:                 rejected(),
			disableBackoff:         true,
			blockOnPreEnqueue:      true,
			wantUnschedulableCount: 1,
			want:                   groupState{Queue: unschedulableQ, Gated: true, Pods: []string{"pod1", "pod2"}},
		},
		{
			name:                  "Pods present, pod group scheduling result is Error, and pod group backing off",
			pending:               map[string][]string{"pod1": nil, "pod2": nil},
			status:                framework.NewStatus(framework.Error),
			wantConsecutiveErrors: 1,
			want:                  groupState{Queue: backoffQ, Pods: []string{"pod1", "pod2"}},
		},
		{
			name:                   "Pods present, pod group scheduling result is Unschedulable, and pod group backing off",
			pending:                map[string][]string{"pod1": {"Fit"}, "pod2": nil},
			initialErrors:          5,
			status:                 rejected(),
			wantUnschedulableCount: 1,
			want:                   groupState{Queue: backoffQ, Pods: []string{"pod1", "pod2"}},
		},
		{
			name:                   "Unschedulable pods are present but pod group scheduling was successful, requeue to active queue directly and preserve timestamp",
			pending:                map[string][]string{"pod1": {"Fit"}, "pod2": nil},
			want:                   groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}},
			wantPreservedTimestamp: true,
		},
		{
			name:    "New pods only are present and pod group scheduling was successful, requeue to active queue directly with new timestamp",
			pending: map[string][]string{"pod2": nil},
			want:    groupState{Queue: activeQ, Pods: []string{"pod2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.disableBackoff {
				opts = append(opts, WithPodInitialBackoffDuration(0), WithPodMaxBackoffDuration(0))
			}
			plugins := []framework.Plugin{&rejector{name: "Fit"}}
			if tt.blockOnPreEnqueue {
				plugins = append(plugins, gate{})
			}
			q, clk, logger := newGroupQueue(t, opts, plugins...)
			queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj())
			g := popGroup(t, q, logger)
			g.ConsecutiveErrorsCount = tt.initialErrors
			start := g.Timestamp
			for _, name := range []string{"pod1", "pod2"} {
				plugins, ok := tt.pending[name]
				if !ok {
					continue
				}
				w := member(name, wl, pg)
				if tt.blockOnPreEnqueue {
					w.Label("gated", "true")
				}
				pInfo := q.newQueuedPodInfo(logger, w.Obj())
				pInfo.UnschedulablePlugins.Insert(plugins...)
				q.pendingPodGroupPods.add(pInfo)
			}
			clk.Step(time.Second)
			if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), tt.status); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, groupOf(q, pg)); diff != "" {
				t.Fatalf("group (-want +got):\n%s", diff)
			}
			if tt.want.Queue == "" {
				return
			}
			got := q.getEntity(groupEntityKey(ns, pg)).(*framework.QueuedPodGroupInfo)
			if got.UnschedulableCount != tt.wantUnschedulableCount || got.ConsecutiveErrorsCount != tt.wantConsecutiveErrors {
				t.Errorf("counts: unschedulable %d, errors %d; want %d, %d", got.UnschedulableCount, got.ConsecutiveErrorsCount, tt.wantUnschedulableCount, tt.wantConsecutiveErrors)
			}
			wantTimestamp := clk.Now()
			if tt.wantPreservedTimestamp {
				wantTimestamp = start
			}
			if !got.Timestamp.Equal(wantTimestamp) {
				t.Errorf("timestamp %v, want %v", got.Timestamp, wantTimestamp)
			}
			if got.Attempts != 1 {
				t.Errorf("the requeued group has %d attempts, want the popped group's 1", got.Attempts)
			}
		})
	}
}

func TestAddAttemptedPodGroupIfNeededTwice(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj())
	g := popGroup(t, q, logger)
	failMember(t, q, logger, g.QueuedPodInfos[framework.PodGroupKey(ns, pg)][0], "Fit")
	if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), rejected()); err != nil {
		t.Fatal(err)
	}
	if err := q.AddAttemptedPodGroupIfNeeded(logger, g, q.SchedulingCycle(), rejected()); err == nil {
		t.Error("a group handed back twice was accepted twice")
	}
}

func TestAddPodGroup(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	q.Add(logger, member("pod1", wl, pg).Obj())
	q.Add(logger, member("pod2", wl, pg).Obj())
	q.Add(logger, member("other", wl, "other-pg").Obj())
	if diff := cmp.Diff(Summary{IncompletePodGroupPods: 3}, q.Summary()); diff != "" {
		t.Fatalf("members before their PodGroup (-want +got):\n%s", diff)
	}
	q.AddPodGroup(logger, podGroup(pg, 0))
	checkGroup(t, q, groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}}, Summary{Active: 2, IncompletePodGroupPods: 1})
}

func TestUpdatePodGroup(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj())
	newer := podGroup(pg, 7)
	q.UpdatePodGroup(logger, newer)
	if got := popGroup(t, q, logger).PodGroup; got != newer {
		t.Errorf("popped group has PodGroup %v, want the updated one", got)
	}
	// A member that arrives later is grouped with the latest PodGroup.
	newest := podGroup(pg, 8)
	q.UpdatePodGroup(logger, newest)
	q.Add(logger, member("pod2", wl, "pg").Obj())
	if err := q.AddAttemptedPodGroupIfNeeded(logger, &framework.QueuedPodGroupInfo{PodGroupInfo: &framework.PodGroupInfo{Namespace: ns, Name: pg}}, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := popGroup(t, q, logger).PodGroup; got != newest {
		t.Errorf("requeued group has PodGroup %v, want the latest", got)
	}
}

func TestDeletePodGroup(t *testing.T) {
	tests := []struct {
		name    string
		initial string
		wantSum Summary
		// wantBack is the summary once the PodGroup is back.
		wantBack Summary
	}{
		{
			name:     "queued group: its pods wait for the PodGroup again",
			wantSum:  Summary{IncompletePodGroupPods: 2},
			wantBack: Summary{Active: 2},
		},
		{
			name:     "group in the pool",
			initial:  "unschedulable",
			wantSum:  Summary{IncompletePodGroupPods: 2},
			wantBack: Summary{Active: 2},
		},
		{
			name:     "group being scheduled: its pending pods wait for the PodGroup",
			initial:  "popped",
			wantSum:  Summary{InFlight: 2, IncompletePodGroupPods: 1},
			wantBack: Summary{InFlight: 2, PendingPodGroupPods: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _, logger := newGroupQueue(t, nil)
			queueGroup(t, q, logger, tt.initial, member("pod1", wl, pg).Obj(), member("pod2", wl, pg).Obj())
			if tt.initial == "popped" {
				q.Add(logger, member("pod3", wl, pg).Obj())
			}
			group := podGroup(pg, 0)
			q.DeletePodGroup(logger, group)
			checkGroup(t, q, groupState{}, tt.wantSum)
			// The PodGroup coming back queues them again (or has them
			// wait for the attempt still running).
			q.AddPodGroup(logger, group)
			if diff := cmp.Diff(tt.wantBack, q.Summary()); diff != "" {
				t.Errorf("after the PodGroup came back (-want +got):\n%s", diff)
			}
		})
	}
}

// A profile that becomes workload-aware has its queued pods grouped, and
// one that stops being so has its groups' pods queued one by one.
func TestWorkloadAwarenessChanges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	logger, ctx := ktesting.NewTestContext(t)
	aware := false
	q := New(WithClock(clk), WithWorkloadAwareProfiles(func(framework.Framework) bool { return aware }))
	q.SetProfile(ctx, newProfile(t, wl, prioritySort{}))
	q.AddPodGroup(logger, podGroup(pg, 0))
	q.Add(logger, member("pod1", wl, pg).Obj())
	q.Add(logger, member("pod2", wl, pg).Obj())
	q.Add(logger, pod("single", wl).UID("single").Obj())
	if got := groupOf(q, pg).Queue; got != "" {
		t.Fatalf("a profile that is not workload-aware queued a group (%s)", got)
	}
	aware = true
	q.SetProfile(ctx, newProfile(t, wl, prioritySort{}))
	if diff := cmp.Diff(groupState{Queue: activeQ, Pods: []string{"pod1", "pod2"}}, groupOf(q, pg)); diff != "" {
		t.Errorf("after the profile became workload-aware (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Summary{Active: 3}, q.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	aware = false
	q.SetProfile(ctx, newProfile(t, wl, prioritySort{}))
	if got := groupOf(q, pg).Queue; got != "" {
		t.Errorf("the group stayed (%s) after the profile stopped being workload-aware", got)
	}
	if diff := cmp.Diff([]string{"pod1", "pod2", "single"}, sets.List(sets.New(popAll(t, q, logger, 3)...))); diff != "" {
		t.Errorf("pods popped one by one (-want +got):\n%s", diff)
	}
}

func TestRemoveProfileWithPodGroups(t *testing.T) {
	q, _, logger := newGroupQueue(t, nil)
	queueGroup(t, q, logger, "", member("pod1", wl, pg).Obj())
	q.Add(logger, member("waiting", wl, "unobserved").Obj())
	q.RemoveProfile(logger, wl)
	if diff := cmp.Diff(Summary{}, q.Summary()); diff != "" {
		t.Errorf("after the profile went (-want +got):\n%s", diff)
	}
}
