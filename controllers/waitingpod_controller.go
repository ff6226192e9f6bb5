package controllers

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
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
	if uid := approval.PodUIDOf(wp); pod == nil || (uid != "" && pod.UID != uid) {
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
// it for when the pod reaches Permit again. What becomes of it is the
// approval domain's to say; this only acts on it.
func (r *WaitingPodReconciler) deliver(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, pod *corev1.Pod) {
	logger := klog.FromContext(ctx)
	spec := &wp.Spec
	condType := approval.ConditionType(spec.Decision)
	// What this operator did with the decision before, from its own
	// record: the status is for people to read, not to decide from.
	prev := r.decisions.Decision(wp)
	already := prev != nil

	held, profile := r.profiles.GetWaitingPod(pod.UID)
	if held == nil {
		profile = pod.Spec.SchedulerName
	}
	pin, err := pinOf(ctx, r.client, spec, profile)
	if err != nil {
		logger.Error(err, "Reading the SchedulingProfiles a decision may be pinned to", "waitingPod", klog.KObj(wp))
		return
	}
	if pin != approval.PinHolds {
		cond := approval.PinCondition(spec, pin, profile)
		if prev == nil || prev.Reason != cond.Reason {
			r.decisions.RecordDecision(wp, cond)
			r.recorder.Eventf(pod, wp, corev1.EventTypeWarning, cond.Reason, "Decide", "%s", cond.Message)
		}
		return
	}

	var hold *approval.Hold
	if held != nil {
		hold = &approval.Hold{Pending: held.GetPendingPlugins(), Node: held.GetNodeName()}
	}
	d := approval.Deliver(spec, hold)
	switch d.Action {
	case approval.Allow:
		held.Allow(manualapproval.Name)
	case approval.Reject:
		held.Reject(manualapproval.Name, decisionOf(spec).RejectionMessage())
	default:
		if spec.Decision == schedulingv1alpha1.DecisionApprove && d.Reason == approval.ReasonRecorded && !already {
			// Not held now (never yet, or its window ended, or the
			// scheduler restarted): retry it at once rather than after
			// its backoff, and ManualApproval lets it through at Permit.
			if fwk := r.profiles.Get(pod.Spec.SchedulerName); fwk != nil {
				fwk.Activate(logger, map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
			}
		}
	}
	if already && d.Reason != approval.ReasonDelivered && (prev.Reason == d.Reason || prev.Reason == approval.ReasonDelivered) {
		// Delivered, or said the same, before; nothing new to say.
		return
	}
	msg := d.Message
	if spec.Reason != "" {
		msg += ": " + spec.Reason
	}
	r.decisions.RecordDecision(wp, metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: d.Reason, Message: msg})
	if !already {
		eventType := corev1.EventTypeNormal
		if condType == schedulingv1alpha1.WaitingPodRejected || d.Reason == schedulingv1alpha1.ReasonHeldByOtherPlugins {
			eventType = corev1.EventTypeWarning
		}
		// The event on the Pod is the audit line that outlives the WaitingPod.
		r.recorder.Eventf(pod, wp, eventType, condType, "Decide", "%s", msg)
		logger.Info("Delivered decision", "waitingPod", klog.KObj(wp), "decision", spec.Decision, "decidedBy", spec.DecidedBy, "profile", profile, "held", d.Action != approval.Record, "reason", d.Reason)
	}
}

// expire removes a WaitingPod whose pod no longer needs it, once it has
// been resolved for the retention time.
func (r *WaitingPodReconciler) expire(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, why string) (ctrl.Result, error) {
	since := wp.CreationTimestamp.Time
	mine := approval.OperatorConditionTypes()
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

// Decision returns the decision of the WaitingPod q names if it was made for
// the pod q names and belongs to the profile serving q.Profile.
func (d Decisions) Decision(ctx context.Context, q manualapproval.Query) (*manualapproval.Decision, error) {
	wp := &schedulingv1alpha1.WaitingPod{}
	if err := d.Reader.Get(ctx, types.NamespacedName{Namespace: q.Namespace, Name: q.Name}, wp); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	// Only the pod the decision names: never status.podUID, which says
	// which pod the scheduler held, not which pod a person decided on.
	if wp.Spec.Decision == "" || wp.Spec.PodUID != q.PodUID {
		return nil, nil
	}
	if pin, err := pinOf(ctx, d.Reader, &wp.Spec, q.Profile); err != nil || pin != approval.PinHolds {
		return nil, err
	}
	return decisionOf(&wp.Spec), nil
}

// decisionOf is spec's decision as ManualApproval takes it.
func decisionOf(spec *schedulingv1alpha1.WaitingPodSpec) *manualapproval.Decision {
	return &manualapproval.Decision{Approve: spec.Decision == schedulingv1alpha1.DecisionApprove, DecidedBy: spec.DecidedBy, Reason: spec.Reason}
}

// pinOf says whether spec's decision belongs to the SchedulingProfile that
// serves profile, the schedulerName of the instance holding the pod: the
// one whose status shows it Active for that name, as kubectl approve pins
// it. r is the manager's cache, so Permit makes no API call here; the
// profiles are only read, so the cache hands them over without copying
// each one.
func pinOf(ctx context.Context, r client.Reader, spec *schedulingv1alpha1.WaitingPodSpec, profile string) (approval.Pin, error) {
	if spec.ProfileUID == "" {
		return approval.PinHolds, nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return approval.PinHolds, err
	}
	return approval.PinOf(spec, approval.ServedProfiles(list.Items)[profile].UID, list.Items), nil
}
