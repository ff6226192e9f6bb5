package podtopologyspread

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// preScoreStateKey names this plugin's PreScore data in CycleState.
const preScoreStateKey framework.StateKey = "PreScore" + Name

const invalidScore = -1

// preScoreState is computed once per pod in PreScore and read by Score and
// NormalizeScore.
type preScoreState struct {
	// Constraints are the pod's ScheduleAnyway constraints.
	Constraints []topologySpreadConstraint
	// IgnoredNodes lack a topology key the constraints need; they score 0.
	IgnoredNodes sets.Set[string]
	// TopologyValueToPodCounts[i] counts matching pods per domain of
	// Constraints[i], for the domains of the feasible nodes. Hostname
	// constraints have no entries: Score counts the node's own pods.
	TopologyValueToPodCounts []map[string]*int64
	// TopologyNormalizingWeight[i] keeps constraints over few domains from
	// being drowned by those over many.
	TopologyNormalizingWeight []float64
}

// Clone returns s: nothing mutates the state after PreScore.
func (s *preScoreState) Clone() framework.StateData { return s }

// initPreScoreState finds the pod's soft constraints, the feasible nodes to
// ignore and the domains to count.
func (pl *podTopologySpread) initPreScoreState(s *preScoreState, pod *v1.Pod, filteredNodes []*framework.NodeInfo, requireAllTopologies bool) error {
	var err error
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		s.Constraints, err = filterConstraints(pod.Spec.TopologySpreadConstraints, pod.Labels, v1.ScheduleAnyway)
		if err != nil {
			return fmt.Errorf("obtaining pod's soft topology spread constraints: %w", err)
		}
	} else {
		s.Constraints, err = pl.buildDefaultConstraints(pod, v1.ScheduleAnyway)
		if err != nil {
			return fmt.Errorf("setting default soft topology spread constraints: %w", err)
		}
	}
	if len(s.Constraints) == 0 {
		return nil
	}
	s.TopologyValueToPodCounts = make([]map[string]*int64, len(s.Constraints))
	for i := range s.Constraints {
		s.TopologyValueToPodCounts[i] = make(map[string]*int64)
	}
	topoSize := make([]int, len(s.Constraints))
	for _, ni := range filteredNodes {
		node := ni.Node()
		if requireAllTopologies && !nodeLabelsMatchSpreadConstraints(node.Labels, s.Constraints) {
			s.IgnoredNodes.Insert(node.Name)
			continue
		}
		for i := range s.Constraints {
			if s.Constraints[i].TopologyKey == v1.LabelHostname {
				continue
			}
			value := node.Labels[s.Constraints[i].TopologyKey]
			if s.TopologyValueToPodCounts[i][value] == nil {
				s.TopologyValueToPodCounts[i][value] = new(int64)
				topoSize[i]++
			}
		}
	}
	s.TopologyNormalizingWeight = make([]float64, len(s.Constraints))
	for i := range s.Constraints {
		size := topoSize[i]
		if s.Constraints[i].TopologyKey == v1.LabelHostname {
			size = len(filteredNodes) - len(s.IgnoredNodes)
		}
		s.TopologyNormalizingWeight[i] = topologyNormalizingWeight(size)
	}
	return nil
}

// PreScore counts, for each soft constraint, the matching pods in the
// domains of the feasible nodes, over all nodes. It returns Skip for pods
// without soft constraints.
func (pl *podTopologySpread) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filteredNodes []*framework.NodeInfo) *framework.Status {
	allNodes, err := pl.sharedLister.NodeInfos().List()
	if err != nil {
		return framework.AsStatus(fmt.Errorf("getting all nodes: %w", err))
	}
	if len(allNodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preScoreState{IgnoredNodes: sets.New[string]()}
	// Only the system defaults tolerate nodes lacking some topology keys,
	// so that clusters without zone labels still get hostname spreading.
	requireAllTopologies := len(pod.Spec.TopologySpreadConstraints) > 0 || !pl.systemDefaulted
	if err := pl.initPreScoreState(s, pod, filteredNodes, requireAllTopologies); err != nil {
		return framework.AsStatus(fmt.Errorf("calculating preScoreState: %w", err))
	}
	if len(s.Constraints) == 0 {
		return framework.NewStatus(framework.Skip)
	}

	logger := klog.FromContext(ctx)
	requiredNodeAffinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	pl.parallelizer.Until(ctx, len(allNodes), func(n int) {
		ni := allNodes[n]
		node := ni.Node()
		if node == nil || requireAllTopologies && !nodeLabelsMatchSpreadConstraints(node.Labels, s.Constraints) {
			return
		}
		var e nodeEligibility
		for i := range s.Constraints {
			c := &s.Constraints[i]
			if !c.includes(logger, pod, node, requiredNodeAffinity, &e) {
				continue
			}
			// Domains of no feasible node do not need counts; hostname
			// domains have none here and are counted in Score.
			counter := s.TopologyValueToPodCounts[i][node.Labels[c.TopologyKey]]
			if counter == nil {
				continue
			}
			if cnt := countPodsMatchSelector(ni.Pods, c.Selector, pod.Namespace); cnt > 0 {
				atomic.AddInt64(counter, int64(cnt))
			}
		}
	}, Name)

	state.Write(preScoreStateKey, s)
	return nil
}

// Score returns the weighted number of matching pods in the node's domains;
// NormalizeScore inverts it so that fewer pods score higher.
func (pl *podTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.AsStatus(errNodeNotFound)
	}
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	if s.IgnoredNodes.Has(node.Name) {
		return 0, nil
	}
	var score float64
	for i := range s.Constraints {
		c := &s.Constraints[i]
		tpVal, ok := node.Labels[c.TopologyKey]
		if !ok {
			continue
		}
		var cnt int64
		if c.TopologyKey == v1.LabelHostname {
			cnt = int64(countPodsMatchSelector(nodeInfo.Pods, c.Selector, pod.Namespace))
		} else {
			cnt = *s.TopologyValueToPodCounts[i][tpVal]
		}
		score += scoreForCount(cnt, c.MaxSkew, s.TopologyNormalizingWeight[i])
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore maps raw scores to MaxNodeScore × (max + min - score) / max:
// the node with the fewest matching pods gets the most. Ignored nodes get 0.
func (pl *podTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	minScore, maxScore := int64(math.MaxInt64), int64(0)
	for i := range scores {
		if s.IgnoredNodes.Has(scores[i].Name) {
			scores[i].Score = invalidScore
			continue
		}
		minScore = min(minScore, scores[i].Score)
		maxScore = max(maxScore, scores[i].Score)
	}
	for i := range scores {
		switch {
		case scores[i].Score == invalidScore:
			scores[i].Score = 0
		case maxScore == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (maxScore + minScore - scores[i].Score) / maxScore
		}
	}
	return nil
}

// ScoreExtensions returns the plugin itself, for NormalizeScore.
func (pl *podTopologySpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// topologyNormalizingWeight is log(size + 2) for a topology of size
// domains: between about 1.09 and 8.52 for 1 to 5000 domains.
func topologyNormalizingWeight(size int) float64 {
	return math.Log(float64(size + 2))
}

// scoreForCount adds maxSkew - 1 so that larger skews tolerate more
// difference between domains.
func scoreForCount(cnt int64, maxSkew int32, tpWeight float64) float64 {
	return float64(cnt)*tpWeight + float64(maxSkew-1)
}
