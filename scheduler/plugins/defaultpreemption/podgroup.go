package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// preemptorPodGroup is the preemptor label of the preemption metrics for
// a pod group.
const preemptorPodGroup = "podgroup"

// podGroupDomain is the name of the one candidate of a pod-group
// preemption: the whole cluster.
const podGroupDomain = "cluster"

// PodGroupPostFilter makes room for a pod group the pod-group cycle could
// not place (upstream's PodGroupEvaluator.Preempt): within a mutation
// session of the cycle's snapshot, it removes every lower-priority victim,
// lets pgSchedulingFunc run the group's algorithm again, reprieves as many
// victims as the group's proposed assignments allow, evicts the rest and
// nominates each placed pod to its node. Ending the session puts the
// snapshot back as it was. Messages are prefixed "pod group preemption: ".
func (pl *defaultPreemption) PodGroupPostFilter(ctx context.Context, _ framework.PodGroupCycleState, pgInfo *framework.PodGroupInfo, pgSchedulingFunc framework.PodGroupSchedulingFunc) (_ *framework.PodGroupPostFilterResult, status *framework.Status) {
	// As upstream: counted by the code of the status returned, that of
	// ending the session included.
	defer func() {
		pl.fh.Metrics().WorkloadPreemptionAttempts.WithLabelValues(status.Code().String()).Inc()
	}()
	if !pl.fts.EnableGenericWorkload {
		// The runtime runs this point only in workload-aware profiles,
		// whose plugins get the feature.
		return nil, framework.AsStatus(errors.New("pod group preemption: DefaultPreemption was built without the GenericWorkload feature"))
	}
	mutableLister := pl.fh.MutableSnapshotSharedLister()
	if mutableLister == nil {
		return nil, framework.AsStatus(errors.New("pod group preemption: failed to start mutations: the snapshot cannot be mutated"))
	}
	if err := mutableLister.StartMutations(); err != nil {
		return nil, framework.AsStatus(fmt.Errorf("pod group preemption: failed to start mutations: %w", err))
	}
	defer func() {
		if err := mutableLister.EndMutations(); err != nil {
			status = framework.AsStatus(fmt.Errorf("pod group preemption: failed to end mutations: %w", err))
		}
	}()
	res, status := pl.preemptPodGroup(ctx, mutableLister, pgInfo, pgSchedulingFunc)
	if msg := status.Message(); msg != "" {
		return res, framework.NewStatus(status.Code(), "pod group preemption: "+msg)
	}
	return res, status
}

// podGroupPreemptorOf returns pgInfo's group preempting for its
// unscheduled pods, and whether it may preempt. Without the alpha
// PodGroupPreemptionPolicy gate (out of scope), a group may not when one
// of its pods has preemptionPolicy Never.
func podGroupPreemptorOf(pgInfo *framework.PodGroupInfo) (podGroupPreemptor, bool) {
	p := podGroupPreemptor{PodGroup: pgInfo.GetPodGroup(), pods: pgInfo.GetUnscheduledPods()}
	for _, pod := range p.pods {
		if pp := pod.Spec.PreemptionPolicy; pp != nil && *pp == v1.PreemptNever {
			return p, false
		}
	}
	return p, true
}

// preemptPodGroup is PodGroupPostFilter within the mutation session of
// snapshot.
func (pl *defaultPreemption) preemptPodGroup(ctx context.Context, snapshot framework.MutableSnapshotSharedLister, pgInfo *framework.PodGroupInfo, pgSchedulingFunc framework.PodGroupSchedulingFunc) (*framework.PodGroupPostFilterResult, *framework.Status) {
	logger := klog.FromContext(ctx)
	if len(pgInfo.GetUnscheduledPods()) == 0 || pgInfo.GetPodGroup() == nil {
		return nil, framework.AsStatus(fmt.Errorf("pod group %s has no PodGroup or no pod to schedule", pgInfo.GetKey()))
	}
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("failed to create domain: %w", err))
	}
	now := time.Now()
	allVictims, err := getCrossNodesVictims(snapshot, nodes, now)
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("failed to create domain: %w", err))
	}
	nameToNode := make(map[string]*framework.NodeInfo, len(nodes))
	for _, ni := range nodes {
		if ni != nil && ni.Node() != nil {
			nameToNode[ni.Node().Name] = ni
		}
	}

	preemptor, eligible := podGroupPreemptorOf(pgInfo)
	if !eligible {
		msg := "not eligible due to preemptionPolicy=Never."
		logger.V(5).Info("Preemptor is not eligible for preemption", "preemptor", klog.KObj(preemptor), "type", preemptor.kind(), "reason", msg)
		return nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	if pl.isOngoingPreemption(preemptor, nameToNode) {
		return &framework.PodGroupPostFilterResult{NominatingInfos: currentNominatingInfos(preemptor)},
			framework.NewStatus(framework.Success, "ongoing preemption on nominated nodes")
	}

	res, status := pl.evaluatePodGroup(ctx, snapshot, preemptor, allVictims, nameToNode, pgSchedulingFunc)
	if !status.IsSuccess() {
		return nil, status
	}
	pl.actuateAsync(&candidate{name: podGroupDomain, victims: res.victims, numPDBViolations: res.numPDBViolations}, preemptor)
	return &framework.PodGroupPostFilterResult{NominatingInfos: res.nominatingInfos},
		framework.NewStatus(framework.Success, fmt.Sprintf("found a placement for podgroup, preempting %d victims", len(res.victims)))
}

// podGroupVictims is what a pod-group preemption evicts, and where the
// group's pods are nominated.
type podGroupVictims struct {
	nominatingInfos  map[types.NamespacedName]*framework.NominatingInfo
	victims          []*v1.Pod
	numPDBViolations int64
}

// evaluatePodGroup picks the victims without evicting anything; its
// duration and outcome are scheduler_preemption_evaluation_duration_seconds.
func (pl *defaultPreemption) evaluatePodGroup(ctx context.Context, snapshot framework.MutableSnapshotSharedLister, preemptor podGroupPreemptor, allVictims []*victim,
	nameToNode map[string]*framework.NodeInfo, pgSchedulingFunc framework.PodGroupSchedulingFunc) (_ *podGroupVictims, status *framework.Status) {
	start := time.Now()
	defer func() {
		pl.fh.Metrics().PreemptionEvaluationDuration.WithLabelValues(preemptorPodGroup, status.Code().String()).Observe(time.Since(start).Seconds())
	}()
	pdbs, err := pl.pdbLister.List(labels.Everything())
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("failed to get pod disruption budgets: %w", err))
	}
	return pl.selectVictimsOnDomain(ctx, snapshot, preemptor, allVictims, nameToNode, pdbs, pgSchedulingFunc)
}

// selectVictimsOnDomain finds the victims whose eviction lets the group
// be placed, preferring victims no PodDisruptionBudget protects
// (upstream's selectVictimsOnDomain). pgSchedulingFunc runs once, with
// every lower-priority victim removed from the snapshot; then victims are
// added back, most important first, as long as each of the group's
// proposed pods still passes the filters on its node with the pods
// proposed before it assumed and reserved. The cycle state of the Nth pod
// was built with the N-1 before it assumed and knows nothing of later ones.
func (pl *defaultPreemption) selectVictimsOnDomain(ctx context.Context, mutableLister framework.MutableSnapshotSharedLister, preemptor podGroupPreemptor, allVictims []*victim,
	nameToNode map[string]*framework.NodeInfo, pdbs []*policy.PodDisruptionBudget, pgSchedulingFunc framework.PodGroupSchedulingFunc) (*podGroupVictims, *framework.Status) {
	logger := klog.FromContext(ctx)
	prio := preemptor.priority()

	// Removing victims before pgSchedulingFunc needs no cycle state
	// update: it builds its states from the snapshot.
	removePods := func(v *victim) error {
		for _, pi := range v.pods {
			if err := mutableLister.RemovePod(logger, pi.Pod, pi.Pod.Spec.NodeName); err != nil {
				return err
			}
		}
		return nil
	}
	addWithPreFilter := func(v *victim, assignments []framework.ProposedAssignment) error {
		for _, pi := range v.pods {
			if err := mutableLister.AddPod(pi, pi.Pod.Spec.NodeName); err != nil {
				return err
			}
			for _, a := range assignments {
				if err := pl.fh.RunPreFilterExtensionAddPod(ctx, a.GetCycleState(), a.GetPod(), pi, nameToNode[pi.Pod.Spec.NodeName]).AsError(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	removeWithPreFilter := func(v *victim, assignments []framework.ProposedAssignment) error {
		for _, pi := range v.pods {
			if err := mutableLister.RemovePod(logger, pi.Pod, pi.Pod.Spec.NodeName); err != nil {
				return err
			}
			for _, a := range assignments {
				if err := pl.fh.RunPreFilterExtensionRemovePod(ctx, a.GetCycleState(), a.GetPod(), pi, nameToNode[pi.Pod.Spec.NodeName]).AsError(); err != nil {
					return err
				}
			}
		}
		return nil
	}

	var potential []*victim
	for _, v := range allVictims {
		if v.priority < prio {
			potential = append(potential, v)
		}
	}
	if len(potential) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "No preemption victims found for incoming preemptor")
	}
	for _, v := range potential {
		for name, ni := range v.affectedNodes {
			if _, ok := nameToNode[name]; !ok {
				nameToNode[name] = ni
			}
		}
		if err := removePods(v); err != nil {
			return nil, framework.AsStatus(err)
		}
	}

	assignments, status := pgSchedulingFunc(ctx)
	if !status.IsSuccess() {
		return nil, status
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportantVictim(potential[i], potential[j]) })
	violatingVictims, nonViolatingVictims := filterVictimsWithPDBViolation(potential, pdbs)

	var valid []framework.ProposedAssignment
	if assignments != nil {
		for _, a := range assignments.ProposedAssignments {
			if a.GetNodeName() != "" {
				valid = append(valid, a)
			}
		}
	}

	reprieve := func(v *victim) (fits bool, err error) {
		if err := addWithPreFilter(v, valid); err != nil {
			return false, err
		}
		var cleanups []func() error
		defer func() {
			for i := len(cleanups) - 1; i >= 0; i-- {
				err = errors.Join(err, cleanups[i]())
			}
		}()
		for _, a := range valid {
			ni := nameToNode[a.GetNodeName()]
			if !pl.fh.RunFilterPluginsWithNominatedPods(ctx, a.GetCycleState(), a.GetPod(), ni).IsSuccess() {
				if err := removeWithPreFilter(v, valid); err != nil {
					return false, err
				}
				if l := logger.V(6); l.Enabled() {
					l.Info("Pods are potential preemption victims on domain", "pods", podNames(v.pods), "domain", podGroupDomain)
				}
				return false, nil
			}
			// Assume the preemptor pod and reserve what stateful plugins
			// hold for it; later pods' states already count it.
			if err := mutableLister.AddPod(a.GetPodInfo(), a.GetNodeName()); err != nil {
				return false, err
			}
			pl.fh.RunReservePluginsReserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
			cleanups = append(cleanups, func() error {
				pl.fh.RunReservePluginsUnreserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
				return mutableLister.RemovePod(logger, a.GetPod(), a.GetNodeName())
			})
		}
		return true, nil
	}

	var toPreempt []*victim
	numViolating := 0
	for _, vv := range violatingVictims {
		fits, err := reprieve(vv.victim)
		if err != nil {
			return nil, framework.AsStatus(err)
		}
		if !fits {
			toPreempt = append(toPreempt, vv.victim)
			numViolating += vv.violateCount
		}
	}
	for _, v := range nonViolatingVictims {
		fits, err := reprieve(v)
		if err != nil {
			return nil, framework.AsStatus(err)
		}
		if !fits {
			toPreempt = append(toPreempt, v)
		}
	}
	sort.SliceStable(toPreempt, func(i, j int) bool { return moreImportantVictim(toPreempt[i], toPreempt[j]) })

	out := &podGroupVictims{
		nominatingInfos:  make(map[types.NamespacedName]*framework.NominatingInfo, len(valid)),
		numPDBViolations: int64(numViolating),
	}
	for _, v := range toPreempt {
		for _, pi := range v.pods {
			out.victims = append(out.victims, pi.Pod)
		}
	}
	for _, a := range valid {
		p := a.GetPod()
		out.nominatingInfos[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: a.GetNodeName()}
	}
	return out, nil
}

func podNames(pods []*framework.PodInfo) string {
	names := make([]string, len(pods))
	for i, pi := range pods {
		names[i] = pi.Pod.Namespace + "/" + pi.Pod.Name
	}
	return strings.Join(names, ",")
}

// isOngoingPreemption reports whether a node one of the group's pods is
// nominated to still has a lower-priority pod terminating because the
// scheduler preempted it: the group then waits rather than evict more.
func (pl *defaultPreemption) isOngoingPreemption(preemptor podGroupPreemptor, nameToNode map[string]*framework.NodeInfo) bool {
	nominated := sets.New[string]()
	for _, pod := range preemptor.pods {
		if pod.Status.NominatedNodeName != "" {
			nominated.Insert(pod.Status.NominatedNodeName)
		}
	}
	prio := preemptor.priority()
	for name := range nominated {
		ni, ok := nameToNode[name]
		if !ok {
			continue
		}
		for _, pi := range ni.Pods {
			if getPodPriority(pi.Pod, pl.pgSnapshot) < prio && podTerminatingByPreemption(pi.Pod) {
				return true
			}
		}
	}
	return false
}

// currentNominatingInfos keeps each of the group's pods nominated where it is.
func currentNominatingInfos(preemptor podGroupPreemptor) map[types.NamespacedName]*framework.NominatingInfo {
	n := make(map[types.NamespacedName]*framework.NominatingInfo, len(preemptor.pods))
	for _, pod := range preemptor.pods {
		n[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: pod.Status.NominatedNodeName}
	}
	return n
}
