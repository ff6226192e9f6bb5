package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// podGroupFixture is the reconciler on a fake API server, its members in an
// informer that is never started: the test puts them in its store.
type podGroupFixture struct {
	r        *PodGroupReconciler
	client   client.Client
	recorder *events.FakeRecorder
	patches  int
}

func newPodGroupFixture(t *testing.T, pg *podgroupv1alpha1.PodGroup, pods ...*corev1.Pod) *podGroupFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(podgroupv1alpha1.AddToScheme(scheme))
	f := &podGroupFixture{recorder: events.NewFakeRecorder(10)}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(pg).
		WithStatusSubresource(&podgroupv1alpha1.PodGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				f.patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	members := NewPodGroupMemberInformer(kubefake.NewClientset())
	for _, pod := range pods {
		if err := members.GetIndexer().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	f.r = NewPodGroupReconciler(f.client, members, f.recorder)
	return f
}

func (f *podGroupFixture) reconcile(t *testing.T, key types.NamespacedName) *podgroupv1alpha1.PodGroup {
	t.Helper()
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	pg := &podgroupv1alpha1.PodGroup{}
	if err := f.client.Get(context.Background(), key, pg); err != nil {
		t.Fatal(err)
	}
	return pg
}

// events drains the events recorded so far.
func (f *podGroupFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var gangKey = types.NamespacedName{Namespace: "ns", Name: "gang"}

func podGroup(minMember int32, phase podgroupv1alpha1.PodGroupPhase) *podgroupv1alpha1.PodGroup {
	return &podgroupv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: gangKey.Namespace, Name: gangKey.Name, Generation: 2},
		Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: minMember},
		Status:     podgroupv1alpha1.PodGroupStatus{Phase: phase},
	}
}

// gangMember is member name of the group gang in namespace ns, in phase, on
// node ("" when not bound), owned by the Job train.
func gangMember(ns, name string, phase corev1.PodPhase, node string) *corev1.Pod {
	pod := st.MakePod().Namespace(ns).Name(name).UID(ns+"-"+name).Label(podgroupv1alpha1.PodGroupLabel, "gang").Node(node).Obj()
	pod.Status.Phase = phase
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job"}}
	return pod
}

func gangMembers(phase corev1.PodPhase, node string, names ...string) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, name := range names {
		pods = append(pods, gangMember("ns", name, phase, node))
	}
	return pods
}

// statusCounts is the part of a PodGroup's status a phase test checks.
type statusCounts struct {
	Phase                                          podgroupv1alpha1.PodGroupPhase
	OccupiedBy                                     string
	Scheduled, Waiting, Running, Succeeded, Failed int32
}

func countsOf(s podgroupv1alpha1.PodGroupStatus) statusCounts {
	return statusCounts{s.Phase, s.OccupiedBy, s.Scheduled, s.Waiting, s.Running, s.Succeeded, s.Failed}
}

func TestPodGroupPhases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase podgroupv1alpha1.PodGroupPhase
		pods  []*corev1.Pod
		want  statusCounts
	}{
		{
			name: "a new group with too few members is Pending",
			pods: gangMembers(corev1.PodPending, "", "w-0", "w-1"),
			want: statusCounts{Phase: podgroupv1alpha1.PodGroupPending},
		},
		{
			name: "a new group with minMember members is Scheduling, occupied by their owner",
			pods: gangMembers(corev1.PodPending, "", "w-0", "w-1", "w-2"),
			want: statusCounts{Phase: podgroupv1alpha1.PodGroupScheduling, OccupiedBy: "ns/train"},
		},
		{
			name:  "bound but not running members are still Scheduling",
			phase: podgroupv1alpha1.PodGroupScheduling,
			pods:  gangMembers(corev1.PodPending, "node-1", "w-0", "w-1", "w-2"),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupScheduling, Scheduled: 3},
		},
		{
			name:  "minMember running is Running",
			phase: podgroupv1alpha1.PodGroupScheduling,
			pods:  append(gangMembers(corev1.PodRunning, "node-1", "w-0", "w-1"), gangMembers(corev1.PodSucceeded, "node-1", "w-2")...),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupRunning, Scheduled: 3, Running: 2, Succeeded: 1},
		},
		{
			name:  "a failure once minMember ran is Failed",
			phase: podgroupv1alpha1.PodGroupRunning,
			pods:  append(gangMembers(corev1.PodRunning, "node-1", "w-0", "w-1"), gangMembers(corev1.PodFailed, "node-1", "w-2")...),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupFailed, Scheduled: 3, Running: 2, Failed: 1},
		},
		{
			name:  "minMember succeeded is Finished",
			phase: podgroupv1alpha1.PodGroupRunning,
			pods:  gangMembers(corev1.PodSucceeded, "node-1", "w-0", "w-1", "w-2"),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupFinished, Scheduled: 3, Succeeded: 3},
		},
		{
			name:  "a running group that lost members is Pending again",
			phase: podgroupv1alpha1.PodGroupRunning,
			pods:  gangMembers(corev1.PodRunning, "node-1", "w-0", "w-1"),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupPending, Scheduled: 2, Running: 2},
		},
		{
			name:  "Finished is final",
			phase: podgroupv1alpha1.PodGroupFinished,
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupFinished},
		},
		{
			name:  "Failed is final",
			phase: podgroupv1alpha1.PodGroupFailed,
			pods:  gangMembers(corev1.PodRunning, "node-1", "w-0", "w-1", "w-2"),
			want:  statusCounts{Phase: podgroupv1alpha1.PodGroupFailed},
		},
		{
			name: "members of a group of the same name in another namespace do not count",
			pods: append(gangMembers(corev1.PodPending, "", "w-0", "w-1"),
				gangMember("other", "w-0", corev1.PodRunning, "node-1"), gangMember("other", "w-1", corev1.PodRunning, "node-1")),
			want: statusCounts{Phase: podgroupv1alpha1.PodGroupPending},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPodGroupFixture(t, podGroup(3, tc.phase), tc.pods...)
			got := f.reconcile(t, gangKey)
			if diff := cmp.Diff(tc.want, countsOf(got.Status)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodGroupOccupiedBySortsOwners(t *testing.T) {
	pod := gangMember("ns", "w-0", corev1.PodPending, "")
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "train-b"}, {Kind: "Job", Name: "train-a"}}
	f := newPodGroupFixture(t, podGroup(1, ""), pod)
	if got, want := f.reconcile(t, gangKey).Status.OccupiedBy, "ns/train-a,ns/train-b"; got != want {
		t.Errorf("occupiedBy = %q, want %q", got, want)
	}
}

func TestPodGroupWritesOnlyChanges(t *testing.T) {
	f := newPodGroupFixture(t, podGroup(3, ""), gangMembers(corev1.PodRunning, "node-1", "w-0", "w-1", "w-2")...)
	pg := f.reconcile(t, gangKey)
	if pg.Status.Phase != podgroupv1alpha1.PodGroupRunning || f.patches != 1 {
		t.Fatalf("phase %q after %d writes, want Running after 1", pg.Status.Phase, f.patches)
	}
	f.reconcile(t, gangKey)
	if f.patches != 1 {
		t.Errorf("%d writes of an unchanged status, want none", f.patches-1)
	}
	c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled)
	want := &metav1.Condition{
		Type: podgroupv1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue, Reason: podgroupv1alpha1.ReasonQuorumReached,
		Message: "3 members bound, of 3 needed together", ObservedGeneration: 2,
	}
	if diff := cmp.Diff(want, c, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("Scheduled condition (-want +got):\n%s", diff)
	}
}

func TestPodGroupWaitingMembers(t *testing.T) {
	pods := gangMembers(corev1.PodPending, "", "w-0", "w-1", "w-2")
	f := newPodGroupFixture(t, podGroup(3, ""), pods...)
	before := time.Now().Truncate(time.Second)
	f.r.PodWaiting("gangs", heldBy(pods[0], coscheduling.Name))
	f.r.PodWaiting("gangs", heldBy(pods[1], coscheduling.Name))
	pg := f.reconcile(t, gangKey)
	if pg.Status.Waiting != 2 {
		t.Errorf("waiting = %d, want 2", pg.Status.Waiting)
	}
	start := pg.Status.ScheduleStartTime
	if start.Before(&metav1.Time{Time: before}) || start.After(time.Now()) {
		t.Errorf("scheduleStartTime = %v, want the first hold, after %v", start, before)
	}

	// Both leave, and the record of the group goes with them; a member
	// held a second later does not move the start.
	for _, pod := range pods[:2] {
		f.r.PodResolved("gangs", pod, framework.PermitRejected, framework.NewStatus(framework.Unschedulable, "rejection in Unreserve").WithPlugin(coscheduling.Name))
	}
	if pg = f.reconcile(t, gangKey); pg.Status.Waiting != 0 {
		t.Errorf("waiting = %d after both left, want 0", pg.Status.Waiting)
	}
	time.Sleep(time.Second)
	f.r.PodWaiting("gangs", heldBy(pods[2], coscheduling.Name))
	pg = f.reconcile(t, gangKey)
	if pg.Status.Waiting != 1 {
		t.Errorf("waiting = %d, want 1", pg.Status.Waiting)
	}
	if !pg.Status.ScheduleStartTime.Equal(&start) {
		t.Errorf("scheduleStartTime moved from %v to %v; it is set once", start, pg.Status.ScheduleStartTime)
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled); c != nil {
		t.Errorf("Scheduled condition %+v before a timeout or a quorum", c)
	}
}

func heldBy(pod *corev1.Pod, plugins ...string) *fakeWaitingPod {
	return &fakeWaitingPod{pod: pod, pending: plugins}
}

func timedOutAt(plugin string) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, "rejected due to timeout after waiting 30s at plugin "+plugin).WithPlugin(plugin)
}

func TestPodGroupTimeout(t *testing.T) {
	pods := gangMembers(corev1.PodPending, "", "worker-0", "worker-1", "worker-2", "worker-3")
	f := newPodGroupFixture(t, podGroup(4, podgroupv1alpha1.PodGroupScheduling), pods...)
	for _, pod := range pods[:3] {
		f.r.PodWaiting("gangs", heldBy(pod, coscheduling.Name))
	}
	f.reconcile(t, gangKey)

	// Two members' timers fire together; the first one's Unreserve
	// rejects the third.
	f.r.PodResolved("gangs", pods[1], framework.PermitTimedOut, timedOutAt(coscheduling.Name))
	f.r.PodResolved("gangs", pods[0], framework.PermitTimedOut, timedOutAt(coscheduling.Name))
	f.r.PodResolved("gangs", pods[2], framework.PermitRejected, framework.NewStatus(framework.Unschedulable, "rejection in Unreserve").WithPlugin(coscheduling.Name))
	pg := f.reconcile(t, gangKey)
	f.reconcile(t, gangKey)

	want := &metav1.Condition{
		Type: podgroupv1alpha1.PodGroupScheduled, Status: metav1.ConditionFalse, Reason: podgroupv1alpha1.ReasonTimeout, ObservedGeneration: 2,
		Message: "timed out after waiting for 4 members: 3 held (worker-0, worker-1, worker-2), missing worker-3 (not placed)",
	}
	if diff := cmp.Diff(want, meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled), cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("Scheduled condition (-want +got):\n%s", diff)
	}
	if pg.Status.Waiting != 0 {
		t.Errorf("waiting = %d after the gang was released, want 0", pg.Status.Waiting)
	}
	if diff := cmp.Diff([]string{"Warning Timeout " + want.Message}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The gang comes back, all four this time, and is bound.
	for _, pod := range pods[:3] {
		f.r.PodWaiting("gangs", heldBy(pod, coscheduling.Name))
	}
	for _, pod := range pods[:3] {
		f.r.PodResolved("gangs", pod, framework.PermitAllowed, nil)
	}
	for _, pod := range pods {
		bound := pod.DeepCopy()
		bound.Spec.NodeName = "node-1"
		if err := f.r.members.GetIndexer().Update(bound); err != nil {
			t.Fatal(err)
		}
	}
	pg = f.reconcile(t, gangKey)
	c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != podgroupv1alpha1.ReasonQuorumReached {
		t.Errorf("Scheduled condition %+v after the gang was bound, want True/%s", c, podgroupv1alpha1.ReasonQuorumReached)
	}
	if pg.Status.Scheduled != 4 {
		t.Errorf("scheduled = %d, want 4", pg.Status.Scheduled)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("events after the quorum: %q, want none", e)
	}

	// A later timeout of another wait is another event.
	f.r.PodWaiting("gangs", heldBy(pods[0], coscheduling.Name))
	f.r.PodResolved("gangs", pods[0], framework.PermitTimedOut, timedOutAt(coscheduling.Name))
	pg = f.reconcile(t, gangKey)
	if c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Scheduled condition %+v after a second timeout, want False", c)
	}
	if e := f.events(); len(e) != 1 {
		t.Errorf("events after a second timeout: %q, want one", e)
	}
}

func TestPodGroupTimeoutMessage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		held      int
		want      string
	}{
		{
			name:      "fewer pods than minMember",
			minMember: 3,
			pods:      gangMembers(corev1.PodPending, "", "late-0", "late-1"),
			held:      2,
			want:      "timed out after waiting for 3 members: 2 held (late-0, late-1), missing 1 pod (2 of 3 exist)",
		},
		{
			name:      "bound, unplaced, deleted and absent members",
			minMember: 6,
			pods: func() []*corev1.Pod {
				pods := append(gangMembers(corev1.PodPending, "", "w-0", "w-1", "w-2"), gangMembers(corev1.PodRunning, "node-1", "w-3")...)
				pods[2].DeletionTimestamp = &metav1.Time{Time: time.Now()}
				return pods
			}(),
			held: 1,
			want: "timed out after waiting for 6 members: 1 held (w-0), 1 bound (w-3), missing w-1 (not placed), w-2 (being deleted), 2 pods (4 of 6 exist)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPodGroupFixture(t, podGroup(tc.minMember, podgroupv1alpha1.PodGroupScheduling), tc.pods...)
			for _, pod := range tc.pods[:tc.held] {
				f.r.PodWaiting("gangs", heldBy(pod, coscheduling.Name))
			}
			f.r.PodResolved("gangs", tc.pods[0], framework.PermitTimedOut, timedOutAt(coscheduling.Name))
			c := meta.FindStatusCondition(f.reconcile(t, gangKey).Status.Conditions, podgroupv1alpha1.PodGroupScheduled)
			if c == nil || c.Message != tc.want {
				t.Errorf("Scheduled condition %+v, want message %q", c, tc.want)
			}
		})
	}
}

func TestPodGroupIgnoresOtherPluginsTimeouts(t *testing.T) {
	pods := gangMembers(corev1.PodPending, "", "w-0", "w-1")
	f := newPodGroupFixture(t, podGroup(2, podgroupv1alpha1.PodGroupScheduling), pods...)
	f.r.PodWaiting("gangs", heldBy(pods[0], manualapproval.Name))
	f.r.PodResolved("gangs", pods[0], framework.PermitTimedOut, timedOutAt(manualapproval.Name))
	pg := f.reconcile(t, gangKey)
	if c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled); c != nil {
		t.Errorf("Scheduled condition %+v after %s timed out, want none", c, manualapproval.Name)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("events %q, want none", e)
	}
}

func TestPodGroupForgetsDeletedGroups(t *testing.T) {
	pods := gangMembers(corev1.PodPending, "", "w-0")
	f := newPodGroupFixture(t, podGroup(2, podgroupv1alpha1.PodGroupScheduling), pods...)
	f.r.PodWaiting("gangs", heldBy(pods[0], coscheduling.Name))
	f.r.PodResolved("gangs", pods[0], framework.PermitTimedOut, timedOutAt(coscheduling.Name))
	if err := f.client.Delete(context.Background(), podGroup(2, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: gangKey}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.r.gangs); n != 0 {
		t.Errorf("%d records left after the PodGroup was deleted", n)
	}
}

func TestPodGroupQueue(t *testing.T) {
	newQueue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	}
	drain := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
		var out []string
		for q.Len() > 0 {
			req, _ := q.Get()
			out = append(out, req.String())
			q.Done(req)
		}
		slices.Sort(out)
		return out
	}

	// A pod moved from one group to another changes both.
	moved := gangMember("ns", "w-0", corev1.PodPending, "")
	moved.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "other"}
	q := newQueue()
	podGroupsOfPod().Update(context.Background(), event.UpdateEvent{ObjectOld: gangMember("ns", "w-0", corev1.PodPending, ""), ObjectNew: moved}, q)
	if diff := cmp.Diff([]string{"ns/gang", "ns/other"}, drain(q)); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}

	// What the scheduler reported before the controller started is
	// reconciled when it starts; what it reports later, at once.
	pods := gangMembers(corev1.PodPending, "", "w-0", "w-1")
	f := newPodGroupFixture(t, podGroup(2, ""), pods...)
	f.r.PodWaiting("gangs", heldBy(pods[0], coscheduling.Name))
	q = newQueue()
	if err := f.r.startQueue(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ns/gang"}, drain(q)); diff != "" {
		t.Errorf("queued at start (-want +got):\n%s", diff)
	}
	f.r.PodResolved("gangs", pods[0], framework.PermitAllowed, nil)
	if diff := cmp.Diff([]string{"ns/gang"}, drain(q)); diff != "" {
		t.Errorf("queued after a wait ended (-want +got):\n%s", diff)
	}
}

// TestPodGroupStaleCacheDoesNotUndoFinal reads the group from a cache that
// has not seen Finished written, while the members are gone: the write
// from it must not replace the final phase.
func TestPodGroupStaleCacheDoesNotUndoFinal(t *testing.T) {
	f := newPodGroupFixture(t, podGroup(3, podgroupv1alpha1.PodGroupRunning))
	stale := &podgroupv1alpha1.PodGroup{}
	if err := f.client.Get(context.Background(), gangKey, stale); err != nil {
		t.Fatal(err)
	}
	finished := stale.DeepCopy()
	finished.Status.Phase = podgroupv1alpha1.PodGroupFinished
	if err := f.client.Status().Update(context.Background(), finished); err != nil {
		t.Fatal(err)
	}
	f.r.client = interceptor.NewClient(f.client.(client.WithWatch), interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			stale.DeepCopyInto(obj.(*podgroupv1alpha1.PodGroup))
			return nil
		},
	})
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: gangKey}); err != nil {
		t.Fatalf("Reconcile on a stale cache: %v", err)
	}
	got := &podgroupv1alpha1.PodGroup{}
	if err := f.client.Get(context.Background(), gangKey, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != podgroupv1alpha1.PodGroupFinished {
		t.Errorf("phase = %q, want Finished kept", got.Status.Phase)
	}
}
