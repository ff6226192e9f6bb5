package defaultpreemption

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// victim is what preemption evicts as one unit (upstream's DomainVictim):
// a pod, or, in a workload-aware profile, every scheduled pod of a
// PodGroup whose disruptionMode is All, wherever they run.
type victim struct {
	pods []*framework.PodInfo
	// priority is the pod's, or, for a member of a PodGroup in a
	// workload-aware profile, its group's.
	priority int32
	// earliestStart is the earliest start among pods; pods not started
	// count as starting when the victims were listed.
	earliestStart time.Time
	// keyType is PodGroupKeyType for a whole group and, as upstream, for
	// a lone member of a group: both rank above pods without one.
	keyType framework.EntityKeyType
	// affectedNodes holds every node with a pod of the victim.
	affectedNodes map[string]*framework.NodeInfo
}

// podGroupPriority is upstream's util.PodGroupPriority: a group without a
// resolved priority has the static default, 0.
func podGroupPriority(pg *schedulingv1beta1.PodGroup) int32 {
	if pg.Spec.Priority != nil {
		return *pg.Spec.Priority
	}
	return 0
}

// getPodPriority is the priority preemption gives p: its PodGroup's when
// pgLister (set in workload-aware profiles only) knows the group, else
// the pod's own.
func getPodPriority(p *v1.Pod, pgLister framework.PodGroupLister) int32 {
	name, ok := framework.PodGroupNameOf(p)
	if !ok || pgLister == nil {
		return corev1helpers.PodPriority(p)
	}
	pg, err := pgLister.Get(p.Namespace, name)
	if err != nil || pg == nil {
		return corev1helpers.PodPriority(p)
	}
	return podGroupPriority(pg)
}

// newVictim returns pods as one victim; pods must not be empty.
func newVictim(pods []*framework.PodInfo, priority int32, keyType framework.EntityKeyType, now time.Time) *victim {
	earliest := podStartTime(pods[0].Pod, now)
	for _, pi := range pods[1:] {
		if t := podStartTime(pi.Pod, now); t.Before(earliest) {
			earliest = t
		}
	}
	return &victim{pods: pods, priority: priority, earliestStart: earliest, keyType: keyType}
}

// newPodVictim returns pi alone as a victim (upstream's NewPodVictim).
func newPodVictim(pi *framework.PodInfo, pgLister framework.PodGroupLister, now time.Time) *victim {
	keyType := framework.PodKeyType
	if _, ok := framework.PodGroupNameOf(pi.Pod); ok && pgLister != nil {
		keyType = framework.PodGroupKeyType
	}
	return newVictim([]*framework.PodInfo{pi}, getPodPriority(pi.Pod, pgLister), keyType, now)
}

// withAffectedNodes records, from snapshot, the nodes v's pods run on.
func (v *victim) withAffectedNodes(snapshot framework.NodeInfoLister) (*victim, error) {
	v.affectedNodes = make(map[string]*framework.NodeInfo)
	for _, pi := range v.pods {
		name := pi.Pod.Spec.NodeName
		if _, ok := v.affectedNodes[name]; ok {
			continue
		}
		ni, err := snapshot.Get(name)
		if err != nil {
			return nil, fmt.Errorf("failed to get node info for node %q from snapshot: %w", name, err)
		}
		v.affectedNodes[name] = ni
	}
	return v, nil
}

// getVictimsOnNode returns the possible victims of the pods on ni. In a
// workload-aware profile, the pods of a PodGroup whose disruptionMode is
// All are one victim with the group's scheduled pods on every node;
// otherwise each pod is one, with its own priority (a group's priority
// would be meaningless where groups are not scheduled).
func (pl *defaultPreemption) getVictimsOnNode(ni *framework.NodeInfo, now time.Time) ([]*victim, error) {
	snapshot := pl.fh.SnapshotSharedLister()
	if !pl.fts.EnableGenericWorkload {
		victims := make([]*victim, 0, len(ni.Pods))
		for _, pi := range ni.Pods {
			v, err := newPodVictim(pi, nil, now).withAffectedNodes(snapshot.NodeInfos())
			if err != nil {
				return nil, err
			}
			victims = append(victims, v)
		}
		return victims, nil
	}
	return getCrossNodesVictims(snapshot, []*framework.NodeInfo{ni}, now)
}

// disruptAllGroup returns the key of pod's PodGroup when its
// disruptionMode is All (upstream's getHighestAllAncestor for a leaf
// group).
func disruptAllGroup(pod *v1.Pod, pgLister framework.PodGroupLister) (framework.EntityKey, bool) {
	name, ok := framework.PodGroupNameOf(pod)
	if !ok || pgLister == nil {
		return framework.EntityKey{}, false
	}
	pg, err := pgLister.Get(pod.Namespace, name)
	if err != nil || pg == nil {
		return framework.EntityKey{}, false
	}
	if pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil {
		return framework.PodGroupKey(pod.Namespace, name), true
	}
	return framework.EntityKey{}, false
}

// getCrossNodesVictims lists the victims of the pods on nodes, a PodGroup
// whose disruptionMode is All once, with all its scheduled pods across the
// cluster, so that its whole cost and blast radius are weighed.
func getCrossNodesVictims(snapshot framework.SharedLister, nodes []*framework.NodeInfo, now time.Time) ([]*victim, error) {
	pgLister := snapshot.PodGroups()
	seen := sets.New[framework.EntityKey]()
	var victims []*victim
	for _, ni := range nodes {
		for _, pi := range ni.Pods {
			p := pi.Pod
			key, all := disruptAllGroup(p, pgLister)
			if !all {
				key = framework.PodKey(p.Namespace, p.Name)
			}
			if seen.Has(key) {
				continue
			}
			seen.Insert(key)
			v := newPodVictim(pi, pgLister, now)
			if all {
				v = groupVictim(snapshot, key, pi, now)
			}
			v, err := v.withAffectedNodes(snapshot.NodeInfos())
			if err != nil {
				return nil, err
			}
			victims = append(victims, v)
		}
	}
	return victims, nil
}

// groupVictim returns the scheduled pods of the group key as one victim
// with the group's priority; pi alone should the group's state be
// missing, which a pod of the snapshot rules out.
func groupVictim(snapshot framework.SharedLister, key framework.EntityKey, pi *framework.PodInfo, now time.Time) *victim {
	pgLister := snapshot.PodGroups()
	state, err := snapshot.PodGroupStates().Get(key.Namespace, key.Name)
	if err != nil {
		return newPodVictim(pi, pgLister, now)
	}
	scheduled := state.ScheduledPods()
	if len(scheduled) == 0 {
		return newPodVictim(pi, pgLister, now)
	}
	pods := make([]*framework.PodInfo, 0, len(scheduled))
	for _, p := range scheduled {
		// Scheduled pods passed Filter and Reserve: they parse.
		spi, err := framework.NewPodInfo(p)
		if err != nil {
			return newPodVictim(pi, pgLister, now)
		}
		pods = append(pods, spi)
	}
	return newVictim(pods, getPodPriority(pi.Pod, pgLister), key.Type, now)
}

// victimRank orders the victim types: pod groups above lone pods.
func victimRank(v *victim) int {
	if v.keyType == framework.PodGroupKeyType {
		return 2
	}
	return 1
}

// moreImportantVictim orders victims by priority, then pod groups before
// pods, then the larger, then the one that started earlier (upstream's
// MoreImportantVictim). For lone pods without a group it is the order by
// priority and start time.
func moreImportantVictim(a, b *victim) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if ra, rb := victimRank(a), victimRank(b); ra != rb {
		return ra > rb
	}
	if len(a.pods) != len(b.pods) {
		return len(a.pods) > len(b.pods)
	}
	return a.earliestStart.Before(b.earliestStart)
}

// violatingVictim is a victim whose eviction exceeds a budget, with the
// number of its pods that do.
type violatingVictim struct {
	victim       *victim
	violateCount int
}

// filterVictimsWithPDBViolation splits victims, keeping their order, into
// those whose eviction would exceed a matching budget's disruptionsAllowed
// (counting the earlier victims of the list as evicted too) and the
// others. A victim is atomic: one violating pod makes the whole victim
// violating. As upstream since 1.37, a pod stops using up budgets at the
// first one it violates: budgets listed after it keep their allowance for
// later pods (1.36 charged the pod to every budget it matched). The
// budgets are walked in the lister's order, as upstream's are.
func filterVictimsWithPDBViolation(victims []*victim, pdbs []*policy.PodDisruptionBudget) (violating []violatingVictim, nonViolating []*victim) {
	if len(pdbs) == 0 {
		return nil, victims
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
	for _, v := range victims {
		n := 0
		for _, pi := range v.pods {
			if violates(pi.Pod) {
				n++
			}
		}
		if n > 0 {
			violating = append(violating, violatingVictim{victim: v, violateCount: n})
		} else {
			nonViolating = append(nonViolating, v)
		}
	}
	return violating, nonViolating
}
