package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
)

// Condition reasons the mirror writes on WaitingPods.
const (
	reasonHeld    = "Held"
	reasonAllowed = "Allowed"
	reasonTimeout = "Timeout"
)

// WaitingPodMirror is the one writer of WaitingPod status. It shows pods held
// at Permit as WaitingPods, and records how people's decisions were carried
// out, in a status it derives from its own record alone: what the scheduler
// reported (framework.WaitingPodObserver, called on scheduling and binding
// goroutines) and what the decision reconciler did (RecordDecision). Callers
// only update the record and queue the pod; the mirror's workers write, so a
// scheduling cycle never waits on the API server.
//
// One writer with a queue that never hands a key to two workers means no
// write of the operator's can drop another's condition. It writes with
// server-side apply as the field manager profile-scheduler-waitingpods,
// which owns every status field but the conditions other writers add:
// those stay, and a change by anyone else to the mirror's fields seen on
// the WaitingPod is undone. When the queue is long, successive changes
// of one pod (held, decided, allowed) are written together: the status
// follows a pod's wait in fewer writes exactly when the API server is busiest.
type WaitingPodMirror struct {
	client   client.Client
	recorder events.EventRecorder
	holders  PermitHolders
	claims   ClaimAllocations
	groups   WorkloadGroups
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]

	// mu guards records.
	mu sync.Mutex
	// records hold, per WaitingPod name, what the operator observed and did.
	// A record lives while its WaitingPod does, or until the wait it
	// describes ends without one.
	records map[types.NamespacedName]*record
}

// record is the operator's own account of one WaitingPod: the source of its
// status, never the status read back.
type record struct {
	// version counts the record's changes, so a sync drops only the
	// record it read.
	version uint64
	// pod is the pod the scheduler held last; nil when only a decision is
	// recorded.
	pod *corev1.Pod
	// The scheduler's observation of the pod's current or last wait.
	profile   string
	node      string
	deadlines map[string]time.Time
	// messages say, per pending plugin that says one, what it waits for.
	messages map[string]string
	// gang is set when the instance holding the pod runs Coscheduling at
	// Permit: only then does the pod's group label make it a member of a
	// gang. The label is the pod author's to write; which instance holds
	// the pod is not.
	gang bool
	// workloadGang is set when the instance holding the pod runs
	// GangScheduling at Permit: only then does the pod's own
	// spec.schedulingGroup make it a member of a scheduling.k8s.io
	// PodGroup's gang here.
	workloadGang bool
	// observed is set once the scheduler reported a wait.
	observed bool
	resolved bool
	// resolution and message say how the wait ended, once resolved.
	resolution framework.PermitResolution
	message    string

	// wpEpoch counts the times the record let go of a WaitingPod object
	// (forgetWaitingPod), so that a write in flight meanwhile is not
	// recorded against an object already gone.
	wpEpoch uint64
	// wpUID is the WaitingPod object the decision and the written status
	// belong to. A WaitingPod removed and made again is another object: its
	// decision is its own.
	wpUID types.UID
	// decision is the Approved or Rejected condition the reconciler set for
	// wpUID's decision.
	decision *metav1.Condition
	// written is the status last written to wpUID, nil before the first
	// write; writtenVersion is the resourceVersion that write, or the
	// creation of wpUID, returned.
	written        *schedulingv1alpha1.WaitingPodStatus
	writtenVersion string

	// podShown is what the WaitingAtPermit condition written to pod says.
	podShown podShown
}

// podShown is what the mirror last wrote to a pod's WaitingAtPermit
// condition. Only a change of it is written, so a pod costs one write per
// hold and one per release, however often the hold's details change.
type podShown uint8

const (
	podUnshown podShown = iota
	podShownHeld
	podShownReleased
)

var (
	_ framework.WaitingPodObserver = (*WaitingPodMirror)(nil)
	_ manager.Runnable             = (*WaitingPodMirror)(nil)
)

// PermitHolders tells what the instance holding a pod at Permit runs; the
// live profile set (*profiles.Set) does.
type PermitHolders interface {
	// WaitingPodRunsPermit reports whether the instance in which the pod
	// with uid waits runs plugin at Permit.
	WaitingPodRunsPermit(uid types.UID, plugin string) bool
}

// NewWaitingPodMirror returns a mirror that writes with c, records on
// WaitingPods with recorder, asks holders which Permit plugins hold a pod,
// claims which devices its ResourceClaims would get and groups, if not nil,
// which scheduling.k8s.io PodGroup and Workload to tell of a hold for
// approval. Register it with SetupWithManager.
func NewWaitingPodMirror(c client.Client, recorder events.EventRecorder, holders PermitHolders, claims ClaimAllocations, groups WorkloadGroups) *WaitingPodMirror {
	return &WaitingPodMirror{
		client:   c,
		recorder: recorder,
		holders:  holders,
		claims:   claims,
		groups:   groups,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](), workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "waitingpod-mirror"}),
		records:  map[types.NamespacedName]*record{},
	}
}

// SetupWithManager adds the mirror to mgr, whose cache it reads WaitingPods
// from, and watches them: a WaitingPod that changes is checked against the
// record, and one that is deleted ends its record.
func (m *WaitingPodMirror) SetupWithManager(ctx context.Context, mgr manager.Manager) error {
	inf, err := mgr.GetCache().GetInformer(ctx, &schedulingv1alpha1.WaitingPod{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    m.waitingPodChanged,
		UpdateFunc: func(_, obj any) { m.waitingPodChanged(obj) },
		DeleteFunc: m.waitingPodDeleted,
	}); err != nil {
		return err
	}
	return mgr.Add(m)
}

// waitingPodChanged queues a WaitingPod the mirror keeps a record of, so a
// status someone else changed is put back.
func (m *WaitingPodMirror) waitingPodChanged(obj any) {
	wp, ok := obj.(*schedulingv1alpha1.WaitingPod)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(wp)
	m.mu.Lock()
	_, known := m.records[key]
	m.mu.Unlock()
	if known {
		m.queue.Add(key)
	}
}

// waitingPodDeleted ends what the record says about a deleted WaitingPod: its
// decision and status. A pod still held keeps its record, and the mirror
// shows it again in a new WaitingPod.
func (m *WaitingPodMirror) waitingPodDeleted(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	wp, ok := obj.(*schedulingv1alpha1.WaitingPod)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(wp)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.records[key]
	if rec == nil || (rec.wpUID != "" && rec.wpUID != wp.UID) {
		return
	}
	rec.forgetWaitingPod()
	if !rec.observed || rec.resolved {
		delete(m.records, key)
		return
	}
	m.queue.Add(key)
}

// forgetWaitingPod drops what belonged to the WaitingPod object the record
// was written to.
func (r *record) forgetWaitingPod() {
	r.wpEpoch++
	r.wpUID = ""
	r.decision = nil
	r.written = nil
	r.writtenVersion = ""
}

// PodWaiting records that a pod is held at Permit.
func (m *WaitingPodMirror) PodWaiting(profile string, wp framework.WaitingPod) {
	pod := wp.GetPod()
	node, deadlines, messages := wp.GetNodeName(), wp.GetPendingPluginDeadlines(), wp.GetPendingPluginMessages()
	// Asked of the instance now, while it holds the pod: a sibling's
	// HoldChanged may already have let it go with its gang, so the pending
	// plugins do not say. (The member that completes a gang itself is
	// never seen waiting.)
	gang := m.holders.WaitingPodRunsPermit(pod.UID, coscheduling.Name)
	workloadGang := !gang && m.holders.WaitingPodRunsPermit(pod.UID, gangscheduling.Name)
	m.update(pod.Namespace, pod.Name, func(rec *record) {
		rec.observe(pod)
		rec.profile, rec.node, rec.deadlines, rec.messages, rec.gang, rec.workloadGang = profile, node, deadlines, messages, gang, workloadGang
		rec.observed, rec.resolved, rec.resolution, rec.message = true, false, 0, ""
	})
}

// PodWaitChanged records that what holds a pod at Permit changed: a plugin
// allowed it while others still hold it, or a plugin said anew what it
// waits for. A wait the record does not hold (ended, or of an earlier pod
// of the name) is past: a report of it that comes late changes nothing.
func (m *WaitingPodMirror) PodWaitChanged(profile string, wp framework.WaitingPod) {
	pod := wp.GetPod()
	deadlines, messages := wp.GetPendingPluginDeadlines(), wp.GetPendingPluginMessages()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	m.mu.Lock()
	rec := m.records[key]
	if rec == nil || rec.pod == nil || rec.pod.UID != pod.UID || rec.resolved {
		m.mu.Unlock()
		return
	}
	rec.profile, rec.deadlines, rec.messages = profile, deadlines, messages
	rec.version++
	m.mu.Unlock()
	m.queue.Add(key)
}

// PodResolved records how a pod's wait at Permit ended.
func (m *WaitingPodMirror) PodResolved(profile string, pod *corev1.Pod, resolution framework.PermitResolution, status *framework.Status) {
	m.update(pod.Namespace, pod.Name, func(rec *record) {
		// The node stays from the wait being resolved, if it was seen.
		rec.observe(pod)
		rec.profile, rec.deadlines, rec.messages = profile, nil, nil
		rec.observed, rec.resolved, rec.resolution, rec.message = true, true, resolution, status.Message()
	})
}

// observe makes pod the record's pod. Another pod of the same name starts
// a new record: the earlier pod's WaitingPod, decision and all, is not its.
func (r *record) observe(pod *corev1.Pod) {
	if r.pod != nil && r.pod.UID != pod.UID {
		*r = record{version: r.version, wpEpoch: r.wpEpoch + 1}
	}
	r.pod = pod
}

var _ DecisionRecord = (*WaitingPodMirror)(nil)

// RecordDecision records the condition the decision reconciler set for the
// decision on WaitingPod wp (Approved or Rejected), to be shown in its
// status.
func (m *WaitingPodMirror) RecordDecision(wp *schedulingv1alpha1.WaitingPod, cond metav1.Condition) {
	m.update(wp.Namespace, wp.Name, func(rec *record) {
		if rec.pod != nil && rec.pod.UID != wp.Spec.PodUID {
			// The decision is for a later pod of the same name; what
			// the record says of the earlier one is past.
			*rec = record{version: rec.version, wpEpoch: rec.wpEpoch + 1}
		}
		if rec.wpUID != wp.UID {
			if rec.wpUID != "" {
				rec.forgetWaitingPod()
			}
			rec.wpUID = wp.UID
		}
		rec.decision = &cond
	})
}

// Decision returns the condition RecordDecision last set for WaitingPod wp,
// nil if none.
func (m *WaitingPodMirror) Decision(wp *schedulingv1alpha1.WaitingPod) *metav1.Condition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.records[client.ObjectKeyFromObject(wp)]; rec != nil && rec.wpUID == wp.UID && rec.decision != nil {
		c := *rec.decision
		return &c
	}
	return nil
}

// update changes the record of namespace/name under the lock and queues it
// for writing.
func (m *WaitingPodMirror) update(namespace, name string, change func(*record)) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	m.mu.Lock()
	rec := m.records[key]
	if rec == nil {
		rec = &record{}
		m.records[key] = rec
	}
	change(rec)
	rec.version++
	m.mu.Unlock()
	m.queue.Add(key)
}

// NeedLeaderElection is true: only the leader schedules, so only it mirrors.
func (m *WaitingPodMirror) NeedLeaderElection() bool { return true }

// mirrorWorkers write WaitingPods in parallel; the queue never hands one
// key to two workers at once.
const mirrorWorkers = 4

// Start runs the workers until ctx ends.
func (m *WaitingPodMirror) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("waitingpod-mirror")
	var wg sync.WaitGroup
	for range mirrorWorkers {
		wg.Go(func() { m.work(ctx, logger) })
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
	return nil
}

func (m *WaitingPodMirror) work(ctx context.Context, logger klog.Logger) {
	for {
		key, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		if err := m.sync(klog.NewContext(ctx, logger), key); err != nil {
			logger.Error(err, "Writing WaitingPod", "waitingPod", key)
			m.queue.AddRateLimited(key)
		} else {
			m.queue.Forget(key)
		}
		m.queue.Done(key)
	}
}

// snapshot returns a copy of the record of key taken under the lock, for
// one sync, or nil.
func (m *WaitingPodMirror) snapshot(key types.NamespacedName) *record {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.records[key]
	if rec == nil {
		return nil
	}
	snap := *rec
	if rec.decision != nil {
		c := *rec.decision
		snap.decision = &c
	}
	return &snap
}

// sync makes the WaitingPod key show the record: it creates the WaitingPod
// of a held pod, and writes the status the record gives when it differs
// from the last one written or from the one the WaitingPod shows.
func (m *WaitingPodMirror) sync(ctx context.Context, key types.NamespacedName) error {
	rec := m.snapshot(key)
	if rec == nil {
		return nil
	}
	holding := rec.pod != nil && rec.observed && !rec.resolved
	if !holding {
		// The end of a wait is shown on the pod whether or not its
		// WaitingPod is still there. A hold is shown only once its
		// WaitingPod exists (below), so that the condition's "kubectl
		// approve waitingpod/..." names an object a person can decide.
		if err := m.showOnPod(ctx, key, rec); err != nil {
			return err
		}
	}

	wp := &schedulingv1alpha1.WaitingPod{}
	err := m.client.Get(ctx, key, wp)
	switch {
	case apierrors.IsNotFound(err):
		wp = nil
	case err != nil:
		return err
	case rec.wpUID != "" && wp.UID != rec.wpUID:
		// Not the WaitingPod the record is about: the cache has yet to
		// show that one, or it was deleted. The informer's event for it
		// brings the key back.
		return nil
	case rec.pod != nil && approval.PodUIDOf(wp) != "" && approval.PodUIDOf(wp) != rec.pod.UID:
		if !holding {
			// Another pod's WaitingPod; the record's pod and its wait
			// are past.
			m.dropIf(key, rec.version)
			return nil
		}
		if wp.Spec.Decision != "" {
			// A person's decision for another pod of the same name (an
			// earlier one, or one decided ahead that was then
			// replaced): it must not apply to this pod, nor vanish
			// unseen. It stays, marked, until the decision reconciler
			// removes it as a WaitingPod whose pod is gone; then this
			// pod is shown for its own decision.
			return m.showOtherPod(ctx, wp, rec)
		}
		// Left over, undecided, from an earlier pod of the same name:
		// nothing a person wrote is lost by replacing it.
		if err := m.client.Delete(ctx, wp, client.Preconditions{UID: &wp.UID}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		wp = nil
	}
	if wp == nil {
		switch {
		case rec.wpUID != "":
			// Created or written before: the cache has yet to show it,
			// or its deletion is on its way to waitingPodDeleted.
		case !holding:
			// Nothing held to show: the wait ended before it could be
			// shown.
			m.dropIf(key, rec.version)
		default:
			wp = newWaitingPod(rec.pod)
			if err := m.client.Create(ctx, wp); err != nil {
				return err
			}
			// The status is written when the informer shows the new
			// WaitingPod and queues it again, not now: when the queue
			// is long, what happened to the pod meanwhile (a decision,
			// the end of the wait) is written with it in one request.
			m.wrote(key, rec, wp, nil)
		}
		if holding {
			return m.showOnPod(ctx, key, rec)
		}
		return nil
	}
	if holding {
		if err := m.showOnPod(ctx, key, rec); err != nil {
			return err
		}
	}

	group, err := m.podGroupOf(ctx, rec)
	if err != nil {
		return err
	}
	want := desiredStatus(rec, group, m.devicesOf(ctx, rec), time.Now())
	if rec.written != nil && equality.Semantic.DeepEqual(*rec.written, want) {
		if stale, err := olderThan(wp.ResourceVersion, rec.writtenVersion); err != nil || stale {
			// The cache has not caught up with the last write; its event
			// brings the WaitingPod back here.
			return err
		}
		if shows(wp.Status, want) {
			return nil
		}
		klog.FromContext(ctx).Info("Restoring WaitingPod status changed by someone else", "waitingPod", key)
		m.recorder.Eventf(wp, nil, corev1.EventTypeWarning, "StatusRestored", "Sync", "Status changed outside the operator was replaced by what the operator observed")
	}
	stored, err := m.writeStatus(ctx, wp, want)
	if err != nil {
		return err
	}
	m.wrote(key, rec, stored, &want)
	return nil
}

// showOnPod makes the pod of rec show its wait at Permit: the
// WaitingAtPermit condition, True while held and False once a wait it
// showed ended, and an event when the hold starts or expires. It writes
// with server-side apply to the pod's status as a field manager of its
// own, which owns that one condition: conditions on pods are a map keyed
// by type, so no one else's is touched. A wait that ended before it was
// shown is not written at all.
func (m *WaitingPodMirror) showOnPod(ctx context.Context, key types.NamespacedName, rec *record) error {
	if rec.pod == nil || !rec.observed {
		return nil
	}
	want := podShownHeld
	if rec.resolved {
		if rec.podShown != podShownHeld {
			return nil
		}
		want = podShownReleased
	}
	if rec.podShown == want {
		return nil
	}
	group := ""
	if want == podShownHeld {
		var err error
		if group, err = m.podGroupOf(ctx, rec); err != nil {
			return err
		}
	}
	cond, note := podCondition(rec, key.Name, group, time.Now())
	apply := applycorev1.Pod(rec.pod.Name, rec.pod.Namespace).WithUID(rec.pod.UID).
		WithStatus(applycorev1.PodStatus().WithConditions(cond))
	err := m.client.Status().Apply(ctx, apply, client.FieldOwner(podConditionFieldManager), client.ForceOwnership)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// The pod is gone, or another pod of its name took its place
		// (the UID differs): nothing to show it on.
	case err != nil:
		return err
	case want == podShownHeld:
		m.recorder.Eventf(rec.pod, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonWaitingAtPermit, "Hold", "%s", note)
		m.showOnWorkloadGroup(rec)
	case rec.resolution == framework.PermitTimedOut:
		m.recorder.Eventf(rec.pod, nil, corev1.EventTypeWarning, schedulingv1alpha1.ReasonPermitTimedOut, "Hold", "%s", note)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.records[key]; cur != nil && cur.podUID() == rec.podUID() {
		cur.podShown = want
	}
	return nil
}

// podCondition is the WaitingAtPermit condition rec gives the pod of the
// WaitingPod name, and the note of its event: while held, which plugins
// hold it, until when at most (the earliest deadline: the first plugin to
// time out rejects the pod) and where to decide (a gang's member, of group
// as status.podGroup shows it, with its whole gang); once the wait ended,
// how.
func podCondition(rec *record, name, group string, now time.Time) (*applycorev1.PodConditionApplyConfiguration, string) {
	cond := applycorev1.PodCondition().WithType(schedulingv1alpha1.PodWaitingAtPermit).
		WithLastTransitionTime(metav1.NewTime(now.Truncate(time.Second)))
	if !rec.resolved {
		pending := slices.Sorted(maps.Keys(rec.deadlines))
		var until time.Time
		for _, d := range rec.deadlines {
			if until.IsZero() || d.Before(until) {
				until = d
			}
		}
		where := "see kubectl get waitingpod/" + name
		switch gang := approval.DecideGroupAs(group); {
		case !approval.HeldByManualApproval(pending):
		case gang != "":
			where = "decide the gang with kubectl approve|reject " + gang
		default:
			where = "decide with kubectl approve|reject waitingpod/" + name
		}
		note := fmt.Sprintf("Held at Permit by %s until %s: %s", strings.Join(pending, ", "), until.UTC().Truncate(time.Second).Format(time.RFC3339), where)
		return cond.WithStatus(corev1.ConditionTrue).WithReason("HeldBy" + strings.Join(pending, "And")).WithMessage(note), note
	}
	switch rec.resolution {
	case framework.PermitAllowed:
		note := "Every Permit plugin allowed the pod; it proceeds to binding"
		return cond.WithStatus(corev1.ConditionFalse).WithReason(reasonAllowed).WithMessage(note), note
	case framework.PermitTimedOut:
		note := "Wait at Permit expired: " + rec.message
		return cond.WithStatus(corev1.ConditionFalse).WithReason(reasonTimeout).WithMessage(note), note
	default:
		note := "Rejected at Permit: " + rec.message
		return cond.WithStatus(corev1.ConditionFalse).WithReason(schedulingv1alpha1.WaitingPodRejected).WithMessage(note), note
	}
}

// podGroupOf is the PodGroup the record's pod is a member of, as
// status.podGroup names it. A scheduler-plugins PodGroup is the one its
// label names, when the instance holding it runs Coscheduling and the group
// exists: only then does Coscheduling hold the pod for that group; the
// label alone is the pod author's claim, which must not let a pod ride a
// decision made for someone else's gang. A scheduling.k8s.io PodGroup is
// the one the pod's own spec.schedulingGroup names, when the instance
// holding it runs GangScheduling (whose PreEnqueue and Permit let no pod of
// a missing group reach a hold), named with approval.WorkloadPodGroup so
// that it never reads as a scheduler-plugins group.
func (m *WaitingPodMirror) podGroupOf(ctx context.Context, rec *record) (string, error) {
	if rec.pod == nil {
		return "", nil
	}
	if rec.workloadGang {
		if name, ok := framework.PodGroupNameOf(rec.pod); ok {
			return approval.WorkloadPodGroup(name), nil
		}
		return "", nil
	}
	if !rec.gang {
		return "", nil
	}
	name := rec.pod.Labels[podgroupv1alpha1.PodGroupLabel]
	if name == "" {
		return "", nil
	}
	if err := m.client.Get(ctx, types.NamespacedName{Namespace: rec.pod.Namespace, Name: name}, &podgroupv1alpha1.PodGroup{}); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return name, nil
}

// showOtherPod marks wp, a decided WaitingPod that names another pod than
// the one the record holds under its name, with the PodMismatch condition,
// and tells the held pod why it is not shown yet.
func (m *WaitingPodMirror) showOtherPod(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, rec *record) error {
	want := otherPodStatus(wp, rec)
	if shows(wp.Status, want) {
		return nil
	}
	marked := meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodPodMismatch)
	if _, err := m.writeStatus(ctx, wp, want); err != nil {
		return err
	}
	if !marked {
		m.recorder.Eventf(rec.pod, wp, corev1.EventTypeWarning, schedulingv1alpha1.ReasonOtherPodDecided, "Sync",
			"WaitingPod %s/%s holds a decision by %s for pod UID %s, not for this pod, which it does not apply to; this pod is shown for its own decision once that WaitingPod is removed",
			wp.Namespace, wp.Name, wp.Spec.DecidedBy, wp.Spec.PodUID)
	}
	return nil
}

// otherPodStatus is the status of wp, a decided WaitingPod naming another
// pod than the one rec holds under its name: nothing the scheduler observed
// belongs to the pod wp names, so the PodMismatch condition alone, keeping
// its transition time while it says the same.
func otherPodStatus(wp *schedulingv1alpha1.WaitingPod, rec *record) schedulingv1alpha1.WaitingPodStatus {
	st := schedulingv1alpha1.WaitingPodStatus{}
	if c := meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodPodMismatch); c != nil {
		st.Conditions = []metav1.Condition{*c}
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: schedulingv1alpha1.WaitingPodPodMismatch, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonOtherPodDecided,
		Message: fmt.Sprintf("The decision is for pod UID %s, which no pod of this name has now: the pod of this name, UID %s, is held at Permit on node %s and the decision does not apply to it. This WaitingPod is removed like one whose pod is gone; the held pod is then shown for its own decision",
			wp.Spec.PodUID, rec.pod.UID, rec.node),
	})
	return st
}

// wrote records that status was written to wp (nil: wp was created), from
// the snapshot rec, unless the record has meanwhile turned to another pod
// or let go of the WaitingPod (it was deleted while the write was in
// flight: recorded, it would wait for an object that is gone).
func (m *WaitingPodMirror) wrote(key types.NamespacedName, rec *record, wp *schedulingv1alpha1.WaitingPod, status *schedulingv1alpha1.WaitingPodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.records[key]
	if cur == nil || cur.podUID() != rec.podUID() || cur.wpEpoch != rec.wpEpoch || (cur.wpUID != "" && cur.wpUID != wp.UID) {
		return
	}
	cur.wpUID, cur.written, cur.writtenVersion = wp.UID, status, wp.ResourceVersion
}

// podUID is the UID of the record's pod, empty when it has none.
func (r *record) podUID() types.UID {
	if r.pod == nil {
		return ""
	}
	return r.pod.UID
}

// dropIf removes the record of key unless it changed since version.
func (m *WaitingPodMirror) dropIf(key types.NamespacedName, version uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.records[key]; rec != nil && rec.version == version {
		delete(m.records, key)
	}
}

// olderThan reports whether resourceVersion a is older than b; false when b
// is empty.
func olderThan(a, b string) (bool, error) {
	if b == "" {
		return false, nil
	}
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return cmp < 0, err
}

// writeStatus applies status to wp as the mirror's field manager and
// returns wp as stored. Conditions of other types, which other writers
// own, stay. A field the mirror writes that someone else holds too (a
// condition of the mirror's types it does not show, a field it leaves
// empty) outlives the apply, and goes in a second write: no one but the
// mirror may say what the scheduler observed. The apply needs no
// resourceVersion, so a decision written to the spec meanwhile cannot
// make it conflict.
func (m *WaitingPodMirror) writeStatus(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, status schedulingv1alpha1.WaitingPodStatus) (*schedulingv1alpha1.WaitingPod, error) {
	stored := &schedulingv1alpha1.WaitingPod{}
	err := applyStatus(ctx, m.client, waitingPodFieldManager, wp, status, stored,
		func() bool { return shows(stored.Status, status) },
		func() {
			_, others := splitConditions(stored.Status.Conditions, mirrorOwns(&status))
			status.DeepCopyInto(&stored.Status)
			stored.Status.Conditions = append(stored.Status.Conditions, others...)
		})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// mirrorOwns reports which condition types are the mirror's when it
// writes want: its own types, and whatever want shows.
func mirrorOwns(want *schedulingv1alpha1.WaitingPodStatus) func(string) bool {
	mine := approval.OperatorConditionTypes()
	return func(t string) bool {
		return slices.Contains(mine[:], t) || meta.FindStatusCondition(want.Conditions, t) != nil
	}
}

// shows reports whether status got shows want in every field the mirror
// writes, whatever the order of the lists the API server merged.
func shows(got, want schedulingv1alpha1.WaitingPodStatus) bool {
	owns := mirrorOwns(&want)
	got.Conditions, _ = splitConditions(got.Conditions, owns)
	want.Conditions, _ = splitConditions(want.Conditions, owns)
	byName := func(a, b schedulingv1alpha1.PendingPlugin) int { return strings.Compare(a.Name, b.Name) }
	got.PendingPlugins = slices.SortedFunc(slices.Values(got.PendingPlugins), byName)
	want.PendingPlugins = slices.SortedFunc(slices.Values(want.PendingPlugins), byName)
	byClaim := func(a, b schedulingv1alpha1.ClaimAllocation) int { return strings.Compare(a.Name, b.Name) }
	got.Claims = slices.SortedFunc(slices.Values(got.Claims), byClaim)
	want.Claims = slices.SortedFunc(slices.Values(want.Claims), byClaim)
	return equality.Semantic.DeepEqual(got, want)
}

func newWaitingPod(pod *corev1.Pod) *schedulingv1alpha1.WaitingPod {
	return &schedulingv1alpha1.WaitingPod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace,
			Name:      pod.Name,
			// The pod's labels let `kubectl approve --all -l` and
			// `kubectl get waitingpods -l` select by the pod's labels.
			Labels: pod.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
			}},
		},
		Spec: schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
	}
}

// desiredStatus is the status rec gives. It starts from the status last
// written, so a condition that did not change keeps its transition time;
// now stamps the ones that did.
// group is the pod's PodGroup (podGroupOf), held the devices it would get
// (devicesOf).
func desiredStatus(rec *record, group string, held heldDevices, now time.Time) schedulingv1alpha1.WaitingPodStatus {
	st := schedulingv1alpha1.WaitingPodStatus{}
	if rec.written != nil {
		rec.written.DeepCopyInto(&st)
	}
	// Stored times have whole seconds; so has what is compared with them.
	stamp := metav1.NewTime(now.Truncate(time.Second))
	set := func(c metav1.Condition) {
		c.LastTransitionTime = stamp
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if rec.observed {
		setObservedStatus(&st, rec, group, held, set)
	}
	if rec.decision != nil {
		set(*rec.decision)
	}
	return st
}

// setObservedStatus writes the scheduler's observation in rec, the pod's
// group and its claims' devices into st, setting conditions with set.
func setObservedStatus(st *schedulingv1alpha1.WaitingPodStatus, rec *record, group string, held heldDevices, set func(metav1.Condition)) {
	st.PodUID = rec.pod.UID
	st.Profile = rec.profile
	st.PodGroup = group
	st.NodeName = rec.node
	if rec.resolved && rec.resolution != framework.PermitAllowed {
		// Rejected or timed out, the pod is pending again: nothing is
		// reserved for it on that node any more.
		st.NodeName = ""
	}
	st.Claims = held.claims
	st.ExtendedResourceDevices = held.extended
	st.PendingPlugins = nil
	st.Plugins = ""
	st.Expires = nil
	st.Message = ""
	if !rec.resolved {
		pending := slices.Sorted(maps.Keys(rec.deadlines))
		var said []string
		for _, name := range pending {
			d := metav1.NewTime(rec.deadlines[name].Truncate(time.Second))
			msg := rec.messages[name]
			st.PendingPlugins = append(st.PendingPlugins, schedulingv1alpha1.PendingPlugin{Name: name, Deadline: &d, Message: msg})
			if st.Expires == nil || d.Before(st.Expires) {
				st.Expires = &d
			}
			if msg != "" {
				said = append(said, name+": "+msg)
			}
		}
		st.Plugins = strings.Join(pending, ",")
		st.Message = strings.Join(said, "; ")
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionTrue, Reason: reasonHeld,
			Message: fmt.Sprintf("Held on node %s by %s", rec.node, strings.Join(pending, ", ")),
		})
		set(approval.DecidableCondition(pending))
		// A new wait starts a new story: an earlier expiry no longer holds.
		meta.RemoveStatusCondition(&st.Conditions, schedulingv1alpha1.WaitingPodExpired)
		return
	}
	// Decidable speaks of a hold; there is none now.
	meta.RemoveStatusCondition(&st.Conditions, schedulingv1alpha1.WaitingPodDecidable)
	switch rec.resolution {
	case framework.PermitAllowed:
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: reasonAllowed,
			Message: "Every Permit plugin allowed the pod; it proceeds to binding",
		})
	case framework.PermitTimedOut:
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: reasonTimeout, Message: rec.message,
		})
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodExpired, Status: metav1.ConditionTrue, Reason: reasonTimeout,
			Message: rec.message + "; the pod is pending again and a decision still applies when it returns",
		})
	default:
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.WaitingPodRejected, Message: rec.message,
		})
		set(metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodRejected, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.WaitingPodRejected, Message: rec.message,
		})
	}
}
