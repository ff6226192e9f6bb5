package controllers

import (
	"context"
	"fmt"
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
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
)

// podGroupIndex indexes the member informer by "namespace/group": a group's
// members are those of its own namespace only. scheduler-plugins' controller
// lists by label across every namespace, so two groups of the same name in
// two namespaces count each other's pods; this one does not.
const podGroupIndex = "podGroup"

func indexByPodGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := groupOf(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// NewPodGroupMemberInformer returns an informer of the pods that carry
// PodGroupLabel, in every phase and namespace, indexed by group. The
// scheduling loop's pod informer is no substitute: it leaves out finished
// pods, which a group's status counts. Run it with
// PodGroupMemberInformerRunnable.
func NewPodGroupMemberInformer(cs kubernetes.Interface) toolscache.SharedIndexInformer {
	informer := coreinformers.NewFilteredPodInformer(cs, corev1.NamespaceAll, 0,
		toolscache.Indexers{podGroupIndex: indexByPodGroup},
		func(o *metav1.ListOptions) { o.LabelSelector = podgroupv1alpha1.PodGroupLabel })
	// It fails only on a started informer, and this one is new.
	_ = informer.SetTransform(cache.TransformStripManagedFields())
	return informer
}

// PodGroupMemberInformerRunnable runs the member informer on every replica,
// leader or not, so that a standby that takes over has its members cached
// already.
func PodGroupMemberInformerRunnable(informer toolscache.SharedIndexInformer) manager.Runnable {
	return memberInformerRunnable{informer: informer}
}

type memberInformerRunnable struct {
	informer toolscache.SharedIndexInformer
}

var _ manager.LeaderElectionRunnable = memberInformerRunnable{}

func (r memberInformerRunnable) Start(ctx context.Context) error {
	r.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: standbys keep the members warm.
func (memberInformerRunnable) NeedLeaderElection() bool { return false }

// PodGroupReconciler is the one writer of PodGroup status. It derives the
// phase and the counts from the group's members as scheduler-plugins'
// PodGroup controller does, and adds what only the scheduler knows: which
// members are held at Permit (it is a framework.WaitingPodObserver), since
// when, and whether the gang got through together or timed out waiting.
//
// Observer calls come on scheduling and binding goroutines: they only update
// the in-memory record and queue the group; Reconcile writes.
type PodGroupReconciler struct {
	client   client.Client
	members  toolscache.SharedIndexInformer
	recorder events.EventRecorder

	// mu guards queue and gangs. Observer calls take it on the scheduling
	// and binding goroutines, so nothing done under it waits on I/O.
	mu sync.Mutex
	// queue is the controller's queue, nil until the controller starts;
	// groups observed before that are queued when it starts.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// gangs hold, per PodGroup, what the scheduler reported of its members.
	// A record lives while a member is held or a timeout is left to show.
	gangs map[types.NamespacedName]*gang
}

// gang is what the scheduler reported of one group's members.
type gang struct {
	// held are the members held at Permit now, by pod UID.
	held map[types.UID]heldMember
	// waits counts the waits that started; each held member has its number.
	waits uint64
	// firstHeld is when a member was first held, for scheduleStartTime.
	firstHeld time.Time
	// timeout is the last time the gang timed out waiting, nil if none is
	// left to show.
	timeout *gangTimeout
}

type heldMember struct {
	name string
	// wait is the number of this member's wait among the gang's waits.
	wait uint64
}

// gangTimeout is a wait for the rest of a gang that ended at its deadline,
// with what the gang looked like right then.
type gangTimeout struct {
	// lastWait is the number of the last wait that started before the
	// timeout. Members held then usually time out together, or are
	// released by the first one's Unreserve; their own timeouts are this
	// same one.
	lastWait uint64
	// held are the names of the members held when it timed out, sorted.
	held []string
	// members are the group's members then.
	members []memberState
	// announced is set once its event was emitted.
	announced bool
	// overcome is set once a wait that started later was allowed: the
	// gang got past Permit after all.
	overcome bool
}

// memberState is what a timeout message says of one member.
type memberState struct {
	name     string
	node     string
	deleting bool
}

var (
	_ framework.WaitingPodObserver = (*PodGroupReconciler)(nil)
	_ reconcile.Reconciler         = (*PodGroupReconciler)(nil)
)

// NewPodGroupReconciler returns the reconciler. It writes with c, reads the
// members of groups from members (NewPodGroupMemberInformer) and reports
// timeouts as events on PodGroups with recorder. Register it with
// SetupWithManager, and tee the scheduler's WaitingPodObserver to it.
func NewPodGroupReconciler(c client.Client, members toolscache.SharedIndexInformer, recorder events.EventRecorder) *PodGroupReconciler {
	return &PodGroupReconciler{
		client:   c,
		members:  members,
		recorder: recorder,
		gangs:    map[types.NamespacedName]*gang{},
	}
}

// podGroupWorkers reconcile groups in parallel; the controller never hands
// one group to two workers at once.
const podGroupWorkers = 4

// SetupWithManager registers the controller, on the elected leader only. It
// reconciles a group when the PodGroup or one of its members changes, and
// when the scheduler reports on a member's wait at Permit.
func (r *PodGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if _, err := framework.AddIndex(r.members, podGroupIndex, indexByPodGroup); err != nil {
		return fmt.Errorf("indexing PodGroup members by group: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&podgroupv1alpha1.PodGroup{}).
		WatchesRawSource(&syncedInformerSource{
			Informer: source.Informer{Informer: r.members, Handler: podGroupsOfPod()},
			synced:   r.members.HasSynced,
		}).
		WatchesRawSource(source.Func(r.startQueue)).
		Named("podgroup").
		// Like the WaitingPod controller's, the first LIST of the members
		// can take minutes on a large cluster.
		WithOptions(controller.Options{MaxConcurrentReconciles: podGroupWorkers, CacheSyncTimeout: podInformerSyncTimeout}).
		Complete(r)
}

// podGroupsOfPod queues the group of a member pod; on an update, the groups
// of both the old and the new pod, so a pod moved between groups leaves
// the first one's counts.
func podGroupsOfPod() handler.Funcs {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, obj := range objs {
			if pod, ok := obj.(*corev1.Pod); ok {
				if name := pod.Labels[podgroupv1alpha1.PodGroupLabel]; name != "" {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: name}})
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// startQueue hands the controller's queue to the observer, and queues the
// groups observed before the controller started.
func (r *PodGroupReconciler) startQueue(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = q
	for key := range r.gangs {
		q.Add(reconcile.Request{NamespacedName: key})
	}
	return nil
}

// PodWaiting records that a member is held at Permit.
func (r *PodGroupReconciler) PodWaiting(_ string, wp framework.WaitingPod) {
	pod := wp.GetPod()
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gangs[key]
	if g == nil {
		g = &gang{held: map[types.UID]heldMember{}}
		r.gangs[key] = g
	}
	if g.firstHeld.IsZero() {
		g.firstHeld = time.Now()
	}
	g.waits++
	g.held[pod.UID] = heldMember{name: pod.Name, wait: g.waits}
	r.enqueueLocked(key)
}

// PodWaitChanged changes nothing: what holds a member changed, not whether
// it is held.
func (r *PodGroupReconciler) PodWaitChanged(string, framework.WaitingPod) {}

// PodResolved records that a member's wait ended. A wait that ended at
// Coscheduling's deadline is a timeout of the gang, recorded once for all
// the members held then, with what the gang looked like right then.
func (r *PodGroupReconciler) PodResolved(_ string, pod *corev1.Pod, resolution framework.PermitResolution, status *framework.Status) {
	key, ok := groupOf(pod)
	if !ok {
		return
	}
	// Read before taking mu, so that mu is never held waiting for the
	// informer's lock.
	var members []memberState
	timedOut := resolution == framework.PermitTimedOut && status.Plugin() == coscheduling.Name
	if timedOut {
		members = r.memberStates(key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gangs[key]
	if g == nil {
		if !timedOut {
			// Its wait was not seen start; its end changes the counts all
			// the same.
			r.enqueueLocked(key)
			return
		}
		g = &gang{held: map[types.UID]heldMember{}}
		r.gangs[key] = g
	}
	h, wasHeld := g.held[pod.UID]
	if !wasHeld {
		// Its wait was not seen start: count it as the latest.
		h = heldMember{name: pod.Name, wait: g.waits}
	}
	switch {
	case timedOut && (g.timeout == nil || h.wait > g.timeout.lastWait):
		held := make([]string, 0, len(g.held)+1)
		for _, m := range g.held {
			held = append(held, m.name)
		}
		if !wasHeld {
			held = append(held, pod.Name)
		}
		slices.Sort(held)
		g.timeout = &gangTimeout{lastWait: g.waits, held: held, members: members}
	case resolution == framework.PermitAllowed && g.timeout != nil && h.wait > g.timeout.lastWait:
		g.timeout.overcome = true
	}
	delete(g.held, pod.UID)
	r.enqueueLocked(key)
}

// groupOf is the PodGroup pod is a member of.
func groupOf(pod *corev1.Pod) (types.NamespacedName, bool) {
	name := pod.Labels[podgroupv1alpha1.PodGroupLabel]
	return types.NamespacedName{Namespace: pod.Namespace, Name: name}, name != ""
}

// enqueueLocked queues key for Reconcile. Call with mu held.
func (r *PodGroupReconciler) enqueueLocked(key types.NamespacedName) {
	if r.queue != nil {
		r.queue.Add(reconcile.Request{NamespacedName: key})
	}
}

// memberPods are the members of group key in the informer, sorted by name.
// The pods are the informer's: read them, never change them.
func (r *PodGroupReconciler) memberPods(key types.NamespacedName) ([]*corev1.Pod, error) {
	objs, err := r.members.GetIndexer().ByIndex(podGroupIndex, key.String())
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// memberStates are the members of group key now, for a timeout message.
func (r *PodGroupReconciler) memberStates(key types.NamespacedName) []memberState {
	// An index missing is a setup error that Reconcile reports; the message
	// then says what the record alone knows.
	pods, _ := r.memberPods(key)
	out := make([]memberState, 0, len(pods))
	for _, pod := range pods {
		out = append(out, memberState{name: pod.Name, node: pod.Spec.NodeName, deleting: pod.DeletionTimestamp != nil})
	}
	return out
}

// gangView is a copy of a gang's record for one Reconcile.
type gangView struct {
	waiting   int32
	firstHeld time.Time
	// timeout is the record's own, compared by identity when it is
	// marked announced or dropped; its fields are read only.
	timeout *gangTimeout
	// announced and overcome are the timeout's flags when the view was
	// taken.
	announced, overcome bool
}

func (r *PodGroupReconciler) view(key types.NamespacedName) gangView {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gangs[key]
	if g == nil {
		return gangView{}
	}
	v := gangView{waiting: int32(len(g.held)), firstHeld: g.firstHeld, timeout: g.timeout}
	if g.timeout != nil {
		v.announced, v.overcome = g.timeout.announced, g.timeout.overcome
	}
	return v
}

// Reconcile writes the status of one PodGroup.
func (r *PodGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pg := &podgroupv1alpha1.PodGroup{}
	if err := r.client.Get(ctx, req.NamespacedName, pg); err != nil {
		if apierrors.IsNotFound(err) {
			r.drop(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if final(pg.Status.Phase) {
		// The status is the group's final record: its pods go when their
		// workload is cleaned up, and that must not undo it.
		r.drop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	pods, err := r.memberPods(req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the members of PodGroup %s: %w", req.NamespacedName, err)
	}
	v := r.view(req.NamespacedName)
	want := desiredPodGroupStatus(pg, pods, v, time.Now())
	if !equality.Semantic.DeepEqual(pg.Status, want) {
		patched := pg.DeepCopy()
		patched.Status = want
		// The optimistic lock keeps a status computed from a stale cache
		// (say, one that has not seen this writer's Finished yet) from
		// replacing a newer one. On a conflict the cache is behind, and
		// its event for the newer object queues the group again.
		if err := r.client.Status().Patch(ctx, patched, client.MergeFromWithOptions(pg, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				klog.FromContext(ctx).V(4).Info("PodGroup changed since it was read; waiting for the cache", "podGroup", klog.KObj(pg))
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("writing the status of PodGroup %s: %w", req.NamespacedName, err)
		}
		pg = patched
	}
	if v.timeout != nil && !v.announced {
		// After the status is written, so a write that fails and is
		// retried does not repeat the event.
		msg := timeoutMessage(pg.Spec.MinMember, v.timeout)
		r.recorder.Eventf(pg, nil, corev1.EventTypeWarning, podgroupv1alpha1.ReasonTimeout, "Schedule", "%s", msg)
		klog.FromContext(ctx).Info("Gang timed out waiting at Permit", "podGroup", klog.KObj(pg), "message", msg)
	}
	r.settle(req.NamespacedName, v.timeout, !want.ScheduleStartTime.IsZero())
	return ctrl.Result{}, nil
}

// settle records that the status written shows the record: the timeout
// shown is announced, and dropped once the gang got past Permit after it.
// The group's record goes once nothing in it is left to show: no member
// held, no timeout, and the first hold written (started) or never seen.
func (r *PodGroupReconciler) settle(key types.NamespacedName, shown *gangTimeout, started bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gangs[key]
	if g == nil {
		return
	}
	if shown != nil && g.timeout == shown {
		shown.announced = true
		if shown.overcome {
			g.timeout = nil
		}
	}
	if len(g.held) == 0 && g.timeout == nil && (started || g.firstHeld.IsZero()) {
		delete(r.gangs, key)
	}
}

// drop removes the record of a group whose status is no longer written
// (deleted, or final), unless a member is still held: its end queues the
// group again.
func (r *PodGroupReconciler) drop(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.gangs[key]; g != nil && len(g.held) == 0 {
		delete(r.gangs, key)
	}
}

// final reports whether phase is never recomputed, as in scheduler-plugins.
func final(phase podgroupv1alpha1.PodGroupPhase) bool {
	return phase == podgroupv1alpha1.PodGroupFinished || phase == podgroupv1alpha1.PodGroupFailed
}

// desiredPodGroupStatus is the status of pg with members pods (sorted by
// name) and the scheduler's record v; now stamps a condition that changes.
func desiredPodGroupStatus(pg *podgroupv1alpha1.PodGroup, pods []*corev1.Pod, v gangView, now time.Time) podgroupv1alpha1.PodGroupStatus {
	st := *pg.Status.DeepCopy()
	minMember := pg.Spec.MinMember
	st.Running, st.Succeeded, st.Failed, st.Scheduled = 0, 0, 0, 0
	for _, pod := range pods {
		switch pod.Status.Phase {
		case corev1.PodRunning:
			st.Running++
		case corev1.PodSucceeded:
			st.Succeeded++
		case corev1.PodFailed:
			st.Failed++
		}
		if pod.Spec.NodeName != "" {
			st.Scheduled++
		}
	}
	st.Waiting = v.waiting
	// scheduler-plugins moves one step per reconcile and relies on its own
	// status write to be called again; taking the steps here in one pass
	// reaches the same phase with one write. ""→Pending→Scheduling→the
	// phase of the counts is the longest chain.
	for range 4 {
		prev := st.Phase
		nextPhase(&st, minMember, pods)
		if st.Phase == prev {
			break
		}
	}
	if st.ScheduleStartTime.IsZero() && !v.firstHeld.IsZero() {
		st.ScheduleStartTime = metav1.NewTime(v.firstHeld.Truncate(time.Second))
	}

	set := func(c metav1.Condition) {
		c.Type = podgroupv1alpha1.PodGroupScheduled
		c.ObservedGeneration = pg.Generation
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		meta.SetStatusCondition(&st.Conditions, c)
	}
	switch {
	case v.timeout != nil && !v.overcome:
		set(metav1.Condition{Status: metav1.ConditionFalse, Reason: podgroupv1alpha1.ReasonTimeout, Message: timeoutMessage(minMember, v.timeout)})
	case st.Scheduled > 0 && st.Scheduled >= minMember:
		set(metav1.Condition{
			Status: metav1.ConditionTrue, Reason: podgroupv1alpha1.ReasonQuorumReached,
			Message: fmt.Sprintf("%d members bound, of %d needed together", st.Scheduled, minMember),
		})
	}
	return st
}

// nextPhase takes one step of scheduler-plugins' phase machine.
func nextPhase(st *podgroupv1alpha1.PodGroupStatus, minMember int32, pods []*corev1.Pod) {
	switch st.Phase {
	case "":
		st.Phase = podgroupv1alpha1.PodGroupPending
	case podgroupv1alpha1.PodGroupPending:
		if len(pods) >= int(minMember) {
			st.Phase = podgroupv1alpha1.PodGroupScheduling
			if len(pods) > 0 {
				if by := occupiedBy(pods[0]); by != "" {
					st.OccupiedBy = by
				}
			}
		}
	case podgroupv1alpha1.PodGroupFinished, podgroupv1alpha1.PodGroupFailed:
	default:
		if len(pods) < int(minMember) {
			st.Phase = podgroupv1alpha1.PodGroupPending
			return
		}
		if st.Succeeded+st.Running < minMember {
			st.Phase = podgroupv1alpha1.PodGroupScheduling
		} else {
			st.Phase = podgroupv1alpha1.PodGroupRunning
		}
		if st.Failed != 0 && st.Failed+st.Running+st.Succeeded >= minMember {
			st.Phase = podgroupv1alpha1.PodGroupFailed
		}
		if st.Succeeded >= minMember {
			st.Phase = podgroupv1alpha1.PodGroupFinished
		}
	}
}

// occupiedBy names pod's owners as scheduler-plugins does: sorted,
// comma-joined namespace/name; "" when it has none.
func occupiedBy(pod *corev1.Pod) string {
	owners := make([]string, 0, len(pod.OwnerReferences))
	for _, ref := range pod.OwnerReferences {
		owners = append(owners, pod.Namespace+"/"+ref.Name)
	}
	slices.Sort(owners)
	return strings.Join(owners, ",")
}

// maxNamedMembers is how many names a timeout message lists of each kind
// before it only counts the rest.
const maxNamedMembers = 10

// timeoutMessage says what t found: which members were held, bound and
// missing, e.g. "timed out after waiting for 4 members: 3 held (worker-0,
// worker-1, worker-2), missing worker-3 (not placed)".
func timeoutMessage(minMember int32, t *gangTimeout) string {
	var bound, unplaced, deleting []string
	for _, m := range t.members {
		switch {
		case slices.Contains(t.held, m.name):
		case m.deleting:
			deleting = append(deleting, m.name)
		case m.node != "":
			bound = append(bound, m.name)
		default:
			unplaced = append(unplaced, m.name)
		}
	}
	var parts, missing []string
	if len(t.held) > 0 {
		parts = append(parts, fmt.Sprintf("%d held (%s)", len(t.held), nameList(t.held)))
	}
	if len(bound) > 0 {
		parts = append(parts, fmt.Sprintf("%d bound (%s)", len(bound), nameList(bound)))
	}
	if len(unplaced) > 0 {
		missing = append(missing, nameList(unplaced)+" (not placed)")
	}
	if len(deleting) > 0 {
		missing = append(missing, nameList(deleting)+" (being deleted)")
	}
	if n := int(minMember) - len(t.members); n > 0 {
		pods := "pods"
		if n == 1 {
			pods = "pod"
		}
		missing = append(missing, fmt.Sprintf("%d %s (%d of %d exist)", n, pods, len(t.members), minMember))
	}
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	return fmt.Sprintf("timed out after waiting for %d members: %s", minMember, strings.Join(parts, ", "))
}

// nameList joins names, listing at most maxNamedMembers.
func nameList(names []string) string {
	if len(names) <= maxNamedMembers {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamedMembers], ", "), len(names)-maxNamedMembers)
}
