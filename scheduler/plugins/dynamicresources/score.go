package dynamicresources

import (
	"context"
	"fmt"
	"iter"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// Score favours nodes where the claims' prioritized lists (firstAvailable)
// get an earlier subrequest (DRAPrioritizedList, on by default).
func (pl *dynamicResources) Score(ctx context.Context, cs *framework.CycleState, _ *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	state, err := getStateData(cs)
	if err != nil {
		return 0, statusError(klog.FromContext(ctx), err)
	}
	if state.claims.empty() {
		return 0, nil
	}
	allocations, found := state.nodeAllocations[nodeInfo.Node().Name]
	if !found {
		return 0, nil
	}
	score, err := computeScore(state.claims.all(), allocations.allocationResults)
	if err != nil {
		return 0, statusError(klog.FromContext(ctx), err)
	}
	return score, nil
}

// computeScore adds, for each subrequest of a prioritized list that got
// allocated, FirstAvailableDeviceRequestMaxSize minus its position.
// Allocations come from the claim's status, or, for claims allocated in
// this cycle, from allocations in the order of the claims to allocate.
func computeScore(claims iter.Seq2[int, *resourceapi.ResourceClaim], allocations []resourceapi.AllocationResult) (int64, error) {
	var score int64
	unallocatedIndex := 0
	for _, claim := range claims {
		var allocation *resourceapi.AllocationResult
		if claim.Status.Allocation != nil {
			allocation = claim.Status.Allocation
		} else {
			if unallocatedIndex >= len(allocations) {
				return 0, fmt.Errorf("number of allocations %d is smaller than number of claims needing allocation", len(allocations))
			}
			allocation = &allocations[unallocatedIndex]
			unallocatedIndex++
		}

		// The names of all allocated subrequests.
		allocatedSubRequests := sets.New[string]()
		for _, res := range allocation.Devices.Results {
			if resourceclaim.IsSubRequestRef(res.Request) {
				allocatedSubRequests.Insert(res.Request)
			}
		}
		for _, req := range claim.Spec.Devices.Requests {
			if req.Exactly != nil {
				continue
			}
			for i, subReq := range req.FirstAvailable {
				if allocatedSubRequests.Has(resourceclaim.CreateSubRequestRef(req.Name, subReq.Name)) {
					score += int64(resourceapi.FirstAvailableDeviceRequestMaxSize - i)
				}
			}
		}
	}
	return score, nil
}

// ScoreExtensions returns the plugin: it normalizes its scores.
func (pl *dynamicResources) ScoreExtensions() framework.ScoreExtensions {
	return pl
}

// NormalizeScore scales scores to 0..100, as upstream.
func (pl *dynamicResources) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return helper.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
}
