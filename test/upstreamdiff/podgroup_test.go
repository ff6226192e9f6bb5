package upstreamdiff

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"
)

var (
	groupSeeds = flag.Int("group-seeds", envInt("UPSTREAMDIFF_GROUP_SEEDS", 2), "number of random clusters with pod groups to compare (env UPSTREAMDIFF_GROUP_SEEDS)")
	groupQuiet = flag.Duration("group-quiet", 150*time.Millisecond, "how long both schedulers must be quiet for a unit to count as settled")
	groupUnits = flag.Int("group-units", 14, "single pods and pod groups per cluster with pod groups, created one after the other")
)

// rackKey is the node label pod groups' topology constraints name.
const rackKey = "example.com/rack"

// groupCluster is a random cluster for the pod-group comparison: nodes in
// racks, running pods that preemption may evict, and the units (a single
// pod, or a PodGroup and its pods) to schedule one after the other.
type groupCluster struct {
	objects []k8sruntime.Object
	units   []groupUnit
	// rackOf is each node's rack.
	rackOf map[string]string
}

type groupUnit struct {
	group *schedulingv1beta1.PodGroup
	pods  []*v1.Pod
}

// podObjects are the unit's pods.
func (u groupUnit) podObjects() []k8sruntime.Object {
	var out []k8sruntime.Object
	for _, p := range u.pods {
		out = append(out, p)
	}
	return out
}

func (u groupUnit) String() string {
	if u.group == nil {
		return "pod " + u.pods[0].Name
	}
	return fmt.Sprintf("group %s (%d pods, policy %s, constraints %v, priority %d)", u.group.Name, len(u.pods),
		policyString(u.group.Spec.SchedulingPolicy), u.group.Spec.SchedulingConstraints, ptr.Deref(u.group.Spec.Priority, 0))
}

func policyString(p schedulingv1beta1.PodGroupSchedulingPolicy) string {
	if p.Gang != nil {
		return fmt.Sprintf("gang minCount %d", p.Gang.MinCount)
	}
	return "basic"
}

// newGroupCluster draws a cluster. Nodes differ in size so that their
// scores rarely tie; CompositePodGroups (out of scope) are never drawn.
func newGroupCluster(seed uint64, units int) *groupCluster {
	r := rand.New(rand.NewPCG(seed, 35))
	c := &groupCluster{rackOf: map[string]string{}}
	const nodes = 8
	racks := 2 + r.IntN(2)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		c.rackOf[name] = fmt.Sprintf("rack-%d", i%racks)
		cpu := 3 + i + r.IntN(2)
		c.objects = append(c.objects, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				v1.LabelHostname: name,
				rackKey:          c.rackOf[name],
			}},
			Status: v1.NodeStatus{
				Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse(fmt.Sprint(cpu)), v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 8+3*i)), v1.ResourcePods: resource.MustParse("20")},
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(fmt.Sprint(cpu)), v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 8+3*i)), v1.ResourcePods: resource.MustParse("20")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		})
		// Running pods of low priority, which preemption may evict.
		for j := range 1 + r.IntN(2) {
			p := groupPod(fmt.Sprintf("running-%d-%d", i, j), int32(r.IntN(2)*10), 1+r.IntN(3))
			p.Spec.NodeName = name
			p.Status.Phase = v1.PodRunning
			c.objects = append(c.objects, p)
		}
	}
	for u := range units {
		prio := []int32{0, 10, 100, 1000}[r.IntN(4)]
		if r.IntN(3) == 0 {
			c.units = append(c.units, groupUnit{pods: []*v1.Pod{groupPod(fmt.Sprintf("single-%d", u), prio, 1+r.IntN(4))}})
			continue
		}
		name := fmt.Sprintf("group-%d", u)
		size := 2 + r.IntN(4)
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, UID: types.UID(name)},
			Spec:       schedulingv1beta1.PodGroupSpec{Priority: ptr.To(prio)},
		}
		switch r.IntN(4) {
		case 0:
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		default:
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(1 + r.IntN(size))}
		}
		if r.IntN(2) == 0 {
			pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: rackKey}}}
		}
		// Sometimes too large for the cluster, or for any rack.
		cpu := 1 + r.IntN(3)
		if r.IntN(6) == 0 {
			cpu = 5 + r.IntN(6)
		}
		unit := groupUnit{group: pg}
		for i := range size {
			p := groupPod(fmt.Sprintf("%s-%d", name, i), prio, cpu)
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
			unit.pods = append(unit.pods, p)
		}
		c.units = append(c.units, unit)
	}
	return c
}

func groupPod(name string, priority int32, cpu int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{
			SchedulerName: v1.DefaultSchedulerName,
			Priority:      ptr.To(priority),
			Containers: []v1.Container{{Name: "c", Image: "registry.local/tiny:1", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(fmt.Sprint(cpu)),
				v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", cpu)),
			}}}},
		},
	}
}

func createPodGroup(ctx context.Context, client *fake.Clientset, o k8sruntime.Object) error {
	pg, ok := o.(*schedulingv1beta1.PodGroup)
	if !ok {
		return fmt.Errorf("unexpected object %T", o)
	}
	_, err := client.SchedulingV1beta1().PodGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{})
	return err
}

// unitResult is what a scheduler did with a unit, as the API and its
// placement-score log show it once the unit settled.
type unitResult struct {
	// Nodes is where each pod is bound, "" when it is not.
	Nodes map[string]string
	// Nominated is each unbound pod's nominated node.
	Nominated map[string]string
	// Unschedulable is each unbound pod's PodScheduled condition: reason
	// and message.
	Unschedulable map[string]string
	// Group is the PodGroup's PodGroupInitiallyScheduled condition.
	Group string
	// Victims are the pods deleted, sorted.
	Victims []string
	// Placements are the placements' final scores, as logged.
	Placements []string
	// firstPlacements are the placements the last pod-group cycle tried
	// first: in its own pass, then in its preemption's trial.
	firstPlacements []string
}

// unitSettleTimeout bounds how long a unit may take on one side: a
// preempting group retries after its backoff, and on a machine loaded
// far beyond its cores a unit whose victims go has taken over 8 s. A
// settled unit does not wait for it.
const unitSettleTimeout = 30 * time.Second

// settle waits until s has settled every pod of u, written u's PodGroup
// condition, and its actions have been quiet for a while: both for
// groupQuiet and for quietPolls polls in a row, so that a machine too
// loaded to run the process's goroutines for a while does not pass for
// a quiet scheduler. When the queue has backed off a pod or pod group
// that was not tried again yet, it also waits for one retry and quiet
// again: pods found unschedulable while an event came in are tried again
// after their backoff, a second without a sound, and may then fare
// otherwise (say, preempt), and which attempt the harness read would
// depend on timing. One retry is enough: a group that fails again for
// good keeps being retried.
func settle(s *groupSide, u groupUnit) error {
	deadline := time.Now().Add(unitSettleTimeout)
	last, quietSince, quietPolled := -1, time.Now(), 0
	retriedBefore := -1
	for time.Now().Before(deadline) {
		n := s.activity()
		if n != last {
			last, quietSince, quietPolled = n, time.Now(), 0
		}
		quietPolled++
		ok, err := s.settled(u.pods, u.group)
		if err != nil {
			return err
		}
		// Activity is read again: the harness's own goroutine may have
		// been off the CPU since it was read above, while the scheduler
		// went on.
		if ok && time.Since(quietSince) > *groupQuiet && quietPolled > quietPolls && s.activity() == last {
			pending, retried := s.scores.retryPending()
			switch {
			case retriedBefore < 0 && pending:
				retriedBefore = retried
			case retriedBefore < 0 || !pending || retried > retriedBefore:
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// quietPolls is how many of settle's polls, 10 ms apart, must see no
// activity.
const quietPolls = 15

func observe(s *groupSide, u groupUnit, deletedBefore int) (*unitResult, error) {
	res := &unitResult{Nodes: map[string]string{}, Nominated: map[string]string{}, Unschedulable: map[string]string{}}
	for _, p := range u.pods {
		cur, err := s.pod(p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		res.Nodes[p.Name] = cur.Spec.NodeName
		if cur.Spec.NodeName != "" {
			continue
		}
		if cur.Status.NominatedNodeName != "" {
			res.Nominated[p.Name] = cur.Status.NominatedNodeName
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == v1.PodScheduled {
				res.Unschedulable[p.Name] = c.Reason + ": " + c.Message
			}
		}
	}
	if u.group != nil {
		pg, err := s.podGroup(u.group.Namespace, u.group.Name)
		if err != nil {
			return nil, err
		}
		for _, c := range pg.Status.Conditions {
			if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled {
				res.Group = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
	}
	// A victim a preemption evicts again, when the scheduler's cache
	// had not seen it go yet, is one victim.
	res.Victims = slices.Compact(slices.Sorted(slices.Values(s.deletions.list()[deletedBefore:])))
	// Logged in the order of a map's iteration on both sides.
	key := ""
	if u.group != nil {
		key = u.group.Namespace + "/" + u.group.Name
	}
	scores, cycle := s.scores.take(key)
	res.Placements, res.firstPlacements = slices.Sorted(slices.Values(scores)), cycle.firstPlacements
	return res, nil
}

// placementTied reports whether the best of the logged placement scores
// was reached by more than one placement: both schedulers then pick one
// of them at random.
func placementTied(lines []string) bool {
	best, count := "", 0
	var bestScore int64 = -1
	for _, l := range lines {
		i := strings.LastIndex(l, "=")
		var score int64
		if _, err := fmt.Sscan(l[i+1:], &score); err != nil {
			continue
		}
		switch {
		case score > bestScore:
			bestScore, best, count = score, l[:i], 1
		case score == bestScore && l[:i] != best:
			count++
		}
	}
	return count > 1
}

// TestUpstreamDiffPodGroups creates, in each random cluster, single pods
// and pod groups one unit after the other in kube-scheduler 1.37.2 and in
// profile-scheduler, both with GenericWorkload and
// TopologyAwareWorkloadScheduling on, waits for both to settle the unit,
// and fails where they placed, nominated, evicted, reported or scored
// placements differently. Pods left unbound are deleted before the next
// unit, so that no retry races the next unit.
func TestUpstreamDiffPodGroups(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
	})
	counts := map[string]int{}
	for seed := *firstSeed; seed < *firstSeed+*groupSeeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runGroupSeed(t, uint64(seed), counts)
		})
	}
	t.Logf("%d clusters, %d units each; outcomes: %v", *groupSeeds, *groupUnits, counts)
}

func runGroupSeed(t *testing.T, seed uint64, counts map[string]int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newGroupCluster(seed, *groupUnits)
	up, err := newUpstreamGroupSide(ctx, c.objects)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	ours, err := newOursGroupSide(ctx, c.objects)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.close()
	// running are the bound pods, by key, as kube-scheduler bound them.
	running := map[string]*v1.Pod{}
	for _, o := range c.objects {
		if p, ok := o.(*v1.Pod); ok {
			running[podKey(p)] = p
		}
	}
	priorities := func(key string) int64 {
		if p, ok := running[key]; ok {
			return int64(*p.Spec.Priority)
		}
		return math.MaxInt64
	}
	for _, u := range c.units {
		sides := []*groupSide{up, ours}
		before := []int{len(up.deletions.list()), len(ours.deletions.list())}
		// The pods first, then their PodGroup: GangScheduling holds them
		// until it appears, so that one pod-group cycle takes them all
		// rather than however many each scheduler had seen.
		for _, s := range sides {
			if err := s.create(ctx, u.podObjects()...); err != nil {
				t.Fatal(err)
			}
		}
		if u.group != nil {
			time.Sleep(50 * time.Millisecond)
			for _, s := range sides {
				if err := s.create(ctx, u.group); err != nil {
					t.Fatal(err)
				}
			}
		}
		var results [2]*unitResult
		for i, s := range sides {
			if err := settle(s, u); err != nil {
				t.Fatal(err)
			}
			if results[i], err = observe(s, u, before[i]); err != nil {
				t.Fatal(err)
			}
		}
		want, got := results[0], results[1]
		counts[unitOutcome(u, want)]++
		tie := ""
		// What a tie lets differ: what follows from the choice.
		ignored := []string{"Nodes", "Victims", "Nominated", "Unschedulable"}
		if !slices.Equal(want.Victims, got.Victims) && groupVictimsKey(want.Victims, priorities) == groupVictimsKey(got.Victims, priorities) {
			// Tied preemption candidates (see victimsKey): each may pick
			// any of them.
			tie = "preemption ties"
		} else if !cmp.Equal(want.Nodes, got.Nodes) && slices.Equal(want.Placements, got.Placements) && placementTied(want.Placements) &&
			!slices.Equal(c.racks(want), c.racks(got)) {
			// Tied placements, and each picked another one at random.
			// Pods left out of it are tried again in that placement
			// alone, so the group's condition may differ too (whether
			// they can preempt there).
			tie = "placement ties"
			ignored = append(ignored, "Group")
		} else if !cmp.Equal(want.Nodes, got.Nodes) && u.group != nil && slices.Equal(nodeMultiset(want.Nodes), nodeMultiset(got.Nodes)) {
			// The group's pods are identical and took the same nodes:
			// either a pod found nodes of equal score and each side
			// picked another at random, as selectHost does, or the
			// members were tried in another order. Upstream's order is
			// fixed (priority, attempts, queue time, name) but its
			// attempts and queue times follow the retries' timing,
			// which differs between the sides on a loaded machine. The
			// cluster is the same either way.
			tie = "member order"
		}
		if cycle, trial := firstPlacementDiffers(want, got, 0), firstPlacementDiffers(want, got, 1); tie == "" && (cycle || trial) && reportsFirstPlacement(want) {
			// No placement fit, and each reported the failure of the
			// placement it tried first: placementGenerate lists them
			// in map order, upstream as ours, in the cycle and again
			// in its preemption's trial. Only the reports of a pass
			// whose first placements differ are masked; the rest must
			// agree.
			tie = "first placement"
			ignored = []string{"Unschedulable"}
			want.Group, got.Group = maskFirstPlacement(want.Group, cycle, trial), maskFirstPlacement(got.Group, cycle, trial)
		}
		if tie != "" {
			counts[tie]++
			ignore := cmpopts.IgnoreFields(unitResult{}, ignored...)
			if diff := cmp.Diff(want, got, ignore, cmpopts.IgnoreUnexported(unitResult{})); diff != "" {
				t.Fatalf("seed %d, %s: results differ beyond a tie (-kube-scheduler 1.37.2 +profile-scheduler):\n%s", seed, u, diff)
			}
			// Ours takes upstream's choice, so that the clusters stay the same.
			if err := alignGroupVictims(ctx, ours, running, want.Victims, got.Victims); err != nil {
				t.Fatal(err)
			}
			if err := alignUnit(ctx, ours, u, want.Nodes); err != nil {
				t.Fatal(err)
			}
		} else if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(unitResult{})); diff != "" {
			t.Fatalf("seed %d, %s: results differ (-kube-scheduler 1.37.2 +profile-scheduler):\n%s", seed, u, diff)
		}
		for _, p := range u.pods {
			if node := want.Nodes[p.Name]; node != "" {
				placed := p.DeepCopy()
				placed.Spec.NodeName = node
				placed.Status.Phase = v1.PodRunning
				running[podKey(p)] = placed
			}
		}
		for _, v := range want.Victims {
			delete(running, v)
		}
		// Pods left pending go: no retry races the next unit.
		for _, s := range sides {
			for _, p := range u.pods {
				if want.Nodes[p.Name] != "" {
					continue
				}
				if err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		}
		// Their deletions are no victims of the next unit.
		for _, s := range sides {
			if err := settleQuiet(s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// firstPlacementStatus is how a pod-group cycle in which no placement
// fit reports the first one's failure.
const firstPlacementStatus = "first placement status: "

// reportsFirstPlacement reports whether r shows a pod-group cycle's
// report of its first placement's failure.
func reportsFirstPlacement(r *unitResult) bool {
	return strings.Contains(r.Group, firstPlacementStatus) ||
		slices.ContainsFunc(slices.Collect(maps.Values(r.Unschedulable)), func(m string) bool { return strings.Contains(m, firstPlacementStatus) })
}

// firstPlacementDiffers reports whether the sides' pass (0 the cycle's,
// 1 its preemption's trial) tried different placements first.
func firstPlacementDiffers(want, got *unitResult, pass int) bool {
	first := func(r *unitResult) string {
		if pass < len(r.firstPlacements) {
			return r.firstPlacements[pass]
		}
		return ""
	}
	return first(want) != first(got)
}

// podGroupPreemption starts pod-group preemption's part of a PodGroup
// condition, after the cycle's own report.
const podGroupPreemption = ", pod group preemption: "

// maskFirstPlacement drops, from a PodGroup condition, the failure of the
// first placement tried by the cycle (with cycle) and by its preemption's
// trial (with trial), keeping the rest: with cycle, what follows the
// cycle's report up to the preemption's part is dropped too.
func maskFirstPlacement(condition string, cycle, trial bool) string {
	mask := func(s string) string {
		if head, _, ok := strings.Cut(s, firstPlacementStatus); ok {
			return head + firstPlacementStatus + "..."
		}
		return s
	}
	own, preemption, ok := strings.Cut(condition, podGroupPreemption)
	if cycle {
		own = mask(own)
	}
	if !ok {
		return own
	}
	if trial {
		preemption = mask(preemption)
	}
	return own + podGroupPreemption + preemption
}

// racks are the racks of the nodes r's pods are bound or nominated to.
func (c *groupCluster) racks(r *unitResult) []string {
	var out []string
	for _, nodes := range []map[string]string{r.Nodes, r.Nominated} {
		for _, n := range nodes {
			if rack := c.rackOf[n]; n != "" && !slices.Contains(out, rack) {
				out = append(out, rack)
			}
		}
	}
	slices.Sort(out)
	return out
}

// groupVictimsKey is upstream's ranking of preemption candidates by their
// victims, as far as the harness's pods tell them apart (see victimsKey
// in diff_test.go): the highest priority, the sum and the number.
func groupVictimsKey(victims []string, priority func(string) int64) [3]int64 {
	key := [3]int64{math.MinInt64, 0, int64(len(victims))}
	for _, v := range victims {
		key[0] = max(key[0], priority(v))
		key[1] += priority(v)
	}
	return key
}

// nodeMultiset lists the nodes of a unit's pods, sorted, unbound ones
// included as "".
func nodeMultiset(nodes map[string]string) []string {
	return slices.Sorted(maps.Values(nodes))
}

// alignGroupVictims makes s hold the running pods kube-scheduler's side
// holds after a preemption whose victims differed: pods only s evicted
// come back, pods only upstream evicted go.
func alignGroupVictims(ctx context.Context, s *groupSide, running map[string]*v1.Pod, want, got []string) error {
	for _, key := range got {
		if slices.Contains(want, key) {
			continue
		}
		p := running[key]
		if p == nil {
			return fmt.Errorf("victim %s was not running", key)
		}
		if _, err := s.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, key := range want {
		if slices.Contains(got, key) {
			continue
		}
		namespace, name, _ := strings.Cut(key, "/")
		if err := s.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// settleQuiet waits until s's actions have been quiet for a while.
func settleQuiet(s *groupSide) error {
	last, quietSince := -1, time.Now()
	deadline := time.Now().Add(unitSettleTimeout)
	for time.Now().Before(deadline) {
		if n := s.activity(); n != last {
			last, quietSince = n, time.Now()
		}
		if time.Since(quietSince) > 100*time.Millisecond {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the scheduler did not go quiet in %v", unitSettleTimeout)
}

// alignUnit makes u's pods on s bound as nodes says: each pod is deleted
// and created again, bound or pending.
func alignUnit(ctx context.Context, s *groupSide, u groupUnit, nodes map[string]string) error {
	for _, p := range u.pods {
		if err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if nodes[p.Name] == "" {
			continue
		}
		placed := p.DeepCopy()
		placed.Spec.NodeName = nodes[p.Name]
		placed.Status.Phase = v1.PodRunning
		if _, err := s.client.CoreV1().Pods(p.Namespace).Create(ctx, placed, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// unitOutcome names what kube-scheduler did with a unit.
func unitOutcome(u groupUnit, r *unitResult) string {
	bound := 0
	for _, n := range r.Nodes {
		if n != "" {
			bound++
		}
	}
	kind := "single pod"
	if u.group != nil {
		kind = "group"
		if u.group.Spec.SchedulingConstraints != nil {
			kind = "topology group"
		}
	}
	state := "bound"
	switch {
	case bound == 0:
		state = "waiting"
	case bound < len(u.pods):
		state = "partly bound"
	}
	if len(r.Victims) > 0 {
		state += " after preemption"
	}
	return kind + " " + state
}

// TestMaskFirstPlacement: only the reports of the passes whose first
// placements differ are masked; any other difference stays.
func TestMaskFirstPlacement(t *testing.T) {
	const (
		cycleReport = "pod group is unschedulable, 0/2 placements are available, first placement status: "
		trialReport = ", pod group preemption: 0/2 placements are available, first placement status: "
	)
	tests := []struct {
		name         string
		want, got    string
		cycle, trial bool
		wantEqual    bool
	}{
		{
			name:      "the cycle's first placements differ",
			want:      cycleReport + "rack-0 is full" + trialReport + "minCount (3) cannot be satisfied",
			got:       cycleReport + "rack-1 is full" + trialReport + "minCount (3) cannot be satisfied",
			cycle:     true,
			wantEqual: true,
		},
		{
			name:      "the trial's first placements differ",
			want:      cycleReport + "rack-0 is full" + trialReport + "rack-0 is full",
			got:       cycleReport + "rack-0 is full" + trialReport + "rack-1 is full",
			trial:     true,
			wantEqual: true,
		},
		{
			name:      "both differ",
			want:      cycleReport + "rack-0 is full" + trialReport + "rack-0 is full",
			got:       cycleReport + "rack-1 is full" + trialReport + "rack-1 is full",
			cycle:     true,
			trial:     true,
			wantEqual: true,
		},
		{
			name:  "the trial's report differs where its first placements agree",
			want:  cycleReport + "rack-0 is full" + trialReport + "rack-0 is full",
			got:   cycleReport + "rack-1 is full" + trialReport + "rack-1 is full",
			cycle: true,
		},
		{
			name:  "the preemption's outcome differs",
			want:  cycleReport + "rack-0 is full" + trialReport + "rack-0 is full",
			got:   cycleReport + "rack-1 is full, pod group preemption: No preemption victims found for incoming preemptor",
			cycle: true,
			trial: true,
		},
		{
			name:  "what precedes the report differs",
			want:  cycleReport + "rack-0 is full",
			got:   "pod group is waiting, 0/2 placements are available, first placement status: rack-1 is full",
			cycle: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, got := maskFirstPlacement(tt.want, tt.cycle, tt.trial), maskFirstPlacement(tt.got, tt.cycle, tt.trial)
			if (want == got) != tt.wantEqual {
				t.Errorf("masked:\n%s\n%s\nequal %v, want %v", want, got, want == got, tt.wantEqual)
			}
		})
	}
}
