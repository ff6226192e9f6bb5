package controllers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
)

// fakeWaitingPod records what the reconciler told the held pod.
type fakeWaitingPod struct {
	framework.WaitingPod
	pod      *corev1.Pod
	pending  []string
	allowed  []string
	rejected []string
}

func (w *fakeWaitingPod) GetPod() *corev1.Pod         { return w.pod }
func (w *fakeWaitingPod) GetNodeName() string         { return "node-1" }
func (w *fakeWaitingPod) GetPendingPlugins() []string { return w.pending }
func (w *fakeWaitingPod) Allow(plugin string)         { w.allowed = append(w.allowed, plugin) }
func (w *fakeWaitingPod) Reject(plugin, _ string) bool {
	w.rejected = append(w.rejected, plugin)
	return true
}

// fakeFramework holds at most one waiting pod; the reconciler uses no other
// method of a framework that holds it.
type fakeFramework struct {
	framework.Framework
	waiting   *fakeWaitingPod
	activated []string
}

func (f *fakeFramework) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		f.activated = append(f.activated, key)
	}
}

func (f *fakeFramework) GetWaitingPod(uid types.UID) framework.WaitingPod {
	if f.waiting == nil || f.waiting.pod.UID != uid {
		return nil
	}
	return f.waiting
}

// fakeDecisionRecord keeps recorded decision conditions by WaitingPod UID.
type fakeDecisionRecord map[types.UID]metav1.Condition

func (f fakeDecisionRecord) Decision(wp *schedulingv1alpha1.WaitingPod) *metav1.Condition {
	if c, ok := f[wp.UID]; ok {
		return &c
	}
	return nil
}

func (f fakeDecisionRecord) RecordDecision(wp *schedulingv1alpha1.WaitingPod, cond metav1.Condition) {
	f[wp.UID] = cond
}

// podInformerWith returns a pod informer, never started, that holds pods:
// the reconciler only reads its store.
func podInformerWith(t *testing.T, pods ...*corev1.Pod) toolscache.SharedIndexInformer {
	t.Helper()
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, pod := range pods {
		if err := inf.GetIndexer().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	return inf
}

func TestReconcileDeliversDecisionsToManualApprovalOnly(t *testing.T) {
	const podUID = types.UID("pod-uid")
	for _, tc := range []struct {
		name     string
		decision schedulingv1alpha1.Decision
		// specUID is the pod the decision names.
		specUID types.UID
		// pinned is the profile the decision is pinned to: b-uid serves
		// the pod, a-uid is a shadow now.
		pinned types.UID
		// pending are the Permit plugins holding the pod; nil: not held.
		pending []string

		wantAllowed   []string
		wantRejected  []string
		wantActivated []string
		wantCondition *metav1.Condition
	}{{
		name:          "an approval allows ManualApproval",
		decision:      schedulingv1alpha1.DecisionApprove,
		specUID:       podUID,
		pending:       []string{manualapproval.Name},
		wantAllowed:   []string{manualapproval.Name},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered, Message: "Approved by alice; the pod proceeds to binding on node-1"},
	}, {
		name:          "an approval allows ManualApproval and leaves another plugin's hold",
		decision:      schedulingv1alpha1.DecisionApprove,
		specUID:       podUID,
		pending:       []string{"Gang", manualapproval.Name},
		wantAllowed:   []string{manualapproval.Name},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered, Message: "Approved by alice; the pod is still held on node-1 by Gang, which an approval does not release"},
	}, {
		name:     "an approval does not release a pod held by other plugins only",
		decision: schedulingv1alpha1.DecisionApprove,
		specUID:  podUID,
		pending:  []string{"Gang", "Quota"},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: "Approved by alice, but the pod was not released: it is held by Gang, Quota, not ManualApproval, and a decision does not release it from them"},
	}, {
		name:         "a rejection rejects at ManualApproval, not at the first pending plugin",
		decision:     schedulingv1alpha1.DecisionReject,
		specUID:      podUID,
		pending:      []string{"Gang", manualapproval.Name},
		wantRejected: []string{manualapproval.Name},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodRejected, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered,
			Message: "Rejected by alice; the pod returned to pending"},
	}, {
		name:     "a rejection does not touch a pod held by other plugins only",
		decision: schedulingv1alpha1.DecisionReject,
		specUID:  podUID,
		pending:  []string{"Gang"},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodRejected, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: "Rejected by alice, but the pod was not released: it is held by Gang, not ManualApproval, and a decision does not release it from them"},
	}, {
		name:          "an approval for a pod not held is recorded",
		decision:      schedulingv1alpha1.DecisionApprove,
		specUID:       podUID,
		wantActivated: []string{"ns/train-0"},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonRecorded, Message: "Approved by alice; applies when the pod reaches Permit"},
	}, {
		// Stored before the API server required spec.podUID: status.podUID
		// says which pod was held, not which one alice decided on.
		name:     "a decision without spec.podUID is not delivered",
		decision: schedulingv1alpha1.DecisionApprove,
		pending:  []string{manualapproval.Name},
	}, {
		name:          "an approval pinned to the profile serving the pod is delivered",
		decision:      schedulingv1alpha1.DecisionApprove,
		specUID:       podUID,
		pinned:        "b-uid",
		pending:       []string{manualapproval.Name},
		wantAllowed:   []string{manualapproval.Name},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: approval.ReasonDelivered, Message: "Approved by alice; the pod proceeds to binding on node-1"},
	}, {
		name:     "an approval pinned to a profile that no longer serves the pod releases nothing",
		decision: schedulingv1alpha1.DecisionApprove,
		specUID:  podUID,
		pinned:   "a-uid",
		pending:  []string{manualapproval.Name},
		wantCondition: &metav1.Condition{Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonOtherProfile,
			Message: `Approved by alice for another SchedulingProfile (UID a-uid) than "approvals", which serves the pod now; it does not apply to this profile: delete this WaitingPod and decide again`},
	}, {
		name:     "a decision for another pod of the same name is not delivered",
		decision: schedulingv1alpha1.DecisionApprove,
		specUID:  "earlier-pod-uid",
		pending:  []string{manualapproval.Name},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := klog.NewContext(context.Background(), klog.Background())
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: podUID},
				Spec:       corev1.PodSpec{SchedulerName: "approvals"},
			}
			wp := &schedulingv1alpha1.WaitingPod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"},
				Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: tc.specUID, Decision: tc.decision, DecidedBy: "alice", ProfileUID: tc.pinned},
				Status:     schedulingv1alpha1.WaitingPodStatus{PodUID: podUID, Profile: "approvals"},
			}
			scheme := runtime.NewScheme()
			utilruntime.Must(clientgoscheme.AddToScheme(scheme))
			utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod, wp,
				servingProfile("a", "a-uid", ""), servingProfile("b", "b-uid", "approvals")).WithStatusSubresource(&schedulingv1alpha1.WaitingPod{}).Build()

			fwk := &fakeFramework{}
			if tc.pending != nil {
				fwk.waiting = &fakeWaitingPod{pod: pod, pending: tc.pending}
			}
			set := profiles.NewSet(klog.Background())
			set.Publish("approvals", fwk)
			decisions := fakeDecisionRecord{}
			r := NewWaitingPodReconciler(c, decisions, podInformerWith(t, pod), set, events.NewFakeRecorder(10), time.Minute)

			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wp)}); err != nil {
				t.Fatal(err)
			}

			var allowed, rejected []string
			if fwk.waiting != nil {
				allowed, rejected = fwk.waiting.allowed, fwk.waiting.rejected
			}
			if diff := cmp.Diff(tc.wantAllowed, allowed); diff != "" {
				t.Errorf("Allow calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRejected, rejected); diff != "" {
				t.Errorf("Reject calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantActivated, fwk.activated); diff != "" {
				t.Errorf("Activate calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCondition, decisions.Decision(wp)); diff != "" {
				t.Errorf("decision condition (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecisionsNeverFallBackToStatusPodUID(t *testing.T) {
	const podUID = types.UID("pod-uid")
	for _, tc := range []struct {
		name string
		spec schedulingv1alpha1.WaitingPodSpec
		want *manualapproval.Decision
	}{{
		name: "a decision for the pod",
		spec: schedulingv1alpha1.WaitingPodSpec{PodUID: podUID, Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"},
		want: &manualapproval.Decision{Approve: true, DecidedBy: "alice"},
	}, {
		name: "a decision that names no pod",
		spec: schedulingv1alpha1.WaitingPodSpec{Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"},
	}, {
		name: "a decision for an earlier pod of the same name",
		spec: schedulingv1alpha1.WaitingPodSpec{PodUID: "earlier", Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"},
	}, {
		name: "no decision",
		spec: schedulingv1alpha1.WaitingPodSpec{PodUID: podUID},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
			wp := &schedulingv1alpha1.WaitingPod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"},
				Spec:       tc.spec,
				// The scheduler holds this very pod.
				Status: schedulingv1alpha1.WaitingPodStatus{PodUID: podUID},
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wp).Build()
			got, err := Decisions{Reader: c}.Decision(context.Background(), manualapproval.Query{Namespace: "ns", Name: "train-0", PodUID: podUID, Profile: "approvals"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObservedStatusRemovesDecidableOnceResolved(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: "pod-uid"}}
	rec := &record{pod: pod, profile: "p", node: "node-1", deadlines: map[string]time.Time{"Gang": time.Now()}, observed: true}
	st := desiredStatus(rec, "", heldDevices{}, time.Now())
	if got := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.WaitingPodDecidable); got == nil || got.Status != metav1.ConditionFalse {
		t.Fatalf("Decidable while held by Gang only = %+v, want False", got)
	}
	rec.written, rec.resolved, rec.deadlines = &st, true, nil
	st = desiredStatus(rec, "", heldDevices{}, time.Now())
	if got := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.WaitingPodDecidable); got != nil {
		t.Errorf("Decidable after the wait ended = %+v, want none", got)
	}
}

func TestReconcileDoesNotRequeueDecidedPendingPods(t *testing.T) {
	const podUID = types.UID("pod-uid")
	for _, tc := range []struct {
		name     string
		decision schedulingv1alpha1.Decision
		pending  []string
	}{{
		// The pod stays pending, perhaps for days: its binding or deletion
		// brings the WaitingPod back, not a timer.
		name:     "a rejection recorded for a pod not held",
		decision: schedulingv1alpha1.DecisionReject,
	}, {
		name:     "a rejection delivered to the held pod",
		decision: schedulingv1alpha1.DecisionReject,
		pending:  []string{manualapproval.Name},
	}, {
		name:     "an approval delivered to the held pod",
		decision: schedulingv1alpha1.DecisionApprove,
		pending:  []string{manualapproval.Name},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := klog.NewContext(context.Background(), klog.Background())
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: podUID},
				Spec:       corev1.PodSpec{SchedulerName: "approvals"},
			}
			wp := &schedulingv1alpha1.WaitingPod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"},
				Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: podUID, Decision: tc.decision, DecidedBy: "alice"},
				Status:     schedulingv1alpha1.WaitingPodStatus{PodUID: podUID, Profile: "approvals"},
			}
			scheme := runtime.NewScheme()
			utilruntime.Must(clientgoscheme.AddToScheme(scheme))
			utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wp).WithStatusSubresource(&schedulingv1alpha1.WaitingPod{}).Build()
			fwk := &fakeFramework{}
			if tc.pending != nil {
				fwk.waiting = &fakeWaitingPod{pod: pod, pending: tc.pending}
			}
			set := profiles.NewSet(klog.Background())
			set.Publish("approvals", fwk)
			r := NewWaitingPodReconciler(c, fakeDecisionRecord{}, podInformerWith(t, pod), set, events.NewFakeRecorder(10), time.Minute)

			// Twice: the first delivers, the second sees it delivered.
			for i := range 2 {
				got, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wp)})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(ctrl.Result{}, got); diff != "" {
					t.Errorf("reconcile %d: result (-want +got):\n%s", i+1, diff)
				}
			}
		})
	}
}

func TestReconcileExpiresWaitingPodsOfPodsNotPending(t *testing.T) {
	const podUID = types.UID("pod-uid")
	for _, tc := range []struct {
		name string
		// pod is what the pod informer shows; nil: nothing.
		pod *corev1.Pod
		// resolvedAgo is how long ago the WaitingPod was created.
		resolvedAgo time.Duration
		// conditions are in its status.
		conditions []metav1.Condition

		wantResult ctrl.Result
		wantGone   bool
	}{{
		name:        "pod gone, resolved long ago",
		resolvedAgo: time.Hour,
		wantGone:    true,
	}, {
		name:        "pod bound, resolved long ago",
		pod:         &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: podUID}, Spec: corev1.PodSpec{NodeName: "node-1"}},
		resolvedAgo: time.Hour,
		wantGone:    true,
	}, {
		name:        "another pod of the name, resolved long ago",
		pod:         &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", UID: "later-pod-uid"}},
		resolvedAgo: time.Hour,
		wantGone:    true,
	}, {
		name:        "pod gone just now: kept for the retention",
		resolvedAgo: 0,
		wantResult:  ctrl.Result{RequeueAfter: time.Minute},
	}, {
		name:        "pod gone, its wait ended just now: kept for the retention",
		resolvedAgo: time.Hour,
		conditions: []metav1.Condition{{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: reasonAllowed, LastTransitionTime: metav1.Now(),
		}},
		wantResult: ctrl.Result{RequeueAfter: time.Minute},
	}, {
		name:        "pod gone, resolved long ago, another writer's condition changed just now",
		resolvedAgo: time.Hour,
		conditions: []metav1.Condition{{
			Type: "PolicyChecked", Status: metav1.ConditionTrue, Reason: "Checked", LastTransitionTime: metav1.Now(),
		}},
		wantGone: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := klog.NewContext(context.Background(), klog.Background())
			wp := &schedulingv1alpha1.WaitingPod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0", CreationTimestamp: metav1.NewTime(time.Now().Add(-tc.resolvedAgo))},
				Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: podUID, Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"},
				Status:     schedulingv1alpha1.WaitingPodStatus{PodUID: podUID, Profile: "approvals", Conditions: tc.conditions},
			}
			scheme := runtime.NewScheme()
			utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wp).Build()
			var pods []*corev1.Pod
			if tc.pod != nil {
				pods = append(pods, tc.pod)
			}
			r := NewWaitingPodReconciler(c, fakeDecisionRecord{}, podInformerWith(t, pods...), profiles.NewSet(klog.Background()), events.NewFakeRecorder(10), time.Minute)

			got, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wp)})
			if err != nil {
				t.Fatal(err)
			}
			// Within the second the stored creation time was rounded to.
			roughly := cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() < 2*time.Second })
			if diff := cmp.Diff(tc.wantResult, got, roughly); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			err = c.Get(ctx, client.ObjectKeyFromObject(wp), &schedulingv1alpha1.WaitingPod{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("WaitingPod removed: %v, want %v (Get: %v)", gone, tc.wantGone, err)
			}
		})
	}
}

func TestPodEventsThatEndAWaitingPod(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"}}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "node-1"
	relabelled := pending.DeepCopy()
	relabelled.Labels = map[string]string{"team": "ml"}
	relabelledBound := bound.DeepCopy()
	relabelledBound.Labels = relabelled.Labels
	p := podLeftPending()
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{name: "created", got: p.Create(event.CreateEvent{Object: pending})},
		{name: "changed while pending", got: p.Update(event.UpdateEvent{ObjectOld: pending, ObjectNew: relabelled})},
		{name: "bound", got: p.Update(event.UpdateEvent{ObjectOld: pending, ObjectNew: bound}), want: true},
		{name: "changed after binding", got: p.Update(event.UpdateEvent{ObjectOld: bound, ObjectNew: relabelledBound})},
		{name: "deleted or finished", got: p.Delete(event.DeleteEvent{Object: pending}), want: true},
		{name: "generic", got: p.Generic(event.GenericEvent{Object: pending})},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: passes %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestPodEventsReachOnlyExistingWaitingPods(t *testing.T) {
	scheme := runtime.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	wp := &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wp).Build()
	r := NewWaitingPodReconciler(c, fakeDecisionRecord{}, podInformerWith(t), profiles.NewSet(klog.Background()), events.NewFakeRecorder(10), time.Minute)
	for _, tc := range []struct {
		name string
		pod  string
		want []reconcile.Request
	}{
		{name: "a pod with a WaitingPod", pod: "train-0", want: []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "train-0"}}}},
		{name: "a pod without one", pod: "web-0"},
	} {
		got := r.waitingPodOf(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tc.pod}})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: requests (-want +got):\n%s", tc.name, diff)
		}
	}
}
