package dynamicresources

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// podGroupStateData is the plugin's state in a pod-group cycle. The
// group's cycle state holds it by pointer, and only the synchronous
// pod-group cycle uses it, one pod at a time: it needs no lock. A pod
// leaves the cycle before its binding cycle, so PreBind, and Unreserve
// after a failed binding, never see it.
type podGroupStateData struct {
	// pendingAllocations are the claims whose allocation a pod's Reserve
	// made in this cycle and that are still in flight, each with the UIDs
	// of the pods sharing it. A later pod of the cycle that shares such a
	// claim reuses the allocation instead of waiting for PreBind to write
	// it, which for a gang would never come. The DRA manager still counts
	// the sharers of an in-flight allocation across cycles; pods outside
	// this cycle keep waiting for it.
	pendingAllocations map[types.UID]sets.Set[types.UID]

	// podsStateData is each pod's stateData, as its last PreFilter in the
	// cycle left it, so that PodGroupPostFilter can do for the group what
	// PostFilter does for one pod.
	podsStateData map[types.NamespacedName]*stateData
}

// Clone returns d itself, as stateData's Clone does.
func (d *podGroupStateData) Clone() framework.StateData {
	return d
}

// getPodGroupStateDataFromPodGroupCycleState returns the plugin's state in
// the pod-group cycle; nil without one, ErrNotFound when no pod of the
// group got to PreFilter.
func getPodGroupStateDataFromPodGroupCycleState(pgState framework.PodGroupCycleState) (*podGroupStateData, error) {
	if pgState == nil {
		return nil, nil
	}
	state, err := pgState.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := state.(*podGroupStateData)
	if !ok {
		return nil, errors.New("state is not podGroupStateData")
	}
	return s, nil
}

// getPodGroupStateData returns the plugin's state in the pod-group cycle
// the pod is placed in; nil when the pod is not placed in one.
func getPodGroupStateData(cs *framework.CycleState) (*podGroupStateData, error) {
	return getPodGroupStateDataFromPodGroupCycleState(cs.GetPodGroupSchedulingCycle())
}

// getOrCreatePodGroupStateData is getPodGroupStateData for PreFilter: the
// group's first pod makes the state.
func getOrCreatePodGroupStateData(cs *framework.CycleState) (*podGroupStateData, error) {
	podGroupState, err := getPodGroupStateData(cs)
	if errors.Is(err, framework.ErrNotFound) {
		podGroupState = &podGroupStateData{
			pendingAllocations: make(map[types.UID]sets.Set[types.UID]),
			podsStateData:      make(map[types.NamespacedName]*stateData),
		}
		cs.GetPodGroupSchedulingCycle().Write(stateKey, podGroupState)
		return podGroupState, nil
	}
	return podGroupState, err
}

// PodGroupPostFilter runs when the pod-group cycle found no placement for
// the group: for each of its unscheduled pods, it deallocates or deletes
// one claim as PostFilter would for the pod alone, then says so. It comes
// before DefaultPreemption, so that an idle claim is freed before a pod
// doing useful work is evicted. Groups with a topology constraint in a
// profile that places groups by topology are left alone, as upstream.
//
// A PodGroup's own claims (DRAWorkloadResourceClaims, off by default in
// 1.37.2) are not built, so upstream's deallocation of those, which only
// runs with that gate, has no counterpart here.
func (pl *dynamicResources) PodGroupPostFilter(ctx context.Context, state framework.PodGroupCycleState, pgInfo *framework.PodGroupInfo, _ framework.PodGroupSchedulingFunc) (*framework.PodGroupPostFilterResult, *framework.Status) {
	logger := klog.FromContext(ctx)
	if pl.fh.HasPlacementPlugins() && pgInfo.GetPodGroup() != nil && pgInfo.GetPodGroup().Spec.SchedulingConstraints != nil {
		logger.V(5).Info("DRA PodGroupPostFilter is not supporting topology-aware workloads", "podGroup", pgInfo.GetName())
		return nil, framework.NewStatus(framework.Unschedulable)
	}

	podGroupState, err := getPodGroupStateDataFromPodGroupCycleState(state)
	switch {
	case errors.Is(err, framework.ErrNotFound):
		// No pod of the group ran PreFilter in this cycle (all of them
		// wait at Permit from an earlier one): no claim of theirs was
		// touched in it, so there is nothing to free.
		podGroupState = nil
	case err != nil:
		return nil, statusError(logger, err)
	}
	// This mimics running PostFilter for each of the group's pods.
	if podGroupState != nil {
		for _, pod := range pgInfo.GetUnscheduledPods() {
			podState := podGroupState.podsStateData[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
			if podState == nil {
				continue
			}
			if status := pl.deallocateOrDeletePodClaims(ctx, pod, podState); status.IsError() {
				return nil, status
			}
		}
	}
	return nil, framework.NewStatus(framework.Unschedulable, "deallocation and deletion of ResourceClaims completed")
}
