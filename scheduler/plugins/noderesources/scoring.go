package noderesources

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/resourcescore"
)

// scorer is one scoring strategy over the configured resources. Every
// strategy rates each resource the node has (and, for scalar resources,
// that the pod requests) and combines the ratings weighted by resource.
type scorer struct {
	strategy  configv1.ScoringStrategyType
	resources []resourcescore.Resource
	// brokenLinear is RequestedToCapacityRatio's function of utilization.
	brokenLinear func(utilization int64) int64
	// dra and matches count the devices behind extended resources
	// backed by DRA; dra is nil in an instance built to validate a profile.
	dra     framework.SharedDRAManager
	matches *resourcescore.MatchCache
}

func newScorer(st *configv1.ScoringStrategy, dra framework.SharedDRAManager) (*scorer, error) {
	s := &scorer{strategy: st.Type, resources: resourcescore.NewResources(st.Resources), dra: dra, matches: resourcescore.NewMatchCache()}
	switch st.Type {
	case configv1.LeastAllocated, configv1.MostAllocated:
	case configv1.RequestedToCapacityRatio:
		s.brokenLinear = helper.BrokenLinear(st.RequestedToCapacityRatio.Shape)
	default:
		return nil, fmt.Errorf("scoring strategy %s is not supported", st.Type)
	}
	return s, nil
}

// scoreRequestOptions reproduce how upstream's NodeResourcesFit computes a
// pod's requests for scoring: containers without a cpu or memory request
// count the scheduler's defaults (100m, 200Mi) so that such pods still
// spread, and, as upstream's scorer is built without the plugin's feature
// flags, pod-level resources and status resources are not used.
var scoreRequestOptions = resourcehelper.PodResourcesOptions{
	SkipPodLevelResources: true,
	NonMissingContainerRequests: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(framework.DefaultMilliCPURequest, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(framework.DefaultMemoryRequest, resource.DecimalSI),
	},
}

func (s *scorer) podRequests(pod *v1.Pod) []int64 {
	return resourcescore.PodRequests(pod, s.resources, scoreRequestOptions)
}

// draState gathers, once per cycle, what scoring extended resources
// backed by DRA needs; nil when no scored resource is.
func (s *scorer) draState() (*resourcescore.DRA, error) {
	return resourcescore.NewDRA(s.dra, s.resources, s.matches)
}

// score rates a node in 0..100. cpu and memory already allocated on the
// node are NonZeroRequested, matching the pod side's defaults.
func (s *scorer) score(ctx context.Context, ni *framework.NodeInfo, podRequests []int64, dra *resourcescore.DRA) int64 {
	var nodeScore, weightSum int64
	for i := range s.resources {
		r := &s.resources[i]
		allocatable, allocated := r.NodeAmounts(ctx, ni, podRequests[i], false, dra)
		if allocatable == 0 {
			continue
		}
		requested := allocated + podRequests[i]
		switch s.strategy {
		case configv1.LeastAllocated:
			nodeScore += leastRequestedScore(requested, allocatable) * r.Weight
			weightSum += r.Weight
		case configv1.MostAllocated:
			nodeScore += mostRequestedScore(requested, allocatable) * r.Weight
			weightSum += r.Weight
		case configv1.RequestedToCapacityRatio:
			// Resources rated 0 do not dilute the others, as upstream.
			if rs := s.ratioScore(requested, allocatable); rs > 0 {
				nodeScore += rs * r.Weight
				weightSum += r.Weight
			}
		}
	}
	if weightSum == 0 {
		return 0
	}
	if s.strategy == configv1.RequestedToCapacityRatio {
		return int64(math.Round(float64(nodeScore) / float64(weightSum)))
	}
	return nodeScore / weightSum
}

// scorePlacement rates a pod group's placement in 0..100 as upstream's
// placement scorer: the proposed pods' requests, added to what every node
// of the placement already has allocated, against the nodes' allocatable
// summed, per resource, with the strategy's formula. Scalar resources
// count only once something requested them, as for a single node.
func (s *scorer) scorePlacement(ctx context.Context, placement *framework.PodGroupAssignments) int64 {
	requested := make([]int64, len(s.resources))
	for _, a := range placement.ProposedAssignments {
		for i, r := range s.podRequests(a.GetPod()) {
			requested[i] += r
		}
	}
	allocatable := make([]int64, len(s.resources))
	for _, ni := range placement.Nodes {
		for i := range s.resources {
			nodeAllocatable, nodeAllocated := s.resources[i].NodeAmounts(ctx, ni, requested[i], false, nil)
			if nodeAllocatable == 0 {
				continue
			}
			allocatable[i] += nodeAllocatable
			requested[i] += nodeAllocated
		}
	}
	var score, weightSum int64
	for i := range s.resources {
		if allocatable[i] == 0 {
			continue
		}
		score += mostRequestedScore(requested[i], allocatable[i]) * s.resources[i].Weight
		weightSum += s.resources[i].Weight
	}
	if weightSum == 0 {
		return 0
	}
	return score / weightSum
}

// leastRequestedScore favours free capacity: (capacity-requested)*100/capacity,
// 0 when the node would be over-committed.
func leastRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * framework.MaxNodeScore / capacity
}

// mostRequestedScore favours used capacity: requested*100/capacity, with
// requested capped at capacity (default requests can exceed it).
func mostRequestedScore(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	requested = min(requested, capacity)
	return requested * framework.MaxNodeScore / capacity
}

// ratioScore applies the shape to the utilization in percent; an
// over-committed node counts as fully utilized.
func (s *scorer) ratioScore(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return s.brokenLinear(helper.MaxUtilization)
	}
	return s.brokenLinear(requested * helper.MaxUtilization / capacity)
}
