package interpodaffinity

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// preFilterStateKey names this plugin's PreFilter data in CycleState.
const preFilterStateKey framework.StateKey = "PreFilter" + Name

// Filter reasons, as upstream words them (they appear in FailedScheduling messages).
const (
	// ErrReasonExistingAntiAffinityRulesNotMatch: an existing pod's required anti-affinity rejects the pod.
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	// ErrReasonAffinityRulesNotMatch: the pod's required affinity is not satisfied.
	ErrReasonAffinityRulesNotMatch = "node(s) didn't match pod affinity rules"
	// ErrReasonAntiAffinityRulesNotMatch: the pod's required anti-affinity is not satisfied.
	ErrReasonAntiAffinityRulesNotMatch = "node(s) didn't match pod anti-affinity rules"
)

var errNodeNotFound = errors.New("node not found")

// topologyPair is one topology domain: a node label key and value.
type topologyPair struct {
	key   string
	value string
}

// topologyToMatchedTermCount counts matches per topology domain. Entries
// never hold 0: a count that drops to 0 (RemovePod) is deleted, so
// len() tells whether any domain is constrained.
type topologyToMatchedTermCount map[topologyPair]int64

func (m topologyToMatchedTermCount) clone() topologyToMatchedTermCount {
	out := make(topologyToMatchedTermCount, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (m topologyToMatchedTermCount) update(node *v1.Node, tk string, delta int64) {
	tv, ok := node.Labels[tk]
	if !ok {
		return
	}
	pair := topologyPair{key: tk, value: tv}
	if n := m[pair] + delta; n != 0 {
		m[pair] = n
	} else {
		delete(m, pair)
	}
}

// updateWithAffinityTerms counts pod for each of terms if it matches all of
// them: required affinity is satisfied by one pod matching every term.
func (m topologyToMatchedTermCount) updateWithAffinityTerms(terms []framework.AffinityTerm, pod *v1.Pod, node *v1.Node, delta int64) {
	if podMatchesAllAffinityTerms(terms, pod) {
		for i := range terms {
			m.update(node, terms[i].TopologyKey, delta)
		}
	}
}

// updateWithAntiAffinityTerms counts pod for each of terms it matches: any
// single anti-affinity term is enough to reject a domain.
func (m topologyToMatchedTermCount) updateWithAntiAffinityTerms(terms []framework.AffinityTerm, pod *v1.Pod, nsLabels labels.Set, node *v1.Node, delta int64) {
	for i := range terms {
		if terms[i].Matches(pod, nsLabels) {
			m.update(node, terms[i].TopologyKey, delta)
		}
	}
}

// topologyPairCounts is the per-node form of the counts, filled in
// parallel and merged once: a slice per node is cheaper than a map, and
// nodes without matches allocate nothing.
type topologyPairCounts []topologyPairCount

type topologyPairCount struct {
	pair  topologyPair
	count int64
}

func (l *topologyPairCounts) add(node *v1.Node, tk string) {
	if tv, ok := node.Labels[tk]; ok {
		*l = append(*l, topologyPairCount{pair: topologyPair{key: tk, value: tv}, count: 1})
	}
}

func (m topologyToMatchedTermCount) mergeList(l topologyPairCounts) {
	for i := range l {
		m[l[i].pair] += l[i].count
	}
}

// podMatchesAllAffinityTerms reports whether pod matches every term (false
// for no terms). The terms are the incoming pod's, whose namespace
// selectors were merged into their namespaces, hence no namespace labels.
func podMatchesAllAffinityTerms(terms []framework.AffinityTerm, pod *v1.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod, nil) {
			return false
		}
	}
	return true
}

// podMatchesAnyAffinityTerms reports whether pod matches at least one of
// terms: one matching anti-affinity term is enough to reject a node.
func podMatchesAnyAffinityTerms(terms []framework.AffinityTerm, pod *v1.Pod) bool {
	for i := range terms {
		if terms[i].Matches(pod, nil) {
			return true
		}
	}
	return false
}

// preFilterState is computed once per pod in PreFilter and read by Filter
// on every node. AddPod/RemovePod update the counts on a clone.
type preFilterState struct {
	// existingAntiAffinityCounts: per domain, existing pods whose required
	// anti-affinity terms match the incoming pod (the symmetry rule).
	existingAntiAffinityCounts topologyToMatchedTermCount
	// affinityCounts: per domain, existing pods matching all the incoming
	// pod's required affinity terms.
	affinityCounts topologyToMatchedTermCount
	// antiAffinityCounts: per domain, existing pods matching the incoming
	// pod's required anti-affinity terms.
	antiAffinityCounts topologyToMatchedTermCount
	// podInfo holds the incoming pod's parsed terms; read-only.
	podInfo *framework.PodInfo
	// namespaceLabels are the incoming pod's namespace labels, matched by
	// existing pods' namespace selectors; read-only.
	namespaceLabels labels.Set
}

// Clone copies the counts, which AddPod/RemovePod mutate, and shares the rest.
func (s *preFilterState) Clone() framework.StateData {
	if s == nil {
		return nil
	}
	return &preFilterState{
		existingAntiAffinityCounts: s.existingAntiAffinityCounts.clone(),
		affinityCounts:             s.affinityCounts.clone(),
		antiAffinityCounts:         s.antiAffinityCounts.clone(),
		podInfo:                    s.podInfo,
		namespaceLabels:            s.namespaceLabels,
	}
}

// updateWithPod accounts for pi being added (delta 1) to or removed (-1)
// from node.
func (s *preFilterState) updateWithPod(pi *framework.PodInfo, node *v1.Node, delta int64) {
	if s == nil || node == nil {
		return
	}
	incoming := s.podInfo
	s.existingAntiAffinityCounts.updateWithAntiAffinityTerms(pi.RequiredAntiAffinityTerms, incoming.Pod, s.namespaceLabels, node, delta)
	s.affinityCounts.updateWithAffinityTerms(incoming.RequiredAffinityTerms, pi.Pod, node, delta)
	s.antiAffinityCounts.updateWithAntiAffinityTerms(incoming.RequiredAntiAffinityTerms, pi.Pod, nil, node, delta)
}

// existingAntiAffinityCounts counts, per domain, the existing pods whose
// required anti-affinity terms match pod. Only nodes hosting such pods are
// visited.
func (pl *interPodAffinity) existingAntiAffinityCounts(ctx context.Context, pod *v1.Pod, nsLabels labels.Set, nodes []*framework.NodeInfo) topologyToMatchedTermCount {
	result := make(topologyToMatchedTermCount)
	if len(nodes) == 0 {
		return result
	}
	perNode := make([]topologyPairCounts, len(nodes))
	var next atomic.Int32
	pl.parallelizer.Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := ni.Node()
		if node == nil {
			return
		}
		var counts topologyPairCounts
		for _, existing := range ni.PodsWithRequiredAntiAffinity {
			for j := range existing.RequiredAntiAffinityTerms {
				if existing.RequiredAntiAffinityTerms[j].Matches(pod, nsLabels) {
					counts.add(node, existing.RequiredAntiAffinityTerms[j].TopologyKey)
				}
			}
		}
		if len(counts) > 0 {
			perNode[next.Add(1)-1] = counts
		}
	}, Name)
	for _, l := range perNode[:next.Load()] {
		result.mergeList(l)
	}
	return result
}

// incomingAffinityCounts counts, per domain, the existing pods matching the
// incoming pod's required affinity (all terms) and anti-affinity (any term).
//
// The terms are fixed for the cycle, so each node's counts go into a flat
// array (one slot for affinity, one per anti-affinity term) and are turned
// into domains once, serially: no allocation per node.
func (pl *interPodAffinity) incomingAffinityCounts(ctx context.Context, pi *framework.PodInfo, nodes []*framework.NodeInfo) (topologyToMatchedTermCount, topologyToMatchedTermCount) {
	affinity := make(topologyToMatchedTermCount)
	anti := make(topologyToMatchedTermCount)
	affTerms, antiTerms := pi.RequiredAffinityTerms, pi.RequiredAntiAffinityTerms
	if len(affTerms) == 0 && len(antiTerms) == 0 {
		return affinity, anti
	}
	stride := 1 + len(antiTerms)
	counts := make([]int32, len(nodes)*stride)
	pl.parallelizer.Until(ctx, len(nodes), func(i int) {
		row := counts[i*stride : (i+1)*stride]
		for _, existing := range nodes[i].Pods {
			if podMatchesAllAffinityTerms(affTerms, existing.Pod) {
				row[0]++
			}
			for j := range antiTerms {
				if antiTerms[j].Matches(existing.Pod, nil) {
					row[1+j]++
				}
			}
		}
	}, Name)
	for i, ni := range nodes {
		row := counts[i*stride : (i+1)*stride]
		node := ni.Node()
		if node == nil {
			continue
		}
		if n := row[0]; n > 0 {
			for j := range affTerms {
				if tv, ok := node.Labels[affTerms[j].TopologyKey]; ok {
					affinity[topologyPair{key: affTerms[j].TopologyKey, value: tv}] += int64(n)
				}
			}
		}
		for j := range antiTerms {
			if n := row[1+j]; n > 0 {
				if tv, ok := node.Labels[antiTerms[j].TopologyKey]; ok {
					anti[topologyPair{key: antiTerms[j].TopologyKey, value: tv}] += int64(n)
				}
			}
		}
	}
	return affinity, anti
}

// PreFilter counts, once for the pod, the existing pods that matter to its
// required terms and the existing pods whose anti-affinity rejects it. It
// returns Skip when neither exists, so Filter does not run at all.
func (pl *interPodAffinity) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	withAnti, err := pl.sharedLister.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("failed to list NodeInfos with pods with affinity: %w", err))
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		// A selector the API server let through but that cannot be parsed
		// will not parse next time either.
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %+v", err))
	}
	if err := pl.mergeNamespaceSelectors(pi, true, false); err != nil {
		return nil, framework.AsStatus(err)
	}
	s := &preFilterState{
		podInfo:         pi,
		namespaceLabels: pl.namespaceLabels(klog.FromContext(ctx), pod.Namespace),
	}
	s.existingAntiAffinityCounts = pl.existingAntiAffinityCounts(ctx, pod, s.namespaceLabels, withAnti)
	s.affinityCounts, s.antiAffinityCounts = pl.incomingAffinityCounts(ctx, pi, nodes)
	if len(s.existingAntiAffinityCounts) == 0 && len(pi.RequiredAffinityTerms) == 0 && len(pi.RequiredAntiAffinityTerms) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions returns the plugin itself: its counts follow added
// and removed pods.
func (pl *interPodAffinity) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod accounts for podInfoToAdd placed on nodeInfo's node.
func (pl *interPodAffinity) AddPod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podInfoToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToAdd, nodeInfo.Node(), 1)
	return nil
}

// RemovePod accounts for podInfoToRemove leaving nodeInfo's node.
func (pl *interPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podInfoToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToRemove, nodeInfo.Node(), -1)
	return nil
}

// satisfyExistingPodsAntiAffinity: no domain of the node holds a pod whose
// anti-affinity rejects the incoming pod.
func satisfyExistingPodsAntiAffinity(s *preFilterState, node *v1.Node) bool {
	if len(s.existingAntiAffinityCounts) == 0 {
		return true
	}
	for k, v := range node.Labels {
		if s.existingAntiAffinityCounts[topologyPair{key: k, value: v}] > 0 {
			return false
		}
	}
	return true
}

// satisfyPodAntiAffinity: no domain of the node (for the pod's own terms)
// holds a pod the incoming pod avoids.
func satisfyPodAntiAffinity(s *preFilterState, node *v1.Node) bool {
	if len(s.antiAffinityCounts) == 0 {
		return true
	}
	for i := range s.podInfo.RequiredAntiAffinityTerms {
		tk := s.podInfo.RequiredAntiAffinityTerms[i].TopologyKey
		if tv, ok := node.Labels[tk]; ok && s.antiAffinityCounts[topologyPair{key: tk, value: tv}] > 0 {
			return false
		}
	}
	return true
}

// satisfyPodAffinity: the node has every term's topology key and each of
// its domains holds a matching pod. The first pod of a group that has
// affinity to itself is let through when no pod in the cluster matches yet,
// or such groups could never start.
func satisfyPodAffinity(s *preFilterState, node *v1.Node) bool {
	podsExist := true
	for i := range s.podInfo.RequiredAffinityTerms {
		tk := s.podInfo.RequiredAffinityTerms[i].TopologyKey
		tv, ok := node.Labels[tk]
		if !ok {
			return false
		}
		if s.affinityCounts[topologyPair{key: tk, value: tv}] <= 0 {
			podsExist = false
		}
	}
	if podsExist {
		return true
	}
	return len(s.affinityCounts) == 0 && podMatchesAllAffinityTerms(s.podInfo.RequiredAffinityTerms, s.podInfo.Pod)
}

// Filter checks the node against the counts of PreFilter. Unmet affinity is
// UnschedulableAndUnresolvable because removing pods (preemption) cannot
// create a missing match; anti-affinity is Unschedulable because it can.
func (pl *interPodAffinity) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.AsStatus(errNodeNotFound)
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if !satisfyPodAffinity(s, node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	}
	if !satisfyPodAntiAffinity(s, node) {
		return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
	}
	if !satisfyExistingPodsAntiAffinity(s, node) {
		return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
	}
	return nil
}
