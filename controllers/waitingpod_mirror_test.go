package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
)

// mirrorFixture is a mirror on a fake API server that counts the mirror's
// creates and WaitingPod status writes (applies and patches), and its
// applies to pods' status apart.
type mirrorFixture struct {
	mirror    *WaitingPodMirror
	gangs     coschedulingHolds
	claims    *schedulerClaims
	client    client.Client
	recorder  *events.FakeRecorder
	creates   int
	writes    int
	podWrites int
	// order names the writes in the order they were sent: create,
	// status (the WaitingPod's) and pod (the pod's condition, with its
	// message).
	order []string
}

func newMirrorFixture(t *testing.T, objs ...client.Object) *mirrorFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(podgroupv1alpha1.AddToScheme(scheme))
	f := &mirrorFixture{recorder: events.NewFakeRecorder(10), gangs: coschedulingHolds{}, claims: &schedulerClaims{}}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&schedulingv1alpha1.WaitingPod{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				f.creates++
				f.order = append(f.order, "create")
				// The fake API server leaves UIDs to the caller.
				obj.SetUID(types.UID("wp-" + obj.GetName()))
				return c.Create(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				f.writes++
				f.order = append(f.order, "status")
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
			SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
				if pod, ok := obj.(*applycorev1.PodApplyConfiguration); ok {
					f.podWrites++
					f.order = append(f.order, "pod: "+ptr.Deref(pod.Status.Conditions[0].Message, ""))
				} else {
					f.writes++
					f.order = append(f.order, "status")
				}
				return c.SubResource(sub).Apply(ctx, obj, opts...)
			},
		}).Build()
	f.mirror = NewWaitingPodMirror(f.client, f.recorder, f.gangs, f.claims, nil)
	return f
}

// coschedulingHolds are the pods, by UID, that an instance running
// Coscheduling at Permit holds; other pods are held by instances that do
// not run it.
type coschedulingHolds map[types.UID]bool

func (h coschedulingHolds) WaitingPodRunsPermit(uid types.UID, plugin string) bool {
	return plugin == coscheduling.Name && h[uid]
}

// schedulerClaims is the scheduler's view of ResourceClaims: the claims it
// knows, by namespace/name, and the allocations it made in Reserve and has
// not written, by claim UID.
type schedulerClaims struct {
	claims  map[types.NamespacedName]*resourceapi.ResourceClaim
	pending map[types.UID]*resourceapi.AllocationResult
	// extended are the in-flight claims for extended resources backed by
	// DRA, by pod UID.
	extended map[types.UID]*resourceapi.ResourceClaim
}

func (c *schedulerClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if claim := c.claims[types.NamespacedName{Namespace: namespace, Name: name}]; claim != nil {
		return claim, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (c *schedulerClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return c.pending[uid]
}

func (c *schedulerClaims) PendingExtendedResourceClaim(podUID types.UID) *resourceapi.ResourceClaim {
	return c.extended[podUID]
}

var trainKey = types.NamespacedName{Namespace: "ns", Name: "train-0"}

func (f *mirrorFixture) sync(t *testing.T) {
	t.Helper()
	if err := f.mirror.sync(klog.NewContext(context.Background(), klog.Background()), trainKey); err != nil {
		t.Fatal(err)
	}
}

func (f *mirrorFixture) get(t *testing.T) *schedulingv1alpha1.WaitingPod {
	t.Helper()
	wp := &schedulingv1alpha1.WaitingPod{}
	if err := f.client.Get(context.Background(), trainKey, wp); err != nil {
		t.Fatal(err)
	}
	return wp
}

func trainPod(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: uid}}
}

func held(pod *corev1.Pod) *fakeWaitingPod {
	return &fakeWaitingPod{pod: pod, pending: []string{manualapproval.Name}}
}

func (w *fakeWaitingPod) GetPendingPluginDeadlines() map[string]time.Time {
	deadlines := map[string]time.Time{}
	for _, name := range w.pending {
		deadlines[name] = time.Now().Add(time.Hour)
	}
	return deadlines
}

func (w *fakeWaitingPod) GetPendingPluginMessages() map[string]string { return nil }

// sayingWaitingPod is a held pod whose pending plugins say what they wait
// for.
type sayingWaitingPod struct {
	*fakeWaitingPod
	messages map[string]string
}

func (w *sayingWaitingPod) GetPendingPluginMessages() map[string]string { return w.messages }

// heldSaying is pod held by the plugins named in messages, each saying its
// message; an empty one says nothing.
func heldSaying(pod *corev1.Pod, messages map[string]string) *sayingWaitingPod {
	w := &sayingWaitingPod{fakeWaitingPod: &fakeWaitingPod{pod: pod}, messages: map[string]string{}}
	for name, msg := range messages {
		w.pending = append(w.pending, name)
		if msg != "" {
			w.messages[name] = msg
		}
	}
	return w
}

func gangPod(uid types.UID, group string) *corev1.Pod {
	pod := trainPod(uid)
	pod.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: group, "app": "train"}
	return pod
}

// said is what a status says of its pending plugins: each one's message,
// and the summary.
type said struct {
	Plugins map[string]string
	Message string
}

func saidIn(st schedulingv1alpha1.WaitingPodStatus) said {
	s := said{Plugins: map[string]string{}, Message: st.Message}
	for _, p := range st.PendingPlugins {
		s.Plugins[p.Name] = p.Message
	}
	return s
}

func TestMirrorWritesHoldDecisionAndEndTogetherWhenBehind(t *testing.T) {
	f := newMirrorFixture(t)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.sync(t)
	if f.creates != 1 || f.writes != 0 {
		t.Fatalf("after the hold: %d creates, %d status writes; want the WaitingPod created, its status written on the next turn", f.creates, f.writes)
	}
	// Before the mirror's next turn the pod is approved and allowed.
	wp := f.get(t)
	f.mirror.RecordDecision(wp, metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered, Message: "Approved by alice"})
	f.mirror.PodResolved("approvals", pod, framework.PermitAllowed, nil)
	f.sync(t)
	f.sync(t)
	if f.writes != 1 {
		t.Fatalf("%d status writes, want 1", f.writes)
	}
	st := f.get(t).Status
	if st.NodeName != "node-1" || st.Profile != "approvals" || st.PodUID != pod.UID || len(st.PendingPlugins) != 0 {
		t.Errorf("status = %+v, want the hold on node-1 by approvals, resolved", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.WaitingPodApproved); c == nil || c.Reason != approval.ReasonDelivered {
		t.Errorf("Approved = %+v, want Delivered", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.WaitingPodWaiting); c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonAllowed {
		t.Errorf("Waiting = %+v, want False, Allowed", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.WaitingPodDecidable); c != nil {
		t.Errorf("Decidable = %+v after the wait ended, want none", c)
	}
}

func TestMirrorWritesThePodOncePerHoldAndOncePerRelease(t *testing.T) {
	tests := []struct {
		name  string
		steps func(t *testing.T, f *mirrorFixture, pod *corev1.Pod)
		want  int
	}{{
		name: "held, its hold changed, then allowed",
		steps: func(t *testing.T, f *mirrorFixture, pod *corev1.Pod) {
			f.mirror.PodWaiting("approvals", held(pod))
			f.sync(t)
			f.mirror.PodWaitChanged("approvals", heldSaying(pod, map[string]string{manualapproval.Name: "", coscheduling.Name: "3/4 members assigned"}))
			f.sync(t)
			f.mirror.PodResolved("approvals", pod, framework.PermitAllowed, nil)
			f.sync(t)
			f.sync(t)
		},
		want: 2,
	}, {
		name: "held and allowed before the mirror's turn",
		steps: func(t *testing.T, f *mirrorFixture, pod *corev1.Pod) {
			f.mirror.PodWaiting("approvals", held(pod))
			f.mirror.PodResolved("approvals", pod, framework.PermitAllowed, nil)
			f.sync(t)
		},
		want: 0,
	}, {
		name: "held, timed out, held again",
		steps: func(t *testing.T, f *mirrorFixture, pod *corev1.Pod) {
			f.mirror.PodWaiting("approvals", held(pod))
			f.sync(t)
			f.mirror.PodResolved("approvals", pod, framework.PermitTimedOut, framework.NewStatus(framework.Unschedulable, "timeout"))
			f.sync(t)
			f.mirror.PodWaiting("approvals", held(pod))
			f.sync(t)
		},
		want: 3,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMirrorFixture(t)
			tc.steps(t, f, trainPod("pod-uid"))
			if diff := cmp.Diff(tc.want, f.podWrites); diff != "" {
				t.Errorf("pod status writes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMirrorRestoresStatusWrittenByOthers(t *testing.T) {
	f := newMirrorFixture(t)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.sync(t)
	f.sync(t)
	written := f.get(t).Status

	forged := f.get(t)
	forged.Status.NodeName = "forged-node"
	forged.Status.PodGroup = "forged-group"
	forged.Status.Message = "Coscheduling: 4/4 members assigned"
	meta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered, Message: "Approved by nobody"})
	if err := f.client.Status().Update(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	writes := f.writes
	f.sync(t)
	// The apply takes back the fields the mirror shows; what it does not
	// show and the forger now holds goes in a patch.
	if f.writes != writes+2 {
		t.Fatalf("status writes after the forgery: %d, want 2", f.writes-writes)
	}
	got := f.get(t).Status
	if got.NodeName != written.NodeName || got.PodGroup != "" || got.Message != "" || meta.FindStatusCondition(got.Conditions, schedulingv1alpha1.WaitingPodApproved) != nil {
		t.Errorf("status = %+v, want the one written before, %+v", got, written)
	}
	select {
	case e := <-f.recorder.Events:
		if !strings.Contains(e, "StatusRestored") {
			t.Errorf("event %q, want StatusRestored", e)
		}
	default:
		t.Error("no event for the restored status")
	}
	// Nothing new, nothing changed: no write.
	f.sync(t)
	if f.writes != writes+2 {
		t.Errorf("a sync with nothing to do wrote the status")
	}
}

func TestMirrorWaitsForCacheToCatchUp(t *testing.T) {
	f := newMirrorFixture(t)
	f.mirror.PodWaiting("approvals", held(trainPod("pod-uid")))
	f.sync(t)
	f.sync(t)
	// The cache still shows a version from before the mirror's last write.
	f.mirror.records[trainKey].writtenVersion = "999999"
	forged := f.get(t)
	forged.Status.NodeName = "stale"
	if err := f.client.Status().Update(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	writes := f.writes
	f.sync(t)
	if f.writes != writes {
		t.Errorf("wrote the status over a cached WaitingPod older than the last write")
	}
}

func TestMirrorShowsNothingForWaitEndedBeforeShown(t *testing.T) {
	f := newMirrorFixture(t)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.mirror.PodResolved("approvals", pod, framework.PermitAllowed, nil)
	f.sync(t)
	if f.creates != 0 {
		t.Errorf("created a WaitingPod for a wait already over")
	}
	if _, ok := f.mirror.records[trainKey]; ok {
		t.Errorf("kept the record of a wait already over")
	}
}

func TestMirrorReplacesUndecidedWaitingPodOfEarlierPod(t *testing.T) {
	earlier := &schedulingv1alpha1.WaitingPod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: "wp-earlier"},
		Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: "earlier-pod"},
	}
	f := newMirrorFixture(t, earlier)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.sync(t)
	wp := f.get(t)
	if wp.Spec.PodUID != pod.UID || wp.Spec.Decision != "" {
		t.Errorf("WaitingPod spec = %+v, want a new, undecided one for %s", wp.Spec, pod.UID)
	}
}

func TestMirrorShowsHeldPodAgainWhenItsWaitingPodIsDeleted(t *testing.T) {
	f := newMirrorFixture(t)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.sync(t)
	wp := f.get(t)
	if err := f.client.Delete(context.Background(), wp); err != nil {
		t.Fatal(err)
	}
	f.mirror.waitingPodDeleted(wp)
	f.sync(t)
	if f.creates != 2 {
		t.Errorf("%d creates, want the held pod shown again", f.creates)
	}

	// A decided WaitingPod deleted after the wait ended is not made again.
	f.mirror.PodResolved("approvals", pod, framework.PermitRejected, framework.NewStatus(framework.Unschedulable, "rejected"))
	wp = f.get(t)
	if err := f.client.Delete(context.Background(), wp); err != nil {
		t.Fatal(err)
	}
	f.mirror.waitingPodDeleted(wp)
	f.sync(t)
	if err := f.client.Get(context.Background(), trainKey, &schedulingv1alpha1.WaitingPod{}); !apierrors.IsNotFound(err) {
		t.Errorf("WaitingPod of a wait that ended made again: %v", err)
	}
}

func TestMirrorShowsHeldPodAgainWhenItsWaitingPodGoesDuringCreation(t *testing.T) {
	f := newMirrorFixture(t)
	deleted := false
	f.client = interceptor.NewClient(f.client.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil || deleted {
				return err
			}
			// Deleted, and the deletion seen, before the creation returns.
			deleted = true
			if err := c.Delete(ctx, obj); err != nil {
				return err
			}
			f.mirror.waitingPodDeleted(obj)
			return nil
		},
	})
	f.mirror.client = f.client
	f.mirror.PodWaiting("approvals", held(trainPod("pod-uid")))
	f.sync(t)
	f.sync(t)
	if f.creates != 2 {
		t.Errorf("%d creates, want the held pod shown again after its WaitingPod went", f.creates)
	}
	f.get(t)
}

func TestMirrorShowsGroupAndWhatPendingPluginsWaitFor(t *testing.T) {
	const (
		coscheduling = "Coscheduling"
		quota        = "Quota"
	)
	pod := gangPod("pod-uid", "train")
	steps := []struct {
		name string
		// report tells the mirror what the scheduler reported.
		report    func(m *WaitingPodMirror)
		wantGroup string
		want      said
	}{
		{
			name: "held, one plugin saying what it waits for",
			report: func(m *WaitingPodMirror) {
				m.PodWaiting("gangs", heldSaying(pod, map[string]string{coscheduling: "3/4 members assigned", manualapproval.Name: ""}))
			},
			wantGroup: "train",
			want: said{
				Plugins: map[string]string{coscheduling: "3/4 members assigned", manualapproval.Name: ""},
				Message: "Coscheduling: 3/4 members assigned",
			},
		},
		{
			name: "two plugins say, in the order of pendingPlugins",
			report: func(m *WaitingPodMirror) {
				m.PodWaitChanged("gangs", heldSaying(pod, map[string]string{quota: "waiting for 2 GPUs", coscheduling: "3/4 members assigned", manualapproval.Name: "awaiting a decision"}))
			},
			wantGroup: "train",
			want: said{
				Plugins: map[string]string{coscheduling: "3/4 members assigned", manualapproval.Name: "awaiting a decision", quota: "waiting for 2 GPUs"},
				Message: "Coscheduling: 3/4 members assigned; ManualApproval: awaiting a decision; Quota: waiting for 2 GPUs",
			},
		},
		{
			name: "a plugin changed its message, another allowed the pod",
			report: func(m *WaitingPodMirror) {
				m.PodWaitChanged("gangs", heldSaying(pod, map[string]string{coscheduling: "4/4 members assigned", manualapproval.Name: ""}))
			},
			wantGroup: "train",
			want: said{
				Plugins: map[string]string{coscheduling: "4/4 members assigned", manualapproval.Name: ""},
				Message: "Coscheduling: 4/4 members assigned",
			},
		},
		{
			name: "a late report of an earlier pod of the name changes nothing",
			report: func(m *WaitingPodMirror) {
				m.PodWaitChanged("gangs", heldSaying(gangPod("earlier-pod", "other"), map[string]string{coscheduling: "1/2 members assigned"}))
			},
			wantGroup: "train",
			want: said{
				Plugins: map[string]string{coscheduling: "4/4 members assigned", manualapproval.Name: ""},
				Message: "Coscheduling: 4/4 members assigned",
			},
		},
		{
			name: "the wait ended: nothing pending, the group stays",
			report: func(m *WaitingPodMirror) {
				m.PodResolved("gangs", pod, framework.PermitAllowed, nil)
			},
			wantGroup: "train",
			want:      said{Plugins: map[string]string{}},
		},
	}
	f := newMirrorFixture(t, namedPodGroup("train"))
	f.gangs[pod.UID] = true
	for i, step := range steps {
		step.report(f.mirror)
		f.sync(t)
		if i == 0 {
			// The first turn creates the WaitingPod; the next writes its status.
			f.sync(t)
		}
		st := f.get(t).Status
		if st.PodGroup != step.wantGroup {
			t.Errorf("%s: podGroup = %q, want %q", step.name, st.PodGroup, step.wantGroup)
		}
		if diff := cmp.Diff(step.want, saidIn(st)); diff != "" {
			t.Errorf("%s: what the pending plugins say (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestMirrorLeavesPodGroupEmptyForPodOutsideGroups(t *testing.T) {
	f := newMirrorFixture(t)
	f.mirror.PodWaiting("approvals", held(trainPod("pod-uid")))
	f.sync(t)
	f.sync(t)
	if st := f.get(t).Status; st.PodGroup != "" || st.Message != "" || len(st.PendingPlugins) != 1 || st.PendingPlugins[0].Message != "" {
		t.Errorf("status = %+v, want no group and no messages", st)
	}
}

func TestMirrorShowsLaterPodOfNameWithItsOwnGroup(t *testing.T) {
	f := newMirrorFixture(t, namedPodGroup("a"), namedPodGroup("b"))
	f.gangs["earlier-pod"], f.gangs["later-pod"] = true, true
	f.mirror.PodWaiting("gangs", heldSaying(gangPod("earlier-pod", "a"), map[string]string{"Coscheduling": "1/2 members assigned"}))
	f.sync(t)
	f.sync(t)
	later := gangPod("later-pod", "b")
	f.mirror.PodWaiting("gangs", heldSaying(later, map[string]string{"Coscheduling": "0/3 members assigned"}))
	// The earlier pod's WaitingPod is replaced by the later pod's, whose
	// status is written on the next turn.
	f.sync(t)
	f.sync(t)
	wp := f.get(t)
	if wp.Spec.PodUID != later.UID || wp.Status.PodUID != later.UID || wp.Status.PodGroup != "b" || wp.Status.Message != "Coscheduling: 0/3 members assigned" {
		t.Errorf("WaitingPod = %+v, %+v; want the later pod's, in group b", wp.Spec, wp.Status)
	}
}

// gangSchedulingHolds are the pods, by UID, that an instance running
// GangScheduling at Permit holds.
type gangSchedulingHolds map[types.UID]bool

func (h gangSchedulingHolds) WaitingPodRunsPermit(uid types.UID, plugin string) bool {
	return plugin == gangscheduling.Name && h[uid]
}

// TestMirrorShowsTheHintOnceTheWaitingPodShowsWhatItNames checks that a
// held pod's hint names only what its WaitingPod already shows: the
// WaitingPod itself, created on the first turn, or the gang the approval
// finds by status.podGroup, written on the next.
func TestMirrorShowsTheHintOnceTheWaitingPodShowsWhatItNames(t *testing.T) {
	workloadMember := trainPod("pod-uid")
	workloadMember.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		holders PermitHolders
		want    []string
	}{{
		name:    "a pod outside gangs",
		pod:     trainPod("pod-uid"),
		holders: coschedulingHolds{},
		want:    []string{"create", "pod: decide with kubectl approve|reject waitingpod/train-0", "status"},
	}, {
		name:    "a member of scheduler-plugins' PodGroup",
		pod:     gangPod("pod-uid", "train"),
		holders: coschedulingHolds{"pod-uid": true},
		want:    []string{"create", "status", "pod: decide the gang with kubectl approve|reject pg/train"},
	}, {
		name:    "a member of the Workload API's PodGroup",
		pod:     workloadMember,
		holders: gangSchedulingHolds{"pod-uid": true},
		want:    []string{"create", "status", "pod: decide the gang with kubectl approve|reject podgroup.scheduling.k8s.io/train"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMirrorFixture(t, namedPodGroup("train"))
			f.mirror.holders = tc.holders
			f.mirror.PodWaiting("gangs", held(tc.pod))
			f.sync(t)
			f.sync(t)
			// What the hint says after the holding plugins and deadline.
			for i, w := range f.order {
				if _, hint, ok := strings.Cut(w, ": "); ok {
					_, hint, _ = strings.Cut(hint, ": ")
					f.order[i] = "pod: " + hint
				}
			}
			if diff := cmp.Diff(tc.want, f.order); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// namedPodGroup is PodGroup name in the namespace of trainKey.
func namedPodGroup(name string) *podgroupv1alpha1.PodGroup {
	return &podgroupv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func TestMirrorShowsGroupOnlyForCoschedulingAndAnExistingGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		// coscheduling: the instance holding the pod runs Coscheduling.
		coscheduling bool
		groups       []string
		want         string
	}{
		{name: "Coscheduling holds a member of an existing group", coscheduling: true, groups: []string{"train"}, want: "train"},
		{name: "a pod of a profile without Coscheduling claims a group by its label", groups: []string{"train"}, want: ""},
		{name: "the group the label names does not exist", coscheduling: true, groups: []string{"other"}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			for _, g := range tc.groups {
				objs = append(objs, namedPodGroup(g))
			}
			f := newMirrorFixture(t, objs...)
			pod := gangPod("pod-uid", "train")
			f.gangs[pod.UID] = tc.coscheduling
			f.mirror.PodWaiting("profile", held(pod))
			f.sync(t)
			f.sync(t)
			if got := f.get(t).Status.PodGroup; got != tc.want {
				t.Errorf("podGroup = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMirrorKeepsAndMarksDecisionForAnotherPodOfTheName(t *testing.T) {
	ahead := &schedulingv1alpha1.WaitingPod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: "wp-ahead"},
		Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: "replaced-pod", Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"},
	}
	f := newMirrorFixture(t, ahead)
	pod := trainPod("pod-uid")
	f.mirror.PodWaiting("approvals", held(pod))
	f.sync(t)
	wp := f.get(t)
	if wp.UID != ahead.UID || wp.Spec != ahead.Spec || f.creates != 0 {
		t.Fatalf("WaitingPod %s, spec %+v, %d creates; want alice's decision kept", wp.UID, wp.Spec, f.creates)
	}
	c := meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodPodMismatch)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != schedulingv1alpha1.ReasonOtherPodDecided ||
		!strings.Contains(c.Message, "pod UID replaced-pod") || !strings.Contains(c.Message, "UID pod-uid") {
		t.Errorf("PodMismatch = %+v, want True naming both pods", c)
	}
	if wp.Status.PodUID != "" || wp.Status.NodeName != "" {
		t.Errorf("status = %+v shows the held pod on a decision that is not its own", wp.Status)
	}
	select {
	case e := <-f.recorder.Events:
		if !strings.Contains(e, schedulingv1alpha1.ReasonOtherPodDecided) {
			t.Errorf("event %q, want %s", e, schedulingv1alpha1.ReasonOtherPodDecided)
		}
	default:
		t.Error("no event for the held pod")
	}
	writes := f.writes
	f.sync(t)
	if f.writes != writes {
		t.Errorf("marked again with nothing changed")
	}

	// Once it is removed, the held pod is shown for its own decision.
	if err := f.client.Delete(context.Background(), wp); err != nil {
		t.Fatal(err)
	}
	f.mirror.waitingPodDeleted(wp)
	f.sync(t)
	if wp := f.get(t); wp.Spec.PodUID != pod.UID || wp.Spec.Decision != "" {
		t.Errorf("WaitingPod spec = %+v, want a new, undecided one for %s", wp.Spec, pod.UID)
	}
}

// gpus is an allocation of the named devices of pool to request.
func gpus(pool, request string, devices ...string) *resourceapi.AllocationResult {
	allocation := &resourceapi.AllocationResult{}
	for _, d := range devices {
		allocation.Devices.Results = append(allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: request, Driver: "gpu.example.com", Pool: pool, Device: d,
		})
	}
	return allocation
}

func TestMirrorShowsTheDevicesOfTheHeldPodsClaims(t *testing.T) {
	pod := trainPod("pod-uid")
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{
		{Name: "gpus", ResourceClaimTemplateName: ptr.To("two-gpus")},
		{Name: "shared", ResourceClaimName: ptr.To("team-gpu")},
		{Name: "not-made-yet", ResourceClaimTemplateName: ptr.To("two-gpus")},
		{Name: "unallocated", ResourceClaimName: ptr.To("spare")},
		{Name: "of-another-pod", ResourceClaimTemplateName: ptr.To("two-gpus")},
	}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{
		{Name: "gpus", ResourceClaimName: ptr.To("train-0-gpus-x7k2p")},
		{Name: "of-another-pod", ResourceClaimName: ptr.To("train-1-gpus-q8w3z")},
	}
	claim := func(name string, uid types.UID, allocation *resourceapi.AllocationResult) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
			Status:     resourceapi.ResourceClaimStatus{Allocation: allocation},
		}
	}
	// Claims made from a template are owned by their pod.
	madeFor := func(claim *resourceapi.ResourceClaim, podUID types.UID) *resourceapi.ResourceClaim {
		claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "train", UID: podUID, Controller: ptr.To(true)}}
		return claim
	}
	f := newMirrorFixture(t)
	f.claims.claims = map[types.NamespacedName]*resourceapi.ResourceClaim{
		{Namespace: "ns", Name: "train-0-gpus-x7k2p"}: madeFor(claim("train-0-gpus-x7k2p", "template-claim", nil), pod.UID),
		{Namespace: "ns", Name: "train-1-gpus-q8w3z"}: madeFor(claim("train-1-gpus-q8w3z", "claim-of-another-pod", nil), "another-pod"),
		{Namespace: "ns", Name: "team-gpu"}:           claim("team-gpu", "shared-claim", gpus("node-2", "gpu", "gpu-3")),
		{Namespace: "ns", Name: "spare"}:              claim("spare", "spare-claim", nil),
		// A claim of the same namespace the pod does not name.
		{Namespace: "ns", Name: "other"}: claim("other", "other-claim", gpus("node-1", "gpu", "gpu-2")),
	}
	f.claims.pending = map[types.UID]*resourceapi.AllocationResult{
		"template-claim": gpus("node-1", "gpus", "gpu-0", "gpu-1"),
		"other-claim":    gpus("node-1", "gpu", "gpu-2"),
		// Held for another pod: the status of this one cannot make it
		// show that pod's devices.
		"claim-of-another-pod": gpus("node-1", "gpus", "gpu-2", "gpu-3"),
	}

	// The claim for the pod's extended resources is in memory only.
	f.claims.extended = map[types.UID]*resourceapi.ResourceClaim{
		pod.UID:       {Status: resourceapi.ResourceClaimStatus{Allocation: gpus("node-1", "container-0-request-0", "gpu-4", "gpu-5")}},
		"another-pod": {Status: resourceapi.ResourceClaimStatus{Allocation: gpus("node-1", "container-0-request-0", "gpu-6")}},
	}

	f.mirror.PodWaiting("gangs", held(pod))
	f.sync(t)
	f.sync(t)
	wantExtended := []schedulingv1alpha1.AllocatedDevice{
		{Request: "container-0-request-0", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-4"},
		{Request: "container-0-request-0", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-5"},
	}
	if diff := cmp.Diff(wantExtended, f.get(t).Status.ExtendedResourceDevices); diff != "" {
		t.Errorf("extended resource devices while held (-want +got):\n%s", diff)
	}
	want := []schedulingv1alpha1.ClaimAllocation{
		{Name: "gpus", ResourceClaim: "train-0-gpus-x7k2p", Devices: []schedulingv1alpha1.AllocatedDevice{
			{Request: "gpus", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"},
			{Request: "gpus", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"},
		}},
		{Name: "shared", ResourceClaim: "team-gpu", Devices: []schedulingv1alpha1.AllocatedDevice{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "node-2", Device: "gpu-3"},
		}},
	}
	if diff := cmp.Diff(want, f.get(t).Status.Claims); diff != "" {
		t.Errorf("claims while held (-want +got):\n%s", diff)
	}

	// Once the wait ends the claims' own status says what they got, or
	// nothing does: the WaitingPod no longer speaks for them.
	f.mirror.PodResolved("gangs", pod, framework.PermitRejected, framework.NewStatus(framework.Unschedulable, "rejected"))
	f.sync(t)
	if got := f.get(t).Status.Claims; got != nil {
		t.Errorf("claims once the wait ended = %v, want none", got)
	}
	if got := f.get(t).Status.ExtendedResourceDevices; got != nil {
		t.Errorf("extended resource devices once the wait ended = %v, want none", got)
	}
}
