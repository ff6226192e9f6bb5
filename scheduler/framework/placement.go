package framework

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Placement is a set of nodes a pod group may be scheduled on. The pod-group
// cycle tries every placement the PlacementGenerate plugins propose and keeps
// the one whose assignments score best.
type Placement struct {
	// Name identifies the placement in logs and messages; the plugin that
	// generated it chooses it.
	Name string
	// Nodes are the only nodes the group's pods are tried on.
	Nodes []*NodeInfo
}

// ProposedAssignment is one pod of a pod group with the node the pod-group
// cycle found for it in a placement.
type ProposedAssignment interface {
	// GetPod returns the pod.
	GetPod() *v1.Pod
	// GetPodInfo returns the pod's PodInfo; read-only.
	GetPodInfo() *PodInfo
	// GetNodeName returns the proposed node.
	GetNodeName() string
	// GetCycleState returns the CycleState the pod was evaluated with.
	GetCycleState() *CycleState
}

// PodGroupAssignments are the proposed nodes of a pod group's pods in one placement.
type PodGroupAssignments struct {
	*Placement
	// ProposedAssignments has one entry per pod that found a node in the
	// placement; every pod is also in the PodGroupInfo.
	ProposedAssignments []ProposedAssignment
}

// GeneratePlacementsResult is what a PlacementGenerate plugin proposes.
type GeneratePlacementsResult struct {
	// Placements may overlap; nil or empty means no placement is valid.
	Placements []*Placement
}

// PlacementScore is one plugin's score of a placement, before normalization
// and weights.
type PlacementScore struct {
	// Placement is the placement scored.
	Placement *Placement
	// Score ranks the placement; higher is better.
	Score int64
}

// PlacementPluginScores is the score breakdown of one placement.
type PlacementPluginScores struct {
	// Placement is the placement scored.
	Placement *Placement
	// Scores holds one weighted score per PlacementScore plugin, in plugin order.
	Scores []PluginScore
	// TotalScore is the sum of Scores.
	TotalScore int64
	// Randomizer breaks ties between equal TotalScores.
	Randomizer int
}

// PodGroupSchedulingFunc runs the pod-group scheduling algorithm again, on
// the snapshot as a PodGroupPostFilter plugin changed it (pod-group
// preemption removes victims and asks whether the group then fits).
type PodGroupSchedulingFunc func(ctx context.Context) (*PodGroupAssignments, *Status)

// PodGroupPostFilterResult is what a successful PodGroupPostFilter plugin proposes.
type PodGroupPostFilterResult struct {
	// NominatingInfos maps the group's pods that get a nominated node to it.
	NominatingInfos map[types.NamespacedName]*NominatingInfo
}

// PodGroupPostFilterPlugin runs when a pod group could not be scheduled.
type PodGroupPostFilterPlugin interface {
	Plugin
	// PodGroupPostFilter returns:
	//   - Unschedulable: the group cannot be made schedulable;
	//   - UnschedulableAndUnresolvable: neither can any later plugin, which are skipped;
	//   - Success: the group can be made schedulable; later plugins are skipped;
	//   - Error: the plugin failed.
	PodGroupPostFilter(ctx context.Context, state PodGroupCycleState, pgInfo *PodGroupInfo, pgSchedulingFunc PodGroupSchedulingFunc) (*PodGroupPostFilterResult, *Status)
}

// PlacementGeneratePlugin proposes the placements a pod group is tried on.
type PlacementGeneratePlugin interface {
	Plugin
	// GeneratePlacements returns candidate placements for podGroup within
	// parentPlacement (all nodes for a group without a parent), such as the
	// nodes of each topology domain.
	GeneratePlacements(ctx context.Context, state PodGroupCycleState, podGroup *PodGroupInfo, parentPlacement *Placement) (*GeneratePlacementsResult, *Status)
}

// PlacementScoreExtensions holds NormalizePlacementScore.
type PlacementScoreExtensions interface {
	// NormalizePlacementScore rewrites, in place, the scores one plugin's
	// ScorePlacement gave, to the MinScore..MaxScore range.
	NormalizePlacementScore(ctx context.Context, state PodGroupCycleState, podGroup *PodGroupInfo, placementScores []PlacementScore) *Status
}

// PlacementScorePlugin ranks the placements in which enough of a pod group's
// pods found nodes.
type PlacementScorePlugin interface {
	Plugin
	// ScorePlacement scores the assignments of podGroup's pods in one
	// placement; state is that placement's. Higher is better.
	ScorePlacement(ctx context.Context, state PlacementCycleState, podGroup *PodGroupInfo, placement *PodGroupAssignments) (int64, *Status)
	// PlacementScoreExtensions returns nil if the plugin has none.
	PlacementScoreExtensions() PlacementScoreExtensions
}

// PlacementFeasiblePlugin tells, after each pod of a pod group was tried in
// a placement, whether the placement can still hold the group. Upstream
// keeps it in its internal framework package, not in the plugin contract:
// only GangScheduling implements it, and the runtime runs that plugin alone
// at this point.
type PlacementFeasiblePlugin interface {
	Plugin
	// PlacementFeasible returns:
	//   - Wait: not yet, but it may be once more pods are tried;
	//   - Unschedulable: never; the remaining pods are not tried, and the
	//     placement stays a candidate for preemption;
	//   - Success: the group fits; the plugin keeps returning Success for
	//     the remaining pods.
	PlacementFeasible(ctx context.Context, placementCycleState PlacementCycleState, podGroupInfo *PodGroupInfo, placementProgress PlacementProgress) *Status
}

// PlacementProgress is how far a pod-group cycle got in one placement.
type PlacementProgress struct {
	// Remaining is the number of the group's pods not tried yet in this cycle.
	Remaining int
	// Scheduled is the number of the group's pods assigned or assumed,
	// counting those placed so far in this cycle and placement.
	Scheduled int
}
