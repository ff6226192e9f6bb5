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
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// errNoVictims is upstream's reason for a node without lower-priority pods.
const errNoVictims = "No preemption victims found for incoming pod"

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
	now := time.Now()
	check := func(i int) {
		orig := potential[(int(offset)+i)%len(potential)]
		name := orig.Node().Name
		var victims []*v1.Pod
		var numViolations int
		var status *framework.Status
		// A victim of a PodGroup spanning nodes is a victim on each of
		// them: the candidates are independent, and only one is chosen.
		possible, err := pl.getVictimsOnNode(orig, now)
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return
		}
		if !anyPreemptible(possible, pod) {
			// Copying the node and the state would be wasted: nothing can
			// be removed.
			status = framework.NewStatus(framework.UnschedulableAndUnresolvable, errNoVictims)
		} else {
			victims, numViolations, status = pl.selectVictimsOnNode(ctx, state.Clone(), pod, orig.Snapshot(), possible, pdbs)
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

// anyPreemptible reports whether pod may preempt one of victims.
func anyPreemptible(victims []*victim, pod *v1.Pod) bool {
	for _, v := range victims {
		if isPreemptionAllowed(v, pod) {
			return true
		}
	}
	return false
}

// selectVictimsOnNode finds a minimal set of victims whose eviction makes
// pod fit on ni. ni and state are copies owned by the caller. Only ni is
// changed: the nodes where a victim PodGroup has other pods go through
// the PreFilter extensions only, so that plugins keeping counts in the
// cycle state (spreading, affinity) see them gone; the filters run on ni
// alone.
func (pl *defaultPreemption) selectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo, possible []*victim, pdbs []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *framework.Status) {
	logger := klog.FromContext(ctx)
	mainNode := ni.Node().Name
	nameToNode := map[string]*framework.NodeInfo{mainNode: ni}
	removeVictim := func(v *victim) error {
		for _, pi := range v.pods {
			if pi.Pod.Spec.NodeName == mainNode {
				if err := ni.RemovePod(logger, pi.Pod); err != nil {
					return err
				}
			}
			if err := pl.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, nameToNode[pi.Pod.Spec.NodeName]).AsError(); err != nil {
				return err
			}
		}
		return nil
	}
	addVictim := func(v *victim) error {
		for _, pi := range v.pods {
			if pi.Pod.Spec.NodeName == mainNode {
				ni.AddPodInfo(pi)
			}
			if err := pl.fh.RunPreFilterExtensionAddPod(ctx, state, pod, pi, nameToNode[pi.Pod.Spec.NodeName]).AsError(); err != nil {
				return err
			}
		}
		return nil
	}

	// Remove every victim that may be preempted, then check the pod fits at all.
	var potential []*victim
	for _, v := range possible {
		if isPreemptionAllowed(v, pod) {
			potential = append(potential, v)
		}
	}
	if len(potential) == 0 {
		// The node is unchanged: evaluating it again would say the same.
		return nil, 0, framework.NewStatus(framework.UnschedulableAndUnresolvable, errNoVictims)
	}
	for _, v := range potential {
		for name, other := range v.affectedNodes {
			if _, ok := nameToNode[name]; !ok {
				nameToNode[name] = other
			}
		}
		if err := removeVictim(v); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// If the pod does not fit with every lower-priority victim gone, the
	// node cannot help. (A pod failing only because of affinity to one of
	// the victims is not supported, as upstream: such affinity to less
	// important pods is not a recommended configuration.)
	if s := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); !s.IsSuccess() {
		return nil, 0, s
	}

	// Reprieve as many victims as possible, most important first, and
	// those whose eviction would violate a budget before the others.
	sort.SliceStable(potential, func(i, j int) bool { return moreImportantVictim(potential[i], potential[j]) })
	violatingVictims, nonViolatingVictims := filterVictimsWithPDBViolation(potential, pdbs)
	var victims []*victim
	reprieve := func(v *victim) (bool, error) {
		if err := addVictim(v); err != nil {
			return false, err
		}
		fits := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess()
		if !fits {
			if err := removeVictim(v); err != nil {
				return false, err
			}
			victims = append(victims, v)
			if loggerV := logger.V(5); loggerV.Enabled() {
				pods := make([]klog.ObjectRef, len(v.pods))
				for i, pi := range v.pods {
					pods[i] = klog.KObj(pi.Pod)
				}
				loggerV.Info("Pods are potential preemption victims on node", "pods", pods, "node", mainNode)
			}
		}
		return fits, nil
	}
	numViolating := 0
	for _, vv := range violatingVictims {
		fits, err := reprieve(vv.victim)
		if err != nil {
			return nil, 0, framework.AsStatus(err)
		}
		if !fits {
			numViolating += vv.violateCount
		}
	}
	for _, v := range nonViolatingVictims {
		if _, err := reprieve(v); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// Both groups were walked in importance order; merge them back into one.
	if len(violatingVictims) != 0 && len(nonViolatingVictims) != 0 {
		sort.SliceStable(victims, func(i, j int) bool { return moreImportantVictim(victims[i], victims[j]) })
	}
	var out []*v1.Pod
	for _, v := range victims {
		for _, pi := range v.pods {
			out = append(out, pi.Pod)
		}
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
