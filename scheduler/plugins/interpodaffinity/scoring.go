package interpodaffinity

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// preScoreStateKey names this plugin's PreScore data in CycleState.
const preScoreStateKey framework.StateKey = "PreScore" + Name

// scoreMap is the summed weight per topology key and value.
type scoreMap map[string]map[string]int64

func (m scoreMap) add(key, value string, delta int64) {
	values := m[key]
	if values == nil {
		values = make(map[string]int64)
		m[key] = values
	}
	values[value] += delta
}

// preScoreState is computed once per pod in PreScore and read by Score.
type preScoreState struct {
	topologyScore scoreMap
	// keys holds topologyScore as a slice: Score walks it once per node,
	// and walking a slice is much cheaper than iterating a map.
	keys []topologyScores
}

type topologyScores struct {
	key    string
	values map[string]int64
}

// Clone returns s: nothing mutates the state after PreScore.
func (s *preScoreState) Clone() framework.StateData { return s }

// scoreEntry is one weighted match found on one node; collected per node
// and merged once so that parallel workers share nothing.
type scoreEntry struct {
	key, value string
	delta      int64
}

type scoreEntries []scoreEntry

// addTerm records weight × sign for node's domain of term if pod matches it.
func (e *scoreEntries) addTerm(term *framework.AffinityTerm, weight int64, pod *v1.Pod, nsLabels labels.Set, node *v1.Node) {
	if !term.Matches(pod, nsLabels) {
		return
	}
	if tv, ok := node.Labels[term.TopologyKey]; ok {
		*e = append(*e, scoreEntry{key: term.TopologyKey, value: tv, delta: weight})
	}
}

func (e *scoreEntries) addTerms(terms []framework.WeightedAffinityTerm, sign int64, pod *v1.Pod, nsLabels labels.Set, node *v1.Node) {
	for i := range terms {
		e.addTerm(&terms[i].AffinityTerm, sign*int64(terms[i].Weight), pod, nsLabels, node)
	}
}

// processExistingPod adds what existing (on node) contributes to the
// incoming pod's score through its own terms: the symmetric side. The
// existing pod's namespace selectors are matched against the incoming
// pod's namespace labels.
func (pl *interPodAffinity) processExistingPod(e *scoreEntries, incoming *v1.Pod, nsLabels labels.Set, existing *framework.PodInfo, node *v1.Node) {
	if pl.hardPodAffinityWeight > 0 {
		for i := range existing.RequiredAffinityTerms {
			e.addTerm(&existing.RequiredAffinityTerms[i], int64(pl.hardPodAffinityWeight), incoming, nsLabels, node)
		}
	}
	e.addTerms(existing.PreferredAffinityTerms, 1, incoming, nsLabels, node)
	e.addTerms(existing.PreferredAntiAffinityTerms, -1, incoming, nsLabels, node)
}

// PreScore sums, per topology domain, the weights described in the package
// documentation. It returns Skip when no domain gets a weight (all scores
// would be equal), and when ignorePreferredTermsOfExistingPods is set and
// the pod has no preferred terms of its own.
func (pl *interPodAffinity) PreScore(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	a := pod.Spec.Affinity
	hasPreferredAffinity := a != nil && a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0
	hasPreferredAnti := a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0
	hasConstraints := hasPreferredAffinity || hasPreferredAnti
	if pl.ignorePreferredTermsOfExistingPods && !hasConstraints {
		return framework.NewStatus(framework.Skip)
	}

	// Without preferred terms of its own, only existing pods with affinity
	// can contribute, and the snapshot keeps a list of their nodes.
	var nodes []*framework.NodeInfo
	var err error
	if hasConstraints {
		nodes, err = pl.sharedLister.NodeInfos().List()
		if err != nil {
			return framework.AsStatus(fmt.Errorf("failed to get all nodes from shared lister: %w", err))
		}
	} else {
		nodes, err = pl.sharedLister.NodeInfos().HavePodsWithAffinityList()
		if err != nil {
			return framework.AsStatus(fmt.Errorf("failed to get pods with affinity list: %w", err))
		}
	}

	incoming, err := framework.NewPodInfo(pod)
	if err != nil {
		// PreFilter refuses such pods, so this is not expected.
		return framework.AsStatus(fmt.Errorf("failed to parse pod: %w", err))
	}
	if err := pl.mergeNamespaceSelectors(incoming, false, true); err != nil {
		return framework.AsStatus(fmt.Errorf("updating preferred affinity terms: %w", err))
	}
	nsLabels := pl.namespaceLabels(klog.FromContext(ctx), pod.Namespace)

	// The incoming pod's terms are fixed for the cycle: their matches are
	// counted per node into a flat array, without allocating. Existing
	// pods' terms differ from pod to pod and are collected as entries, only
	// on the nodes where some match.
	terms := make([]framework.WeightedAffinityTerm, 0, len(incoming.PreferredAffinityTerms)+len(incoming.PreferredAntiAffinityTerms))
	terms = append(terms, incoming.PreferredAffinityTerms...)
	for _, t := range incoming.PreferredAntiAffinityTerms {
		t.Weight = -t.Weight
		terms = append(terms, t)
	}
	stride := len(terms)
	counts := make([]int32, len(nodes)*stride)
	// symMu guards symmetric, to which the few nodes hosting pods with
	// matching terms append their entries.
	var symMu sync.Mutex
	var symmetric scoreEntries
	var found atomic.Bool
	pl.parallelizer.Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := ni.Node()
		if node == nil || len(node.Labels) == 0 {
			return
		}
		pods := ni.PodsWithAffinity
		if hasConstraints {
			pods = ni.Pods
		}
		row := counts[i*stride : (i+1)*stride]
		var e scoreEntries
		for _, existing := range pods {
			// The incoming pod's namespace selectors were merged, so no
			// namespace labels are needed to match them.
			for j := range terms {
				if terms[j].Matches(existing.Pod, nil) {
					row[j]++
				}
			}
			pl.processExistingPod(&e, pod, nsLabels, existing, node)
		}
		if len(e) > 0 {
			symMu.Lock()
			symmetric = append(symmetric, e...)
			symMu.Unlock()
			found.Store(true)
			return
		}
		for j := range row {
			if row[j] > 0 {
				if _, ok := node.Labels[terms[j].TopologyKey]; ok {
					found.Store(true)
					return
				}
			}
		}
	}, Name)
	if !found.Load() {
		return framework.NewStatus(framework.Skip)
	}

	s := &preScoreState{topologyScore: make(scoreMap)}
	for i, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		row := counts[i*stride : (i+1)*stride]
		for j := range row {
			if row[j] == 0 {
				continue
			}
			if tv, ok := node.Labels[terms[j].TopologyKey]; ok {
				s.topologyScore.add(terms[j].TopologyKey, tv, int64(row[j])*int64(terms[j].Weight))
			}
		}
	}
	for _, x := range symmetric {
		s.topologyScore.add(x.key, x.value, x.delta)
	}
	s.keys = make([]topologyScores, 0, len(s.topologyScore))
	for k, values := range s.topologyScore {
		s.keys = append(s.keys, topologyScores{key: k, values: values})
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// Score returns the summed weights of the node's domains: positive for
// affinity, negative for anti-affinity; NormalizeScore maps them to 0..100.
func (pl *interPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, framework.AsStatus(errNodeNotFound)
	}
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	for i := range s.keys {
		if tv, ok := node.Labels[s.keys[i].key]; ok {
			score += s.keys[i].values[tv]
		}
	}
	return score, nil
}

// NormalizeScore maps the raw scores linearly so that the lowest becomes 0
// and the highest MaxNodeScore; equal scores all become 0.
func (pl *interPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(s.topologyScore) == 0 {
		return nil
	}
	minScore, maxScore := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range scores {
		minScore = min(minScore, scores[i].Score)
		maxScore = max(maxScore, scores[i].Score)
	}
	diff := maxScore - minScore
	for i := range scores {
		f := float64(0)
		if diff > 0 {
			f = float64(framework.MaxNodeScore) * (float64(scores[i].Score-minScore) / float64(diff))
		}
		scores[i].Score = int64(f)
	}
	return nil
}

// ScoreExtensions returns the plugin itself, for NormalizeScore.
func (pl *interPodAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }
