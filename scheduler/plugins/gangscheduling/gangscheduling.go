// Package gangscheduling provides GangScheduling, kube-scheduler 1.37's
// all-or-nothing scheduling of the pods of a scheduling.k8s.io/v1beta1
// PodGroup with a gang policy: none of them is bound until minCount of
// them have a node. Upstream adds it to the default profile only with the
// GenericWorkload gate (beta, off by default).
//
// It acts at three points. PreEnqueue keeps a member out of the active
// queue until its PodGroup exists and minCount of its pods are known.
// Permit holds each member, with its node reserved, for at most five
// minutes, until minCount members are assumed or bound, then lets the
// waiting ones go. PlacementFeasible tells the pod-group cycle, after each
// pod it placed, whether minCount is met, may still be, or cannot be.
//
// Beyond upstream, the gang goes in one step or not at all when other
// Permit plugins (ManualApproval, a quota) hold members too. Upstream lets
// each waiting member go from its own hold once minCount members are
// assumed, so a member another plugin still holds goes on later, alone,
// when that plugin lets it: approving a gang member by member would bind
// it member by member. Here a held member counts toward minCount only once
// GangScheduling alone holds it, and the members are let go with
// Handle.AllowWaitingPodsTogether (framework.GangPermitPlugin), as
// Coscheduling does. With no other plugin holding members this lets the
// same pods go at the same moment as upstream.
//
// Only leaf PodGroups are handled. Composite pod groups (CompositePodGroup,
// scheduling.k8s.io/v1alpha3, alpha in 1.37) are not: where upstream walks
// a group's hierarchy to its root (the hints' areSameHierarchy, PreEnqueue,
// Permit and getMinCount), this plugin looks at the pod's own group only,
// which is what upstream does with that gate off.
package gangscheduling

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "GangScheduling"
	// permitTimeoutDuration is how long a member waits at Permit for the
	// rest of its gang before it is rejected.
	permitTimeoutDuration = 5 * time.Minute
	// ReasonWaitingForPods is the reason of the event on a gang's
	// PodGroup while fewer than minCount of its pods exist.
	ReasonWaitingForPods = "WaitingForPods"
)

// gangScheduling reads pod groups from two views: podGroupManager, the
// scheduler cache's live one, at PreEnqueue, in the queueing hints and for
// the group's pods at Permit; snapshotLister, the cycle's snapshot, for
// the PodGroup object at Permit, as upstream.
type gangScheduling struct {
	handle          framework.Handle
	podGroupManager framework.PodGroupManager
	snapshotLister  framework.SharedLister

	// mu makes HoldChanged's count and its letting go of the members one
	// step against other HoldChanged calls. Lock order: mu, then a waiting
	// pod's lock (HeldBy, SetPendingMessage, AllowWaitingPodsTogether); the
	// framework calls HoldChanged holding none of its own locks.
	mu sync.Mutex
	// admitted holds, per group, the members this plugin let go from
	// Permit that are still assumed: they count toward minCount until they
	// are bound (then they count as assigned) or forgotten. An assumed
	// member not in it has not passed Permit yet, or waits there; one in
	// it that waits there again was forgotten and is tried anew.
	admitted map[framework.EntityKey]sets.Set[types.UID]
}

var (
	_ framework.EnqueueExtensions       = (*gangScheduling)(nil)
	_ framework.PreEnqueuePlugin        = (*gangScheduling)(nil)
	_ framework.GangPermitPlugin        = (*gangScheduling)(nil)
	_ framework.PlacementFeasiblePlugin = (*gangScheduling)(nil)
)

// New returns the plugin; it takes no args. It needs the scheduler cache's
// pod groups and the cycle's snapshot.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h.PodGroupManager() == nil {
		return nil, errors.New("PodGroupManager is nil")
	}
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	return &gangScheduling{
		handle:          h,
		podGroupManager: h.PodGroupManager(),
		snapshotLister:  h.SnapshotSharedLister(),
		admitted:        map[framework.EntityKey]sets.Set[types.UID]{},
	}, nil
}

func (*gangScheduling) Name() string { return Name }

// EventsToRegister: a member added, unscheduled or bound, may complete a
// gang's minCount; the PodGroup appearing, or its minCount decreasing, may
// let its members through. Upstream registers no Pod update: a pod's
// scheduling group is immutable.
func (pl *gangScheduling) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterPodAdded},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterPodAdded},
		{Event: framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterPodGroupAdded},
		{Event: framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Update}, QueueingHintFn: pl.isSchedulableAfterPodGroupUpdated},
	}, nil
}

// isSchedulableAfterPodAdded queues the pod when the added pod, unscheduled
// or bound, is of its group.
func (pl *gangScheduling) isSchedulableAfterPodAdded(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, addedPod, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return framework.QueueSkip, nil
	}
	addedPodGroupName, ok := framework.PodGroupNameOf(addedPod)
	if !ok {
		return framework.QueueSkip, nil
	}
	if sameGroup(pod.Namespace, podGroupName, framework.PodGroupKey(addedPod.Namespace, addedPodGroupName)) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterPodGroupUpdated queues the pod when its group's gang
// minCount decreased.
func (pl *gangScheduling) isSchedulableAfterPodGroupUpdated(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldPodGroup, newPodGroup, err := helper.As[*schedulingv1beta1.PodGroup](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return framework.QueueSkip, nil
	}
	if !sameGroup(pod.Namespace, podGroupName, framework.PodGroupKey(newPodGroup.Namespace, newPodGroup.Name)) {
		return framework.QueueSkip, nil
	}
	oldPolicy, newPolicy := oldPodGroup.Spec.SchedulingPolicy, newPodGroup.Spec.SchedulingPolicy
	// Updates to non-gang policies will not make the waiting pods schedulable.
	if newPolicy.Gang == nil || oldPolicy.Gang == nil {
		return framework.QueueSkip, nil
	}
	if newPolicy.Gang.MinCount >= oldPolicy.Gang.MinCount {
		logger.V(5).Info("PodGroup minCount did not decrease, skipping", "pod", klog.KObj(pod), "podGroup", klog.KObj(newPodGroup), "oldMinCount", oldPolicy.Gang.MinCount, "newMinCount", newPolicy.Gang.MinCount)
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("Pod group was updated and minCount decreased, enqueuing pod", "pod", klog.KObj(pod), "podGroup", klog.KObj(newPodGroup), "oldMinCount", oldPolicy.Gang.MinCount, "newMinCount", newPolicy.Gang.MinCount)
	return framework.Queue, nil
}

// isSchedulableAfterPodGroupAdded queues the pod when its group appeared.
func (pl *gangScheduling) isSchedulableAfterPodGroupAdded(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, addedPodGroup, err := helper.As[*schedulingv1beta1.PodGroup](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return framework.QueueSkip, nil
	}
	if sameGroup(pod.Namespace, podGroupName, framework.PodGroupKey(addedPodGroup.Namespace, addedPodGroup.Name)) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// sameGroup reports whether the pod group namespace/podGroupName is
// target. Upstream's areSameHierarchy compares the two groups' root
// composite groups here; without composite groups each group is its own
// root.
func sameGroup(namespace, podGroupName string, target framework.EntityKey) bool {
	return framework.PodGroupKey(namespace, podGroupName) == target
}

// PreEnqueue keeps a member of a gang out of the active queue until its
// PodGroup is known and minCount of the group's pods are.
func (pl *gangScheduling) PreEnqueue(_ context.Context, pod *v1.Pod) *framework.Status {
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return nil
	}
	namespace := pod.Namespace
	podGroup, err := pl.podGroupManager.PodGroups().Get(namespace, podGroupName)
	if err != nil {
		// The pod is unschedulable until its PodGroup object is created.
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for pods's pod group %q to appear in scheduling queue", podGroupName))
	}
	policy := podGroup.Spec.SchedulingPolicy
	// Only a gang policy holds pods back.
	if policy.Gang == nil {
		return nil
	}
	podGroupState, err := pl.podGroupManager.PodGroupStates().Get(namespace, podGroupName)
	if err != nil {
		return framework.AsStatus(err)
	}
	if n := podGroupState.AllPodsCount(); n < int(policy.Gang.MinCount) {
		pl.recordWaitingForPods(podGroup, pod, n)
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for minCount pods from a gang to appear in scheduling queue")
	}
	return nil
}

// recordWaitingForPods tells the PodGroup's owner, beyond upstream, which
// writes nothing while a gang lacks pods, how many of minCount exist: a
// minCount above the pods that will ever come otherwise waits silently.
// The event relates to the pod asked about: the recorder folds events
// that differ only in their note into one series keeping the first note,
// so one event per pod keeps each new count visible.
func (pl *gangScheduling) recordWaitingForPods(podGroup *schedulingv1beta1.PodGroup, pod *v1.Pod, pods int) {
	r := pl.handle.EventRecorder()
	if r == nil {
		return
	}
	r.Eventf(podGroup, pod, v1.EventTypeNormal, ReasonWaitingForPods, "Scheduling",
		"waiting for minCount pods from a gang to appear in scheduling queue: %d of minCount %d pods exist", pods, podGroup.Spec.SchedulingPolicy.Gang.MinCount)
}

// Permit holds a member of a gang until minCount of the group's pods are
// assumed or bound; HoldChanged lets the gang go.
func (pl *gangScheduling) Permit(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return nil, 0
	}
	namespace := pod.Namespace
	podGroup, err := pl.snapshotLister.PodGroups().Get(namespace, podGroupName)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("failed to get podGroup %s/%s: %w", namespace, podGroupName, err)), 0
	}
	// A composite group's member would be permitted for its whole
	// hierarchy here (upstream's permitPodForHierarchy).
	podGroupState, err := pl.podGroupManager.PodGroupStates().Get(namespace, podGroup.Name)
	if err != nil {
		return framework.AsStatus(err), 0
	}
	return pl.permitPodGroup(klog.FromContext(ctx), pod, podGroup, podGroupState)
}

func (pl *gangScheduling) permitPodGroup(logger klog.Logger, pod *v1.Pod, podGroup *schedulingv1beta1.PodGroup, podGroupState framework.PodGroupState) (*framework.Status, time.Duration) {
	if podGroup.Spec.SchedulingPolicy.Gang == nil {
		return nil, 0
	}
	if podGroupState.ScheduledPodsCount() < int(podGroup.Spec.SchedulingPolicy.Gang.MinCount) {
		// Activate the group's unscheduled pods, in case they wait for
		// this one to be scheduled.
		unscheduledPods := podGroupState.UnscheduledPods()
		pl.handle.Activate(logger, unscheduledPods)
		logger.V(4).Info("Quorum is not met for a gang. Waiting for another pod to allow", "pod", klog.KObj(pod), "schedulingGroup", podGroup.Name, "activatedPods", len(unscheduledPods))
	}
	// Upstream lets the waiting members go here once the quorum is met,
	// and passes the pod. The pod waits instead, and HoldChanged, which
	// the framework calls before the wait starts, lets the gang go with it
	// in one step: RunPermitPlugins then passes the pod at once, as
	// upstream's Permit does, unless another plugin holds a member.
	return framework.NewStatus(framework.Wait, msgWaiting), permitTimeoutDuration
}

// msgWaiting is upstream's message for a member held at Permit.
const msgWaiting = "waiting for minCount pods from a gang to be scheduled"

// gangState is a group's scheduled members as HoldChanged counts them.
type gangState struct {
	// counted are the members that count toward minCount: bound, let go
	// by this plugin and still assumed, or waiting for this plugin alone.
	counted int
	// ready are the waiting members this plugin alone holds.
	ready []framework.WaitingPod
	// held are the waiting members another Permit plugin holds too.
	held []framework.WaitingPod
}

// gang counts the group's scheduled members. Callers hold mu.
func (pl *gangScheduling) gang(key framework.EntityKey, podGroupState framework.PodGroupState) gangState {
	var g gangState
	g.counted = podGroupState.AssignedPods().Len()
	admitted := pl.admitted[key]
	assumed := podGroupState.AssumedPods()
	for uid := range admitted {
		if !assumed.Has(uid) {
			// Bound (counted above), or forgotten after its binding failed.
			admitted.Delete(uid)
		}
	}
	if admitted.Len() == 0 {
		delete(pl.admitted, key)
	}
	for uid := range assumed {
		wp := pl.handle.GetWaitingPod(uid)
		if admitted.Has(uid) {
			if wp == nil {
				g.counted++
				continue
			}
			if held, _ := wp.HeldBy(Name); !held {
				g.counted++
				continue
			}
			// Let go before, its binding failed (DynamicResources'
			// PreBind does when a sibling wrote their shared claim's
			// allocation first), and it waits here again before
			// anything saw it forgotten: a new attempt.
			admitted.Delete(uid)
		}
		if wp == nil {
			// Assumed and not past Permit yet, or assumed by another
			// profile: it counts once it passes.
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
	return g
}

// HoldChanged counts the member's group again and, once minCount members
// count, lets every member this plugin alone holds go in one step, which
// fails if any of them was resolved meanwhile; then nobody goes, and the
// members wait for the rest of the gang again. Waiting members are told
// how many siblings other Permit plugins still hold.
func (pl *gangScheduling) HoldChanged(ctx context.Context, wp framework.WaitingPod) {
	pod := wp.GetPod()
	podGroupName, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	podGroup, err := pl.podGroupManager.PodGroups().Get(pod.Namespace, podGroupName)
	if err != nil || podGroup.Spec.SchedulingPolicy.Gang == nil {
		// It was there at Permit; without it the member waits for its
		// timeout, as upstream's would.
		logger.V(4).Info("PodGroup of a waiting member not found", "pod", klog.KObj(pod), "err", err)
		return
	}
	podGroupState, err := pl.podGroupManager.PodGroupStates().Get(pod.Namespace, podGroupName)
	if err != nil {
		logger.V(4).Info("Pod group state of a waiting member not found", "pod", klog.KObj(pod), "err", err)
		return
	}
	minCount := int(podGroup.Spec.SchedulingPolicy.Gang.MinCount)
	if podGroupState.ScheduledPodsCount() < minCount {
		// Fewer are scheduled than may count: nothing to let go.
		return
	}
	key := framework.PodGroupKey(pod.Namespace, podGroupName)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	g := pl.gang(key, podGroupState)
	waiting := append(g.ready, g.held...)
	if g.counted >= minCount && pl.handle.AllowWaitingPodsTogether(Name, g.ready) {
		if pl.admitted[key] == nil {
			pl.admitted[key] = sets.New[types.UID]()
		}
		for _, m := range g.ready {
			pl.admitted[key].Insert(m.GetPod().UID)
		}
		logger.V(4).Info("Quorum is met for a gang. Allowing other pods from a gang waiting on permit", "pod", klog.KObj(pod), "schedulingGroup", podGroupName, "allowedPods", len(g.ready))
		waiting = g.held
	}
	msg := msgWaiting
	if len(g.held) > 0 {
		msg = fmt.Sprintf("%s: %d of minCount %d counted, %d more held by other Permit plugins", msgWaiting, g.counted, minCount, len(g.held))
	}
	for _, m := range waiting {
		m.SetPendingMessage(Name, msg)
	}
}

// PlacementFeasible enforces minCount in the pod-group cycle: Success once
// minCount pods are scheduled (or the group has no gang policy and one
// is), Wait while the remaining pods may still reach it, and Unschedulable,
// which ends the cycle early, once they cannot.
func (pl *gangScheduling) PlacementFeasible(_ context.Context, _ framework.PlacementCycleState, podGroupInfo *framework.PodGroupInfo, progress framework.PlacementProgress) *framework.Status {
	minCount := getMinCount(podGroupInfo)
	remaining, scheduled := progress.Remaining, progress.Scheduled
	if remaining+scheduled < minCount {
		return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("minCount (%d) cannot be satisfied: %d scheduled, %d remaining", minCount, scheduled, remaining))
	}
	if scheduled < minCount {
		return framework.NewStatus(framework.Wait, fmt.Sprintf("minCount (%d) is not yet satisfied: %d scheduled, %d remaining", minCount, scheduled, remaining))
	}
	return nil
}

// getMinCount returns the group's gang minCount, 1 for a basic group. A
// composite group's would be its minGroupCount.
func getMinCount(podGroupInfo *framework.PodGroupInfo) int {
	gang := podGroupInfo.GetPodGroup().Spec.SchedulingPolicy.Gang
	if gang == nil {
		return 1
	}
	return int(gang.MinCount)
}
