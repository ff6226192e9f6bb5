package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
)

// Condition reasons the reconciler writes on WaitingPods.
const (
	// reasonDelivered: the decision reached the held pod.
	reasonDelivered = "Delivered"
	// reasonRecorded: the pod is not held now; the decision applies when it
	// reaches Permit again.
	reasonRecorded = "Recorded"
)

// WaitingPodReconciler carries people's decisions to the ManualApproval
// Permit plugin: an approval allows ManualApproval for the held pod (or, if
// the pod is not held now, retries it at once so it passes Permit), a
// rejection rejects it there. A decision never ends the hold of another
// Permit plugin: a gang quorum or a quota is not a person's to waive. It
// also removes WaitingPods once their pod is bound or gone. It never writes
// status: it records what it did with a decision in decisions, whose writer
// shows it.
type WaitingPodReconciler struct {
	client    client.Client
	decisions DecisionRecord
	// podInformer is the scheduling loop's pod informer (every pod that is
	// not finished): the reconciler reads and watches pods there rather
	// than caching them a second time or asking the API server per
	// reconcile.
	podInformer toolscache.SharedIndexInformer
	pods        corelisters.PodLister
	profiles    *profiles.Set
	recorder    events.EventRecorder
	retention   time.Duration
}

// DecisionRecord keeps what the operator did with each WaitingPod's
// decision: the Approved or Rejected condition that shows it. The
// WaitingPodMirror, the one writer of WaitingPod status, is one.
type DecisionRecord interface {
	// Decision returns the condition recorded for WaitingPod wp (this very
	// object, by UID), nil if none.
	Decision(wp *schedulingv1alpha1.WaitingPod) *metav1.Condition
	// RecordDecision records cond for WaitingPod wp and shows it.
	RecordDecision(wp *schedulingv1alpha1.WaitingPod, cond metav1.Condition)
}

// NewWaitingPodReconciler returns the reconciler. podInformer must leave
// out finished pods only, as the scheduling loop's does: a pod it does not
// show is treated as gone or finished. retention is how long a resolved
// WaitingPod is kept.
func NewWaitingPodReconciler(c client.Client, decisions DecisionRecord, podInformer toolscache.SharedIndexInformer, set *profiles.Set, recorder events.EventRecorder, retention time.Duration) *WaitingPodReconciler {
	return &WaitingPodReconciler{
		client:      c,
		decisions:   decisions,
		podInformer: podInformer,
		pods:        corelisters.NewPodLister(podInformer.GetIndexer()),
		profiles:    set,
		recorder:    recorder,
		retention:   retention,
	}
}

// waitingPodWorkers reconcile WaitingPods in parallel: a burst of decisions
// must not queue behind one another's status writes. The reconciler keeps
// no state of its own.
const waitingPodWorkers = 4

// podInformerSyncTimeout bounds how long the controller waits for the
// scheduling loop's pod informer before the manager gives up on it
// (controller-runtime's default is 2 minutes).
const podInformerSyncTimeout = 30 * time.Minute

// SetupWithManager registers the reconciler. Besides WaitingPods it watches
// their pods, so a WaitingPod goes when its pod is bound, finished or
// deleted, without being re-read on a timer.
func (r *WaitingPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&schedulingv1alpha1.WaitingPod{}).
		WatchesRawSource(&syncedInformerSource{
			Informer: source.Informer{
				Informer:   r.podInformer,
				Handler:    handler.EnqueueRequestsFromMapFunc(r.waitingPodOf),
				Predicates: []predicate.Predicate{podLeftPending()},
			},
			synced: r.podInformer.HasSynced,
		}).
		Named("waitingpod").
		// The first LIST of every pod can take minutes on a large
		// cluster; the scheduling loop waits for it without a limit, and
		// this controller must not give up before it.
		WithOptions(controller.Options{MaxConcurrentReconciles: waitingPodWorkers, CacheSyncTimeout: podInformerSyncTimeout}).
		Complete(r)
}

// podLeftPending passes the pod events that can end a WaitingPod: the pod
// was bound, or it left the informer (deleted, or finished: the informer
// leaves finished pods out). Every other pod event, the bulk of them, is of
// no interest to a decision. A pod created again under the same name
// usually shows as the earlier one's deletion (after a relist, as an update
// between two unbound pods, which is dropped: the mirror removes the
// earlier pod's WaitingPod when the new pod is held, and the garbage
// collector when it is not).
func podLeftPending() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			return okOld && okNew && oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != ""
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// waitingPodOf maps a pod to its WaitingPod (same namespace and name), if
// the cache holds one: most pods never wait for a decision, and their
// events must not cost a reconcile.
func (r *WaitingPodReconciler) waitingPodOf(ctx context.Context, obj client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(obj)
	if err := r.client.Get(ctx, key, &schedulingv1alpha1.WaitingPod{}); err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Reading the WaitingPod of a pod", "pod", klog.KObj(obj))
		}
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// syncedInformerSource is source.Informer that the controller waits for:
// the reconciler reads pods from the informer, and before it has synced a
// pod missing from it is not a pod that is gone.
type syncedInformerSource struct {
	source.Informer
	synced toolscache.InformerSynced
}

var _ source.SyncingSource = &syncedInformerSource{}

// WaitForSync blocks until the informer has synced or ctx ends.
func (s *syncedInformerSource) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("the pod informer did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Reconcile delivers the decision on one WaitingPod and cleans it up.
func (r *WaitingPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wp := &schedulingv1alpha1.WaitingPod{}
	if err := r.client.Get(ctx, req.NamespacedName, wp); err != nil {
		if apierrors.IsNotFound(err) {
			// Removed while its pod may still be pending: a rejection undone
			// (kubectl reject --undo). ManualApproval registers no cluster
			// events, since none resolves a person's rejection, so the pod
			// would wait in the unschedulable pool for the periodic flush.
			// Retry it at once: with no decision left, ManualApproval holds
			// it again for a new one. A bound or gone pod is not retried.
			if pod, perr := r.pods.Pods(req.Namespace).Get(req.Name); perr == nil && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				if fwk := r.profiles.Get(pod.Spec.SchedulerName); fwk != nil {
					fwk.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
				}
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The informer's pod is shared: read it, never change it.
	pod, err := r.pods.Pods(req.Namespace).Get(req.Name)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if uid := podUIDOf(wp); pod == nil || (uid != "" && pod.UID != uid) {
		return r.expire(ctx, wp, "its pod is gone")
	}
	if pod.Spec.NodeName != "" {
		return r.expire(ctx, wp, "its pod is bound to "+pod.Spec.NodeName)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return r.expire(ctx, wp, "its pod has finished")
	}
	// A decision is for the pod its spec names, never for whichever pod
	// the scheduler reported (status.podUID): the API server refuses a
	// decision without spec.podUID, and one stored before that rule is inert.
	if wp.Spec.Decision == "" || wp.Spec.PodUID != pod.UID {
		return ctrl.Result{}, nil
	}

	r.deliver(ctx, wp, pod)
	// No timer: the pod's binding, deletion or end enqueues the WaitingPod
	// again (SetupWithManager), and a pod that stays pending, say rejected,
	// costs nothing until then.
	return ctrl.Result{}, nil
}

// deliver hands the decision to the instance holding the pod, or records
// it for when the pod reaches Permit again.
func (r *WaitingPodReconciler) deliver(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, pod *corev1.Pod) {
	logger := klog.FromContext(ctx)
	spec := &wp.Spec
	condType := schedulingv1alpha1.WaitingPodApproved
	if spec.Decision == schedulingv1alpha1.DecisionReject {
		condType = schedulingv1alpha1.WaitingPodRejected
	}
	// What this operator did with the decision before, from its own
	// record: the status is for people to read, not to decide from.
	prev := r.decisions.Decision(wp)
	already := prev != nil
	if gone, err := pinnedProfileGone(ctx, r.client, spec); err != nil || gone {
		if err == nil && (prev == nil || prev.Reason != schedulingv1alpha1.ReasonProfileGone) {
			msg := fmt.Sprintf("%s by %s for a SchedulingProfile (UID %s) that was deleted since; it does not apply to the profile holding the pod now: delete this WaitingPod and decide again",
				decided(spec.Decision), spec.DecidedBy, spec.ProfileUID)
			r.decisions.RecordDecision(wp, metav1.Condition{Type: condType, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonProfileGone, Message: msg})
			r.recorder.Eventf(pod, wp, corev1.EventTypeWarning, schedulingv1alpha1.ReasonProfileGone, "Decide", "%s", msg)
		}
		return
	}

	held, profile := r.profiles.GetWaitingPod(pod.UID)
	var pending, others []string
	if held != nil {
		pending = held.GetPendingPlugins()
		others = otherPlugins(pending)
		if len(pending) == 0 {
			// Every plugin allowed it already; it is on its way to binding.
			held = nil
		}
	}
	reason, msg := reasonRecorded, ""
	switch {
	case held != nil && !slices.Contains(pending, manualapproval.Name):
		// Held, but not by ManualApproval (it allowed the pod already, or
		// the profile does not run it): the decision is kept for
		// ManualApproval and releases nothing.
		reason = schedulingv1alpha1.ReasonHeldByOtherPlugins
		msg = fmt.Sprintf("%s by %s, but the pod was not released: it is held by %s, not %s, and a decision does not release it from them",
			decided(spec.Decision), spec.DecidedBy, strings.Join(others, ", "), manualapproval.Name)
	case held != nil && spec.Decision == schedulingv1alpha1.DecisionApprove:
		held.Allow(manualapproval.Name)
		reason, msg = reasonDelivered, fmt.Sprintf("Approved by %s; the pod proceeds to binding on %s", spec.DecidedBy, held.GetNodeName())
		if len(others) > 0 {
			msg = fmt.Sprintf("Approved by %s; the pod is still held on %s by %s, which an approval does not release", spec.DecidedBy, held.GetNodeName(), strings.Join(others, ", "))
		}
	case held != nil:
		held.Reject(manualapproval.Name, manualapproval.RejectionMessage(spec))
		reason, msg = reasonDelivered, fmt.Sprintf("Rejected by %s; the pod returned to pending", spec.DecidedBy)
	case spec.Decision == schedulingv1alpha1.DecisionApprove:
		// Not held now (never yet, or its window ended, or the scheduler
		// restarted): retry it at once rather than after its backoff, and
		// ManualApproval lets it through at Permit.
		if fwk := r.profiles.Get(pod.Spec.SchedulerName); fwk != nil && !already {
			fwk.Activate(logger, map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
		}
		msg = fmt.Sprintf("Approved by %s; applies when the pod reaches Permit", spec.DecidedBy)
	default:
		msg = fmt.Sprintf("Rejected by %s; the pod will not be let through Permit", spec.DecidedBy)
	}
	if already && reason != reasonDelivered && (prev.Reason == reason || prev.Reason == reasonDelivered) {
		// Delivered, or said the same, before; nothing new to say.
		return
	}
	if spec.Reason != "" {
		msg += ": " + spec.Reason
	}
	r.decisions.RecordDecision(wp, metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
	if !already {
		eventType := corev1.EventTypeNormal
		if condType == schedulingv1alpha1.WaitingPodRejected || reason == schedulingv1alpha1.ReasonHeldByOtherPlugins {
			eventType = corev1.EventTypeWarning
		}
		// The event on the Pod is the audit line that outlives the WaitingPod.
		r.recorder.Eventf(pod, wp, eventType, condType, "Decide", "%s", msg)
		logger.Info("Delivered decision", "waitingPod", klog.KObj(wp), "decision", spec.Decision, "decidedBy", spec.DecidedBy, "profile", profile, "held", held != nil, "reason", reason)
	}
}

// decided is how decision starts a message: "Approved" or "Rejected".
func decided(decision schedulingv1alpha1.Decision) string {
	if decision == schedulingv1alpha1.DecisionReject {
		return "Rejected"
	}
	return "Approved"
}

// expire removes a WaitingPod whose pod no longer needs it, once it has
// been resolved for the retention time.
func (r *WaitingPodReconciler) expire(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, why string) (ctrl.Result, error) {
	since := wp.CreationTimestamp.Time
	mine := mirrorConditionTypes()
	for _, c := range wp.Status.Conditions {
		// Only the operator's conditions say when the wait was resolved:
		// another writer's, kept fresh, must not keep the WaitingPod.
		if c.LastTransitionTime.After(since) && slices.Contains(mine[:], c.Type) {
			since = c.LastTransitionTime.Time
		}
	}
	if wait := time.Until(since.Add(r.retention)); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	uid := wp.UID
	if err := r.client.Delete(ctx, wp, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	klog.FromContext(ctx).V(2).Info("Removed resolved WaitingPod", "waitingPod", klog.KObj(wp), "why", why)
	return ctrl.Result{}, nil
}

// Decisions reads people's decisions for the ManualApproval plugin from the
// operator's WaitingPod cache.
type Decisions struct {
	Reader client.Reader
}

var _ manualapproval.Decisions = Decisions{}

// Decision returns the decided spec of the WaitingPod namespace/name if it
// was made for the pod with uid.
func (d Decisions) Decision(ctx context.Context, namespace, name string, uid types.UID) (*schedulingv1alpha1.WaitingPodSpec, error) {
	wp := &schedulingv1alpha1.WaitingPod{}
	if err := d.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, wp); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	// Only the pod the decision names: never status.podUID, which says
	// which pod the scheduler held, not which pod a person decided on.
	if wp.Spec.Decision == "" || wp.Spec.PodUID != uid {
		return nil, nil
	}
	if gone, err := pinnedProfileGone(ctx, d.Reader, &wp.Spec); err != nil || gone {
		return nil, err
	}
	return &wp.Spec, nil
}

// pinnedProfileGone tells whether spec's decision was pinned to a
// SchedulingProfile that no longer exists: a profile deleted and created
// again under its name is another one, and the decision is not its. r is
// the manager's cache, so Permit makes no API call here; the profiles are
// only read, so the cache hands them over without copying each one.
func pinnedProfileGone(ctx context.Context, r client.Reader, spec *schedulingv1alpha1.WaitingPodSpec) (bool, error) {
	if spec.ProfileUID == "" {
		return false, nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	return !slices.ContainsFunc(list.Items, func(sp schedulingv1alpha1.SchedulingProfile) bool {
		return sp.UID == spec.ProfileUID && sp.DeletionTimestamp == nil
	}), nil
}
