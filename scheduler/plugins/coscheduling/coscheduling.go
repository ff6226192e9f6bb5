package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Name is the plugin's name in profiles.
const Name = "Coscheduling"

// PodGroupEvents is the queue event resource of PodGroups (upstream's GVK string form).
const PodGroupEvents framework.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// Upstream's status messages.
const (
	msgPodGroupNotFound  = "PodGroup not found"
	msgNoPodGroup        = "can not find pod group"
	msgRejectPostFilter  = "optimistic rejection in PostFilter"
	msgRejectInUnreserve = "rejection in Unreserve"
)

// resourceCheckMinTTL is how long a passed resource check is remembered
// when permitWaitingTimeSeconds is 0: upstream's cache then falls back to
// its default expiration.
const resourceCheckMinTTL = 3 * time.Second

// defaultWaitTime is upstream's wait when neither the group nor the args
// give one.
const defaultWaitTime = 60 * time.Second

// PodGroups looks up PodGroups; the operator backs it with its informer cache (no API call).
type PodGroups interface {
	// Get returns the PodGroup namespace/name, or nil and no error when there is none.
	Get(ctx context.Context, namespace, name string) (*podgroupv1alpha1.PodGroup, error)
}

// Option configures the plugin's factory.
type Option func(*options)

type options struct {
	clock clock.PassiveClock
}

// WithClock sets the clock that times backoff, resource checks and
// failures (tests).
func WithClock(clk clock.PassiveClock) Option {
	return func(o *options) { o.clock = clk }
}

// Register adds the plugin, backed by groups, to r.
func Register(r fwkruntime.Registry, groups PodGroups, opts ...Option) error {
	return r.Register(Name, NewFactory(groups, opts...), fwkruntime.TypedArgs(func() *CoschedulingArgs { return &CoschedulingArgs{} }, SetDefaults, Validate))
}

// NewFactory returns the plugin factory, backed by groups.
func NewFactory(groups PodGroups, opts ...Option) fwkruntime.Factory {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	return func(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		args, ok := obj.(*CoschedulingArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type CoschedulingArgs, got %T", obj)
		}
		podInformer := h.SharedInformerFactory().Core().V1().Pods().Informer()
		if err := addMemberIndex(podInformer); err != nil {
			return nil, err
		}
		return &coscheduling{
			handle:          h,
			groups:          groups,
			pods:            podInformer.GetIndexer(),
			clock:           o.clock,
			permitWait:      time.Duration(*args.PermitWaitingTimeSeconds) * time.Second,
			backoff:         time.Duration(*args.PodGroupBackoffSeconds) * time.Second,
			rejectThreshold: float64(*args.PodGroupRejectPercentage) / 100,
			admitted:        map[string]sets.Set[types.UID]{},
			backedOff:       map[string]time.Time{},
			resourcesOK:     map[string]time.Time{},
			lastFailure:     map[string]time.Time{},
		}, nil
	}
}

type coscheduling struct {
	handle framework.Handle
	groups PodGroups
	// pods is the loop's pod informer's store, indexed by group.
	pods            toolscache.Indexer
	clock           clock.PassiveClock
	permitWait      time.Duration
	backoff         time.Duration
	rejectThreshold float64

	// mu guards the maps below and makes HoldChanged's count and its
	// allowing of the waiting members one step against other
	// HoldChanged calls, PostFilters and Unreserves. Lock order: mu, then
	// the framework's waiting-pods lock (GetWaitingPod, briefly) or a
	// waiting pod's lock (HeldBy, Reject, SetPendingMessage,
	// AllowWaitingPodsTogether). The framework calls plugins, its
	// observers and IterateOverWaitingPods' callbacks without holding
	// those locks, so it never waits for mu while holding one. Other
	// plugins may hold their own lock when they call Allow, which calls
	// HoldChanged (ManualApproval's timer does): the plugin never calls
	// into another plugin, so they never wait for each other the other way
	// round. The queue calls Less under its own lock, and Less takes mu;
	// the plugin never calls into the queue.
	mu sync.Mutex
	// admitted holds, per group full name, the UIDs of the members this
	// plugin let past Permit (Success, or allowed as a waiting member)
	// whose Unreserve has not run. Members gone from the informer are
	// dropped when their group is counted.
	admitted map[string]sets.Set[types.UID]
	// backedOff maps a group's full name to when its backoff ends.
	backedOff map[string]time.Time
	// resourcesOK maps a group's full name to when its passed minResources
	// check expires (upstream's permittedPG).
	resourcesOK map[string]time.Time
	// lastFailure maps a group's full name to when it last failed; Less
	// sorts the group's pods by it so a failed group does not block the
	// head of the queue (scheduler-plugins #949).
	lastFailure map[string]time.Time
}

var (
	_ framework.QueueSortPlugin   = (*coscheduling)(nil)
	_ framework.PreFilterPlugin   = (*coscheduling)(nil)
	_ framework.PostFilterPlugin  = (*coscheduling)(nil)
	_ framework.GangPermitPlugin  = (*coscheduling)(nil)
	_ framework.ReservePlugin     = (*coscheduling)(nil)
	_ framework.EnqueueExtensions = (*coscheduling)(nil)
)

func (pl *coscheduling) Name() string { return Name }

// groupName returns the pod's group label, empty when it has none.
func groupName(pod *v1.Pod) string {
	return pod.Labels[podgroupv1alpha1.PodGroupLabel]
}

// fullName is upstream's key of a group: namespace/label.
func fullName(pod *v1.Pod) string {
	return pod.Namespace + "/" + groupName(pod)
}

// isMember reports whether pod belongs to the group namespace/name.
func isMember(pod *v1.Pod, namespace, name string) bool {
	return pod.Namespace == namespace && groupName(pod) == name
}

// podGroup returns the pod's PodGroup, or nil when the pod has no group
// label or its PodGroup does not exist.
func (pl *coscheduling) podGroup(ctx context.Context, pod *v1.Pod) (*podgroupv1alpha1.PodGroup, error) {
	name := groupName(pod)
	if name == "" {
		return nil, nil
	}
	pg, err := pl.groups.Get(ctx, pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("getting PodGroup %s/%s of pod %s: %w", pod.Namespace, name, klog.KObj(pod), err)
	}
	return pg, nil
}

// memberIndex indexes the loop's pod informer by group, "namespace/name":
// PreFilter, Permit and PostFilter list a group's members for every member,
// which a label selector over the namespace would make quadratic in the
// namespace's pods (upstream lists so; at 3000 pods it was half the CPU).
const memberIndex = "coscheduling/pod-group"

func indexByGroup(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || groupName(pod) == "" {
		return nil, nil
	}
	return []string{fullName(pod)}, nil
}

// addMemberIndex adds memberIndex to the pod informer once, whichever
// instance of the plugin comes first; the informer indexes the pods it
// already holds, if it runs.
func addMemberIndex(informer toolscache.SharedIndexInformer) error {
	if _, err := framework.AddIndex(informer, memberIndex, indexByGroup); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	return nil
}

// members lists the group's pods from the pod informer: every phase but
// the terminal ones, which the scheduler's informer leaves out. The pods
// are the informer's: read them, never change them.
func (pl *coscheduling) members(namespace, name string) ([]*v1.Pod, error) {
	objs, err := pl.pods.ByIndex(memberIndex, namespace+"/"+name)
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*v1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// waitingMembers returns the group's pods waiting at Permit, found through
// the member index rather than by scanning every waiting pod.
func (pl *coscheduling) waitingMembers(namespace, name string) []framework.WaitingPod {
	pods, err := pl.members(namespace, name)
	if err != nil {
		return nil
	}
	var out []framework.WaitingPod
	for _, p := range pods {
		if wp := pl.waitingMember(p, namespace, name); wp != nil {
			out = append(out, wp)
		}
	}
	return out
}

// waitingMember returns p's waiting pod if p waits at Permit as a member of
// namespace/name: group membership is read from the pod the scheduler
// holds, not from the informer's copy, whose label may have changed since.
func (pl *coscheduling) waitingMember(p *v1.Pod, namespace, name string) framework.WaitingPod {
	wp := pl.handle.GetWaitingPod(p.UID)
	if wp == nil || !isMember(wp.GetPod(), namespace, name) {
		return nil
	}
	return wp
}

// Less orders pods by priority, then by their group's last failure or
// creation time (the pod's first queueing time when it has no group), then
// by namespace/name, as upstream does.
func (pl *coscheduling) Less(a, b *framework.QueuedPodInfo) bool {
	p1, p2 := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod)
	if p1 != p2 {
		return p1 > p2
	}
	t1, t2 := pl.queueTime(a), pl.queueTime(b)
	if !t1.Equal(t2) {
		return t1.Before(t2)
	}
	return a.Pod.Namespace+"/"+a.Pod.Name < b.Pod.Namespace+"/"+b.Pod.Name
}

func (pl *coscheduling) queueTime(qpi *framework.QueuedPodInfo) time.Time {
	initial := qpi.Timestamp
	if qpi.InitialAttemptTimestamp != nil {
		initial = *qpi.InitialAttemptTimestamp
	}
	pod := qpi.Pod
	if groupName(pod) == "" {
		return initial
	}
	pl.mu.Lock()
	failed, ok := pl.lastFailure[fullName(pod)]
	pl.mu.Unlock()
	if ok {
		return failed
	}
	// Less has no context; the lookup is served from a cache.
	pg, err := pl.podGroup(context.Background(), pod)
	if err != nil || pg == nil {
		return initial
	}
	return pg.CreationTimestamp.Time
}

// PreFilter keeps a member from taking a node while its group is backed
// off, has too few members or gated members, or cannot fit minResources.
// Every refusal is UnschedulableAndUnresolvable, so preemption does not
// run for it, as upstream.
func (pl *coscheduling) PreFilter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	pg, err := pl.podGroup(ctx, pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if pg == nil {
		return nil, nil
	}
	if err := pl.preFilter(ctx, pod, pg); err != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	return nil, nil
}

func (pl *coscheduling) preFilter(ctx context.Context, pod *v1.Pod, pg *podgroupv1alpha1.PodGroup) error {
	full := fullName(pod)
	now := pl.clock.Now()
	pl.mu.Lock()
	backedOff := pl.unexpired(pl.backedOff, full, now)
	pl.mu.Unlock()
	if backedOff {
		return fmt.Errorf("podGroup %v failed recently", full)
	}
	pods, err := pl.members(pod.Namespace, pg.Name)
	if err != nil {
		return fmt.Errorf("podLister list pods failed: %w", err)
	}
	minMember := int(pg.Spec.MinMember)
	quorumGap := minMember - len(pods)
	if quorumGap > 0 {
		return fmt.Errorf("pre-filter pod %v cannot find enough sibling pods, current pods number: %v, minMember of group: %v", pod.Name, len(pods), minMember)
	}
	for _, p := range pods {
		if len(p.Spec.SchedulingGates) > 0 {
			quorumGap++
		}
		if quorumGap > 0 {
			return fmt.Errorf("pre-filter pod %v cannot proceed due to gated pods in the same PodGroup", pod.Name)
		}
	}
	if pg.Spec.MinResources == nil {
		return nil
	}
	pl.mu.Lock()
	checked := pl.unexpired(pl.resourcesOK, full, now)
	pl.mu.Unlock()
	if checked {
		return nil
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return err
	}
	minResources := pg.Spec.MinResources.DeepCopy()
	minResources[v1.ResourcePods] = *resource.NewQuantity(int64(minMember), resource.DecimalSI)
	if err := checkClusterResource(klog.FromContext(ctx), nodes, minResources, full); err != nil {
		return err
	}
	ttl := pl.permitWait
	if ttl == 0 {
		ttl = resourceCheckMinTTL
	}
	pl.mu.Lock()
	// Like upstream's cache Add, an unexpired entry is not extended.
	if !pl.unexpired(pl.resourcesOK, full, now) {
		pl.resourcesOK[full] = now.Add(ttl)
	}
	pl.mu.Unlock()
	return nil
}

// unexpired reports whether m holds an end time after now for key, and
// drops an expired one. Callers hold mu.
func (pl *coscheduling) unexpired(m map[string]time.Time, key string, now time.Time) bool {
	end, ok := m[key]
	if !ok {
		return false
	}
	if now.Before(end) {
		return true
	}
	delete(m, key)
	return false
}

// checkClusterResource subtracts from request what every node has left,
// counting the group's own pods there as free, and reports what remains
// unmet. Like upstream it sums over nodes, whatever their taints or
// schedulability, so it does not see fragmentation. request is consumed.
func checkClusterResource(logger klog.Logger, nodes []*framework.NodeInfo, request v1.ResourceList, full string) error {
	for _, info := range nodes {
		if info == nil || info.Node() == nil {
			continue
		}
		left := nodeLeft(logger, info, full)
		for name, quant := range request {
			quant.Sub(left[name])
			if quant.Sign() <= 0 {
				delete(request, name)
				continue
			}
			request[name] = quant
		}
		if len(request) == 0 {
			return nil
		}
	}
	// Upstream prints the Quantity structs; their strings read better.
	gap := make(map[v1.ResourceName]string, len(request))
	for name, quant := range request {
		gap[name] = quant.String()
	}
	return fmt.Errorf("resource gap: %v", gap)
}

// nodeLeft is what info has left once the pods of group full are taken off
// it; values may be negative on an overcommitted node.
func nodeLeft(logger klog.Logger, info *framework.NodeInfo, full string) v1.ResourceList {
	info = info.Snapshot()
	for _, pi := range append([]*framework.PodInfo(nil), info.Pods...) {
		if groupName(pi.Pod) != "" && fullName(pi.Pod) == full {
			if err := info.RemovePod(logger, pi.Pod); err != nil {
				logger.Error(err, "Removing a group's pod from a node copy", "pod", klog.KObj(pi.Pod), "node", info.Node().Name)
			}
		}
	}
	alloc, req := info.Allocatable, info.Requested
	left := v1.ResourceList{
		v1.ResourcePods:             *resource.NewQuantity(int64(alloc.AllowedPodNumber-len(info.Pods)), resource.BinarySI),
		v1.ResourceCPU:              *resource.NewMilliQuantity(alloc.MilliCPU-req.MilliCPU, resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(alloc.Memory-req.Memory, resource.BinarySI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(alloc.EphemeralStorage-req.EphemeralStorage, resource.BinarySI),
	}
	for name, q := range alloc.ScalarResources {
		format := resource.DecimalSI
		if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			format = resource.BinarySI
		}
		left[name] = *resource.NewQuantity(q-req.ScalarResources[name], format)
	}
	return left
}

func (pl *coscheduling) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// PostFilter rejects the whole group when a member fits nowhere and more
// than podGroupRejectPercentage of minMember is still unassigned: its
// waiting members give their nodes back, and the group backs off.
func (pl *coscheduling) PostFilter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	pg, err := pl.podGroup(ctx, pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if pg == nil {
		return &framework.PostFilterResult{}, framework.NewStatus(framework.Unschedulable, msgNoPodGroup)
	}
	full := fullName(pod)
	minMember := int(pg.Spec.MinMember)

	pl.mu.Lock()
	defer pl.mu.Unlock()
	// Members that another Permit plugin also holds have a node: they are
	// placed, if not yet counted toward the quorum.
	g := pl.gang(pod.Namespace, pg.Name)
	placed := g.counted + len(g.held)
	if placed >= minMember {
		return nil, framework.NewStatus(framework.Unschedulable)
	}
	if float64(minMember-placed)/float64(minMember) <= pl.rejectThreshold {
		return nil, framework.NewStatus(framework.Unschedulable)
	}
	for _, wp := range append(g.ready, g.held...) {
		wp.Reject(Name, msgRejectPostFilter)
	}
	if pl.backoff > 0 {
		if pods, err := pl.members(pod.Namespace, pg.Name); err == nil && len(pods) >= minMember {
			now := pl.clock.Now()
			// Like upstream's cache Add, an unexpired backoff is not extended.
			if !pl.unexpired(pl.backedOff, full, now) {
				pl.backedOff[full] = now.Add(pl.backoff)
			}
		}
	}
	delete(pl.resourcesOK, full)
	pl.lastFailure[full] = pl.clock.Now()
	return nil, framework.NewStatus(framework.Unschedulable,
		fmt.Sprintf("PodGroup %v gets rejected due to Pod %v is unschedulable even after PostFilter", full, pod.Name))
}

// gangState is a group's members as HoldChanged and PostFilter count them.
type gangState struct {
	// counted is how many members count toward the quorum: those bound
	// by this profile (per the informer), those this plugin let through
	// and that were not unreserved since, and those waiting that this
	// plugin alone holds. A member let through whose binding then fails
	// still counts until its Unreserve runs, as upstream's does; the
	// members this lets go are re-checked one by one as they are allowed
	// (AllowWaitingPodsTogether), and that Unreserve rejects those still
	// waiting.
	counted int
	// ready are the waiting members this plugin alone holds: a quorum lets
	// them go.
	ready []framework.WaitingPod
	// held are the waiting members another Permit plugin holds too; they
	// count once it lets them go.
	held []framework.WaitingPod
}

// gang counts the group's members, in one pass over the member index. It
// drops admitted entries of the group's pods that are gone. Callers hold
// mu.
//
// A bound member counts only if its schedulerName is this profile's: a pod
// bound by another scheduler or profile never waited here, and its label
// says nothing the operator can trust. Bound members are read from the
// informer, not the snapshot: the snapshot also holds assumed pods, among
// them a rejected member whose Unreserve has not run yet, which must not
// count.
func (pl *coscheduling) gang(namespace, name string) gangState {
	var g gangState
	pods, err := pl.members(namespace, name)
	if err != nil {
		return g
	}
	full := namespace + "/" + name
	admitted := pl.admitted[full]
	live := 0
	for _, p := range pods {
		if admitted.Has(p.UID) {
			live++
			g.counted++
			continue
		}
		if pl.boundHere(p) {
			g.counted++
			continue
		}
		wp := pl.waitingMember(p, namespace, name)
		if wp == nil {
			continue
		}
		switch held, alone := wp.HeldBy(Name); {
		case alone:
			g.counted++
			g.ready = append(g.ready, wp)
		case held:
			g.held = append(g.held, wp)
		}
	}
	if live < admitted.Len() {
		pl.dropGone(full, pods)
	}
	return g
}

// boundHere reports whether p was bound by this profile.
func (pl *coscheduling) boundHere(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.Spec.SchedulerName == pl.handle.ProfileName()
}

// dropGone forgets the admitted members of group full that are not among
// pods any more. Callers hold mu.
func (pl *coscheduling) dropGone(full string, pods []*v1.Pod) {
	live := make(sets.Set[types.UID], len(pods))
	for _, p := range pods {
		live.Insert(p.UID)
	}
	admitted := pl.admitted[full]
	for uid := range admitted {
		if !live.Has(uid) {
			admitted.Delete(uid)
		}
	}
	if admitted.Len() == 0 {
		delete(pl.admitted, full)
	}
}

// placed counts the members of the group other than pod that have a node:
// bound by this profile, let through, or waiting at Permit whatever holds
// them. Callers hold mu.
func (pl *coscheduling) placed(pod *v1.Pod, name string) int {
	pods, err := pl.members(pod.Namespace, name)
	if err != nil {
		return 0
	}
	admitted := pl.admitted[pod.Namespace+"/"+name]
	n := 0
	for _, p := range pods {
		if p.UID != pod.UID && (admitted.Has(p.UID) || pl.boundHere(p) || pl.waitingMember(p, pod.Namespace, name) != nil) {
			n++
		}
	}
	return n
}

// progress is what a waiting member's WaitingPod says of its gang.
func (g gangState) progress(minMember int) string {
	msg := fmt.Sprintf("%d/%d members assigned", g.counted, minMember)
	if len(g.held) > 0 {
		msg += fmt.Sprintf(", %d more held by other Permit plugins", len(g.held))
	}
	return msg
}

// Permit holds every member of a group. The member counts toward its
// group's quorum once no other Permit plugin holds it, which the framework
// says by calling HoldChanged as soon as the member waits, and again each
// time another plugin allows it; HoldChanged lets the gang go.
func (pl *coscheduling) Permit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if groupName(pod) == "" {
		return nil, 0
	}
	pg, err := pl.podGroup(ctx, pod)
	if err != nil {
		return framework.AsStatus(err), 0
	}
	if pg == nil {
		return framework.NewStatus(framework.Unschedulable, msgPodGroupNotFound), 0
	}
	// Siblings are activated while the group has too few members with a
	// node for this one to complete it, as upstream's waiting member does;
	// a member that may complete it activates none, as upstream's last.
	pl.mu.Lock()
	placed := pl.placed(pod, pg.Name)
	pl.mu.Unlock()
	if placed+1 < int(pg.Spec.MinMember) {
		pl.activateSiblings(state, pod)
	}
	return framework.NewStatus(framework.Wait), pl.waitTime(pg)
}

// HoldChanged counts the member's group again and, once minMember members
// count, lets every member this plugin alone holds go in one step that
// fails if any of them was resolved meanwhile: then nobody goes, and the
// gang waits for the resolved one's Unreserve to take the others back.
// Otherwise every waiting member is told how far the gang is.
func (pl *coscheduling) HoldChanged(ctx context.Context, wp framework.WaitingPod) {
	pod := wp.GetPod()
	logger := klog.FromContext(ctx)
	pg, err := pl.podGroup(ctx, pod)
	if err != nil || pg == nil {
		// It was found at Permit; without it now the member waits for
		// its timeout, as upstream's would.
		logger.V(4).Info("PodGroup of a waiting member not found", "pod", klog.KObj(pod), "err", err)
		return
	}
	full := fullName(pod)
	minMember := int(pg.Spec.MinMember)

	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gang(pod.Namespace, pg.Name)
	waiting := append(g.ready, g.held...)
	if g.counted >= minMember && pl.handle.AllowWaitingPodsTogether(Name, g.ready) {
		for _, m := range g.ready {
			pl.admit(full, m.GetPod().UID)
		}
		delete(pl.lastFailure, full)
		logger.V(3).Info("Pod group reached its quorum", "podGroup", full, "members", g.counted, "minMember", minMember)
		// Members that other plugins still hold go once they let them.
		waiting = g.held
	}
	msg := g.progress(minMember)
	for _, m := range waiting {
		m.SetPendingMessage(Name, msg)
	}
}

// admit records that member uid of group full got past Permit. Callers
// hold mu.
func (pl *coscheduling) admit(full string, uid types.UID) {
	if pl.admitted[full] == nil {
		pl.admitted[full] = sets.New[types.UID]()
	}
	pl.admitted[full].Insert(uid)
}

// waitTime is the group's scheduleTimeoutSeconds, else
// permitWaitingTimeSeconds, with upstream's precedence and fallbacks.
func (pl *coscheduling) waitTime(pg *podgroupv1alpha1.PodGroup) time.Duration {
	if s := pg.Spec.ScheduleTimeoutSeconds; s != nil {
		if *s != 0 {
			return time.Duration(*s) * time.Second
		}
		return pl.permitWait
	}
	if pl.permitWait != 0 {
		return pl.permitWait
	}
	return defaultWaitTime
}

// activateSiblings asks the scheduler to move the pod's siblings to the
// active queue, so that members parked as unschedulable get their turn.
func (pl *coscheduling) activateSiblings(state *framework.CycleState, pod *v1.Pod) {
	toActivate, err := framework.ReadAs[*framework.PodsToActivate](state, framework.PodsToActivateKey)
	if err != nil {
		return
	}
	pods, err := pl.members(pod.Namespace, groupName(pod))
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.UID != pod.UID {
			toActivate.Add(p)
		}
	}
}

// Reserve does nothing; the plugin is a Reserve plugin for Unreserve.
func (pl *coscheduling) Reserve(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

// Unreserve runs when a member failed after Reserve (rejected, timed out,
// deleted while waiting, binding failed): the members still waiting give
// their nodes back too, and the group is marked failed.
func (pl *coscheduling) Unreserve(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) {
	pg, err := pl.podGroup(ctx, pod)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unreserving a pod group member")
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if set := pl.admitted[fullName(pod)]; set != nil {
		set.Delete(pod.UID)
		if set.Len() == 0 {
			delete(pl.admitted, fullName(pod))
		}
	}
	if pg == nil {
		return
	}
	for _, wp := range pl.waitingMembers(pod.Namespace, pg.Name) {
		wp.Reject(Name, msgRejectInUnreserve)
	}
	full := fullName(pod)
	delete(pl.resourcesOK, full)
	pl.lastFailure[full] = pl.clock.Now()
}

// EventsToRegister is upstream's: a new pod may complete a group, and a
// new or changed PodGroup may let its members through. Neither has a
// queueing hint (upstream's were reverted in scheduler-plugins #983).
func (pl *coscheduling) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: PodGroupEvents, ActionType: framework.Add | framework.Update}},
	}, nil
}
