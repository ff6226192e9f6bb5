package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// errNoVictims is upstream's reason for a node without lower-priority pods.
const errNoVictims = "No preemption victims found for incoming pod"

// hasLowerPriorityPods reports whether ni holds a pod pod may preempt.
func hasLowerPriorityPods(ni *framework.NodeInfo, pod *v1.Pod) bool {
	for _, pi := range ni.Pods {
		if isPreemptionAllowed(pi.Pod, pod) {
			return true
		}
	}
	return false
}

// candidate is a node where evicting victims makes the pod fit.
type candidate struct {
	name string
	// victims are ordered from the most to the least important.
	victims          []*v1.Pod
	numPDBViolations int64
}

// candidateList collects candidates from parallel workers into a fixed
// array; candidates beyond its capacity are dropped.
type candidateList struct {
	idx   atomic.Int32
	items []*candidate
}

func newCandidateList(capacity int32) *candidateList {
	l := &candidateList{items: make([]*candidate, capacity)}
	l.idx.Store(-1)
	return l
}

func (l *candidateList) add(c *candidate) {
	if i := l.idx.Add(1); i < int32(len(l.items)) {
		l.items[i] = c
	}
}

func (l *candidateList) size() int32 {
	return min(l.idx.Load()+1, int32(len(l.items)))
}

// get must only be called once every add has returned.
func (l *candidateList) get() []*candidate {
	return l.items[:l.size()]
}

// findCandidates dry-runs preemption on the nodes whose failure removing
// pods could resolve.
func (pl *defaultPreemption) findCandidates(ctx context.Context, state *framework.CycleState, allNodes []*framework.NodeInfo, pod *v1.Pod, m framework.NodeToStatusReader) ([]*candidate, *framework.NodeToStatus, error) {
	if len(allNodes) == 0 {
		return nil, nil, errors.New("no nodes available")
	}
	// Walk the snapshot rather than the status map so that the dry run
	// visits nodes in the snapshot's order (spread over zones) from its
	// random offset, and not in map order.
	potential := make([]*framework.NodeInfo, 0, len(allNodes))
	for _, ni := range allNodes {
		if m.Get(ni.Node().Name).Code() == framework.Unschedulable {
			potential = append(potential, ni)
		}
	}
	if len(potential) == 0 {
		klog.FromContext(ctx).V(3).Info("Preemption will not help schedule pod on any node", "pod", klog.KObj(pod))
		return nil, framework.NewDefaultNodeToStatus(), nil
	}
	pdbs, err := pl.pdbLister.List(labels.Everything())
	if err != nil {
		return nil, nil, err
	}
	n := int32(len(potential))
	return pl.dryRunPreemption(ctx, state, pod, potential, pdbs, pl.offset(n), pl.calculateNumCandidates(n))
}

// dryRunPreemption evaluates the potential nodes in parallel, starting at
// offset, on copies of the node and of the cycle state. It stops once
// numCandidates candidates are found, at least one of them violating no
// PodDisruptionBudget; candidates without violations come first.
func (pl *defaultPreemption) dryRunPreemption(ctx context.Context, state *framework.CycleState, pod *v1.Pod, potential []*framework.NodeInfo,
	pdbs []*policy.PodDisruptionBudget, offset, numCandidates int32) ([]*candidate, *framework.NodeToStatus, error) {
	nonViolating := newCandidateList(numCandidates)
	violating := newCandidateList(numCandidates)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	statuses := framework.NewDefaultNodeToStatus()
	logger := klog.FromContext(ctx)
	logger.V(5).Info("Dry run the preemption", "potentialNodesNumber", len(potential), "pdbsNumber", len(pdbs), "offset", offset, "candidatesNumber", numCandidates)

	// mu guards statuses and errs, written by the parallel workers.
	var mu sync.Mutex
	var errs []error
	check := func(i int) {
		orig := potential[(int(offset)+i)%len(potential)]
		name := orig.Node().Name
		var victims []*v1.Pod
		var numViolations int
		var status *framework.Status
		if !hasLowerPriorityPods(orig, pod) {
			// Copying the node and the state would be wasted: nothing can
			// be removed.
			status = framework.NewStatus(framework.UnschedulableAndUnresolvable, errNoVictims)
		} else {
			victims, numViolations, status = pl.selectVictimsOnNode(ctx, state.Clone(), pod, orig.Snapshot(), pdbs)
		}
		if status.IsSuccess() && len(victims) != 0 {
			c := &candidate{name: name, victims: victims, numPDBViolations: int64(numViolations)}
			if numViolations == 0 {
				nonViolating.add(c)
			} else {
				violating.add(c)
			}
			if nv, v := nonViolating.size(), violating.size(); nv > 0 && nv+v >= numCandidates {
				cancel()
			}
			return
		}
		if status.IsSuccess() {
			status = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", name))
		}
		mu.Lock()
		defer mu.Unlock()
		if status.Code() == framework.Error {
			errs = append(errs, status.AsError())
		}
		statuses.Set(name, status)
	}
	pl.fh.Parallelizer().Until(ctx, len(potential), check, Name)
	return append(nonViolating.get(), violating.get()...), statuses, errors.Join(errs...)
}

// selectVictimsOnNode finds a minimal set of pods on ni whose eviction
// makes pod fit. ni and state are copies owned by the caller.
func (pl *defaultPreemption) selectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *framework.Status) {
	logger := klog.FromContext(ctx)
	removePod := func(pi *framework.PodInfo) error {
		if err := ni.RemovePod(logger, pi.Pod); err != nil {
			return err
		}
		return pl.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, ni).AsError()
	}
	addPod := func(pi *framework.PodInfo) error {
		ni.AddPodInfo(pi)
		return pl.fh.RunPreFilterExtensionAddPod(ctx, state, pod, pi, ni).AsError()
	}

	// Remove every pod that may be preempted, then check the pod fits at all.
	var potential []*framework.PodInfo
	for _, pi := range ni.Pods {
		if isPreemptionAllowed(pi.Pod, pod) {
			potential = append(potential, pi)
		}
	}
	if len(potential) == 0 {
		// The node is unchanged: evaluating it again would say the same.
		return nil, 0, framework.NewStatus(framework.UnschedulableAndUnresolvable, errNoVictims)
	}
	for _, pi := range potential {
		if err := removePod(pi); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// If the pod does not fit with every lower-priority pod gone, the node
	// cannot help. (A pod failing only because of affinity to one of the
	// victims is not supported, as upstream: such affinity to less
	// important pods is not a recommended configuration.)
	if s := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); !s.IsSuccess() {
		return nil, 0, s
	}

	// Reprieve as many pods as possible, most important first, and those
	// whose eviction would violate a budget before the others.
	now := time.Now()
	sort.SliceStable(potential, func(i, j int) bool { return moreImportantPod(potential[i].Pod, potential[j].Pod, now) })
	violatingPods, nonViolatingPods := filterPodsWithPDBViolation(potential, pdbs)
	var victims []*framework.PodInfo
	reprieve := func(pi *framework.PodInfo) (bool, error) {
		if err := addPod(pi); err != nil {
			return false, err
		}
		fits := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess()
		if !fits {
			if err := removePod(pi); err != nil {
				return false, err
			}
			victims = append(victims, pi)
			logger.V(5).Info("Pod is a potential preemption victim on node", "pod", klog.KObj(pi.Pod), "node", klog.KObj(ni.Node()))
		}
		return fits, nil
	}
	numViolating := 0
	for _, pi := range violatingPods {
		fits, err := reprieve(pi)
		if err != nil {
			return nil, 0, framework.AsStatus(err)
		}
		if !fits {
			numViolating++
		}
	}
	for _, pi := range nonViolatingPods {
		if _, err := reprieve(pi); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// Both groups were walked in importance order; merge them back into one.
	if len(violatingPods) != 0 && len(nonViolatingPods) != 0 {
		sort.SliceStable(victims, func(i, j int) bool { return moreImportantPod(victims[i].Pod, victims[j].Pod, now) })
	}
	out := make([]*v1.Pod, len(victims))
	for i, pi := range victims {
		out[i] = pi.Pod
	}
	return out, numViolating, framework.NewStatus(framework.Success)
}

// podStartTime is when p started; pods not started yet (assumed, or bound
// but not running) count as starting now.
func podStartTime(p *v1.Pod, now time.Time) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return now
}

// moreImportantPod orders by priority, then by start time: among equals,
// the pod that has run longer is kept.
func moreImportantPod(a, b *v1.Pod, now time.Time) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return podStartTime(a, now).Before(podStartTime(b, now))
}

// filterPodsWithPDBViolation splits pods, keeping their order, into those
// whose eviction would exceed a matching budget's disruptionsAllowed
// (counting the earlier pods of the list as evicted too) and the others.
// As upstream since 1.37, a pod stops using up budgets at the first one it
// violates: budgets listed after it keep their allowance for later pods
// (1.36 charged the pod to every budget it matched). The budgets are
// walked in the lister's order, as upstream's are.
func filterPodsWithPDBViolation(pods []*framework.PodInfo, pdbs []*policy.PodDisruptionBudget) (violating, nonViolating []*framework.PodInfo) {
	if len(pdbs) == 0 {
		return nil, pods
	}
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			// An invalid selector matches no pod.
			s = labels.Nothing()
		}
		selectors[i] = s
	}
	violates := func(p *v1.Pod) bool {
		// A pod without labels matches no budget.
		if len(p.Labels) == 0 {
			return false
		}
		for i, pdb := range pdbs {
			if pdb.Namespace != p.Namespace {
				continue
			}
			// A nil or empty budget selector matches nothing.
			if selectors[i].Empty() || !selectors[i].Matches(labels.Set(p.Labels)) {
				continue
			}
			// Pods the disruption controller already counted as
			// disrupted do not use up the budget again.
			if _, ok := pdb.Status.DisruptedPods[p.Name]; ok {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				return true
			}
		}
		return false
	}
	for _, pi := range pods {
		if violates(pi.Pod) {
			violating = append(violating, pi)
		} else {
			nonViolating = append(nonViolating, pi)
		}
	}
	return violating, nonViolating
}

// selectCandidate picks the candidate upstream's ordering prefers.
func selectCandidate(logger klog.Logger, candidates []*candidate) *candidate {
	switch len(candidates) {
	case 0:
		return nil
	case 1:
		return candidates[0]
	}
	return pickOneNodeForPreemption(logger, candidates, time.Now())
}

// pickOneNodeForPreemption applies, in order, until one candidate is left:
// fewest PDB violations; lowest highest-victim priority; lowest sum of
// victim priorities; fewest victims; latest start among the victims of the
// highest priority; then the first candidate.
func pickOneNodeForPreemption(logger klog.Logger, candidates []*candidate, now time.Time) *candidate {
	scoreFuncs := []func(c *candidate) int64{
		func(c *candidate) int64 { return -c.numPDBViolations },
		func(c *candidate) int64 { return -int64(corev1helpers.PodPriority(c.victims[0])) },
		func(c *candidate) int64 {
			var sum int64
			for _, p := range c.victims {
				// Shift every priority to >= 0 so that more victims of a
				// negative priority never look cheaper than fewer.
				sum += int64(corev1helpers.PodPriority(p)) + int64(math.MaxInt32+1)
			}
			return -sum
		},
		func(c *candidate) int64 { return -int64(len(c.victims)) },
		func(c *candidate) int64 {
			t, ok := earliestStartTimeOfHighestPriority(c.victims, now)
			if !ok {
				logger.Error(nil, "Unexpected nil earliestStartTime for node", "node", c.name)
				return math.MinInt64
			}
			return t.UnixNano()
		},
	}
	remaining := candidates
	for _, f := range scoreFuncs {
		best := int64(math.MinInt64)
		var selected []*candidate
		for _, c := range remaining {
			score := f(c)
			if score > best {
				best = score
				selected = selected[:0]
			}
			if score == best {
				selected = append(selected, c)
			}
		}
		if len(selected) == 1 {
			return selected[0]
		}
		remaining = selected
	}
	return remaining[0]
}

// earliestStartTimeOfHighestPriority returns the earliest start time among
// the victims that have the highest priority.
func earliestStartTimeOfHighestPriority(victims []*v1.Pod, now time.Time) (time.Time, bool) {
	if len(victims) == 0 {
		return time.Time{}, false
	}
	earliest := podStartTime(victims[0], now)
	highest := corev1helpers.PodPriority(victims[0])
	for _, p := range victims[1:] {
		switch prio := corev1helpers.PodPriority(p); {
		case prio == highest:
			if t := podStartTime(p, now); t.Before(earliest) {
				earliest = t
			}
		case prio > highest:
			highest = prio
			earliest = podStartTime(p, now)
		}
	}
	return earliest, true
}
