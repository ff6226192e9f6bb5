// Package podgrouppodscount provides PodGroupPodsCount, kube-scheduler
// 1.37's PlacementScore plugin: among the placements in which a pod group
// fits, it favors those that hold more of the group's pods. Upstream adds
// it to the default profile, with weight 1, only with the
// TopologyAwareWorkloadScheduling gate (alpha, off by default).
package podgrouppodscount

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "PodGroupPodsCount"

type podGroupPodsCount struct {
	handle framework.Handle
}

var _ framework.PlacementScorePlugin = (*podGroupPodsCount)(nil)

// New returns the plugin; it takes no args. It reads the group's pods from
// the cycle's snapshot.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	return &podGroupPodsCount{handle: h}, nil
}

func (*podGroupPodsCount) Name() string { return Name }

// ScorePlacement counts the group's pods already scheduled (assumed or
// bound) and those the placement proposes a node for. Counting the
// scheduled ones too keeps the relative differences between placements
// small, so small changes of the count change the score little.
func (pl *podGroupPodsCount) ScorePlacement(_ context.Context, _ framework.PlacementCycleState, podGroup *framework.PodGroupInfo, placement *framework.PodGroupAssignments) (int64, *framework.Status) {
	scheduledPodsCount, err := pl.getScheduledPodsCount(podGroup)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	return int64(scheduledPodsCount + len(placement.ProposedAssignments)), nil
}

// PlacementScoreExtensions returns the plugin: it normalizes its scores.
func (pl *podGroupPodsCount) PlacementScoreExtensions() framework.PlacementScoreExtensions {
	return pl
}

// NormalizePlacementScore scales the scores to MinScore..MaxScore by the
// highest count among the placements. MinCount is left out on purpose, so
// placements that differ by few pods do not get far apart scores.
func (pl *podGroupPodsCount) NormalizePlacementScore(_ context.Context, _ framework.PodGroupCycleState, _ *framework.PodGroupInfo, scores []framework.PlacementScore) *framework.Status {
	maxCount := int64(0)
	for _, score := range scores {
		maxCount = max(maxCount, score.Score)
	}
	if maxCount == 0 {
		// Upstream relies on GangScheduling not letting a group with no
		// scheduled pod through to scoring.
		return framework.AsStatus(errors.New("no pods from pod group are assigned to any of the candidate placements"))
	}
	for i := range scores {
		scores[i].Score = framework.MinScore + scores[i].Score*(framework.MaxScore-framework.MinScore)/maxCount
	}
	return nil
}

// getScheduledPodsCount counts the group's assumed and bound pods. A
// composite group's would be summed over its leaf groups (upstream's
// helper.GetPodGroupStates).
func (pl *podGroupPodsCount) getScheduledPodsCount(podGroup *framework.PodGroupInfo) (int, error) {
	pgState, err := pl.handle.SnapshotSharedLister().PodGroupStates().Get(podGroup.GetNamespace(), podGroup.GetName())
	if err != nil {
		return 0, err
	}
	return pgState.ScheduledPodsCount(), nil
}
