package podtopologyspread

import (
	"context"
	"errors"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// preFilterStateKey names this plugin's PreFilter data in CycleState.
const preFilterStateKey framework.StateKey = "PreFilter" + Name

var errNodeNotFound = errors.New("node not found")

// domainCounts counts matching pods per topology value of one constraint.
//
// PreFilter fills base once; it is read-only afterwards and shared by every
// clone of the state. AddPod/RemovePod (nominated pods, preemption, which
// clones the state once per candidate node) write only to delta, so a clone
// costs the few changed domains rather than one entry per node for
// hostname spreading.
type domainCounts struct {
	base  map[string]int
	delta map[string]int
	// added counts the keys of delta absent from base: domains that became
	// eligible through AddPod/RemovePod and count towards minDomains.
	added int
}

func (d *domainCounts) get(value string) int {
	n := d.base[value]
	if d.delta != nil {
		n += d.delta[value]
	}
	return n
}

// numDomains is the number of eligible domains. As upstream, a domain
// stays eligible when its count drops to 0.
func (d *domainCounts) numDomains() int {
	return len(d.base) + d.added
}

// add changes the count of value by n and returns the new count.
func (d *domainCounts) add(value string, n int) int {
	if d.delta == nil {
		d.delta = make(map[string]int, 1)
	}
	if _, inDelta := d.delta[value]; !inDelta {
		if _, inBase := d.base[value]; !inBase {
			d.added++
		}
	}
	d.delta[value] += n
	return d.get(value)
}

func (d *domainCounts) clone() domainCounts {
	out := domainCounts{base: d.base, added: d.added}
	if d.delta != nil {
		out.delta = make(map[string]int, len(d.delta))
		for k, v := range d.delta {
			out.delta[k] = v
		}
	}
	return out
}

// criticalPaths keeps the two domains with the fewest matching pods: the
// global minimum is paths[0]. Two are enough because preemption only
// removes pods from one node per evaluation, on its own copy of the state,
// so at most one domain changes at a time. paths[1] is not guaranteed to be
// the second minimum, only >= paths[0].
type criticalPaths [2]struct {
	TopologyValue string
	MatchNum      int
}

func newCriticalPaths() criticalPaths {
	return criticalPaths{{MatchNum: math.MaxInt32}, {MatchNum: math.MaxInt32}}
}

func (p *criticalPaths) update(tpVal string, num int) {
	i := -1
	switch tpVal {
	case p[0].TopologyValue:
		i = 0
	case p[1].TopologyValue:
		i = 1
	}
	if i >= 0 {
		p[i].MatchNum = num
		if p[0].MatchNum > p[1].MatchNum {
			p[0], p[1] = p[1], p[0]
		}
		return
	}
	if num < p[0].MatchNum {
		p[1] = p[0]
		p[0].TopologyValue, p[0].MatchNum = tpVal, num
	} else if num < p[1].MatchNum {
		p[1].TopologyValue, p[1].MatchNum = tpVal, num
	}
}

// preFilterState is computed once per pod in PreFilter and read by Filter.
// An empty Constraints is valid: every node passes.
type preFilterState struct {
	// Constraints are the pod's DoNotSchedule constraints; read-only.
	Constraints []topologySpreadConstraint
	// selfMatch[i] is 1 if the pod matches Constraints[i]; read-only.
	selfMatch []int
	// requiredNodeAffinity is the pod's, for the inclusion policies; read-only.
	requiredNodeAffinity nodeaffinity.RequiredNodeAffinity
	// CriticalPaths[i] tracks the global minimum of Constraints[i].
	CriticalPaths []criticalPaths
	// counts[i] holds the matching pods per domain of Constraints[i].
	counts []domainCounts
}

// minMatchNum is the global minimum of constraint i, taken as 0 while there
// are fewer eligible domains than minDomains.
func (s *preFilterState) minMatchNum(i int, minDomains int32) int {
	if s.counts[i].numDomains() < int(minDomains) {
		return 0
	}
	return s.CriticalPaths[i][0].MatchNum
}

// Clone copies what AddPod/RemovePod change: the critical paths and the
// domain deltas.
func (s *preFilterState) Clone() framework.StateData {
	if s == nil {
		return nil
	}
	out := &preFilterState{
		Constraints:          s.Constraints,
		selfMatch:            s.selfMatch,
		requiredNodeAffinity: s.requiredNodeAffinity,
		CriticalPaths:        append([]criticalPaths(nil), s.CriticalPaths...),
		counts:               make([]domainCounts, len(s.counts)),
	}
	for i := range s.counts {
		out.counts[i] = s.counts[i].clone()
	}
	return out
}

// updateWithPod accounts for updated being added (delta 1) to or removed
// (-1) from node, as PreFilter would have counted it.
func (s *preFilterState) updateWithPod(logger klog.Logger, updated, preemptor *v1.Pod, node *v1.Node, delta int) {
	if s == nil || node == nil || updated.Namespace != preemptor.Namespace {
		return
	}
	if !nodeLabelsMatchSpreadConstraints(node.Labels, s.Constraints) {
		return
	}
	podLabels := labels.Set(updated.Labels)
	var e nodeEligibility
	for i := range s.Constraints {
		c := &s.Constraints[i]
		if !c.Selector.Matches(podLabels) {
			continue
		}
		if !c.includes(logger, preemptor, node, s.requiredNodeAffinity, &e) {
			continue
		}
		v := node.Labels[c.TopologyKey]
		s.CriticalPaths[i].update(v, s.counts[i].add(v, delta))
	}
}

// calPreFilterState counts, for each hard constraint, the matching pods per
// eligible domain over all nodes.
func (pl *podTopologySpread) calPreFilterState(ctx context.Context, pod *v1.Pod, nodes []*framework.NodeInfo) (*preFilterState, error) {
	constraints, err := pl.getConstraints(pod, v1.DoNotSchedule)
	if err != nil {
		return nil, fmt.Errorf("get constraints from pod: %w", err)
	}
	if len(constraints) == 0 {
		return &preFilterState{}, nil
	}
	logger := klog.FromContext(ctx)
	nc := len(constraints)
	s := &preFilterState{
		Constraints:          constraints,
		selfMatch:            make([]int, nc),
		requiredNodeAffinity: nodeaffinity.GetRequiredNodeAffinity(pod),
		CriticalPaths:        make([]criticalPaths, nc),
		counts:               make([]domainCounts, nc),
	}
	podLabels := labels.Set(pod.Labels)
	for i := range constraints {
		if constraints[i].Selector.Matches(podLabels) {
			s.selfMatch[i] = 1
		}
	}

	// counts[n*nc+i] is 1 + the count of constraint i on node n, or 0 when
	// the node is not an eligible domain for it, and values[n*nc+i] the
	// node's domain: flat arrays rather than a slice per node, filled in
	// parallel so the serial merge below looks up no labels.
	counts := make([]int32, len(nodes)*nc)
	values := make([]string, len(nodes)*nc)
	pl.parallelizer.Until(ctx, len(nodes), func(n int) {
		ni := nodes[n]
		node := ni.Node()
		if node == nil {
			return
		}
		row := values[n*nc : (n+1)*nc]
		for i := range constraints {
			v, ok := node.Labels[constraints[i].TopologyKey]
			if !ok {
				return
			}
			row[i] = v
		}
		var e nodeEligibility
		for i := range constraints {
			c := &constraints[i]
			if !c.includes(logger, pod, node, s.requiredNodeAffinity, &e) {
				continue
			}
			counts[n*nc+i] = int32(1 + countPodsMatchSelector(ni.Pods, c.Selector, pod.Namespace))
		}
	}, Name)

	for i := range constraints {
		size := 0
		if constraints[i].TopologyKey == v1.LabelHostname {
			size = len(nodes)
		}
		s.counts[i].base = make(map[string]int, size)
	}
	for k, v := range counts {
		if v > 0 {
			s.counts[k%nc].base[values[k]] += int(v - 1)
		}
	}
	for i := range constraints {
		s.CriticalPaths[i] = newCriticalPaths()
		for value, num := range s.counts[i].base {
			s.CriticalPaths[i].update(value, num)
		}
	}
	return s, nil
}

// PreFilter counts the pods of each hard constraint's domains once for the
// pod. It returns Skip for pods without hard constraints.
func (pl *podTopologySpread) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	s, err := pl.calPreFilterState(ctx, pod, nodes)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(s.Constraints) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions returns the plugin itself: its counts follow added
// and removed pods.
func (pl *podTopologySpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod accounts for podInfoToAdd placed on nodeInfo's node.
func (pl *podTopologySpread) AddPod(ctx context.Context, state *framework.CycleState, podToSchedule *v1.Pod, podInfoToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(klog.FromContext(ctx), podInfoToAdd.Pod, podToSchedule, nodeInfo.Node(), 1)
	return nil
}

// RemovePod accounts for podInfoToRemove leaving nodeInfo's node.
func (pl *podTopologySpread) RemovePod(ctx context.Context, state *framework.CycleState, podToSchedule *v1.Pod, podInfoToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(klog.FromContext(ctx), podInfoToRemove.Pod, podToSchedule, nodeInfo.Node(), -1)
	return nil
}

// Filter checks every hard constraint on the node. A missing topology key
// is UnschedulableAndUnresolvable (no preemption adds a label); an exceeded
// skew is Unschedulable, since removing pods can lower it.
func (pl *podTopologySpread) Filter(ctx context.Context, state *framework.CycleState, _ *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if node == nil {
		return framework.AsStatus(errNodeNotFound)
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	for i := range s.Constraints {
		c := &s.Constraints[i]
		tpVal, ok := node.Labels[c.TopologyKey]
		if !ok {
			// Checking the level first keeps the log arguments from being
			// allocated on every rejected node.
			if logger := klog.FromContext(ctx).V(5); logger.Enabled() {
				logger.Info("Node doesn't have required topology label for spread constraint", "node", klog.KObj(node), "topologyKey", c.TopologyKey)
			}
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		minMatchNum := s.minMatchNum(i, c.MinDomains)
		matchNum := s.counts[i].get(tpVal)
		if skew := matchNum + s.selfMatch[i] - minMatchNum; skew > int(c.MaxSkew) {
			if logger := klog.FromContext(ctx).V(5); logger.Enabled() {
				logger.Info("Node failed spreadConstraint: matchNum + selfMatchNum - minMatchNum > maxSkew", "node", klog.KObj(node), "topologyKey", c.TopologyKey, "matchNum", matchNum, "selfMatchNum", s.selfMatch[i], "minMatchNum", minMatchNum, "maxSkew", c.MaxSkew)
			}
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}
