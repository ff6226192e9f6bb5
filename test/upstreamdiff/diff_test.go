package upstreamdiff

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var (
	seeds     = flag.Int("seeds", envInt("UPSTREAMDIFF_SEEDS", 10), "number of random clusters to compare (env UPSTREAMDIFF_SEEDS)")
	firstSeed = flag.Int("first-seed", envInt("UPSTREAMDIFF_FIRST_SEED", 1), "seed of the first cluster (env UPSTREAMDIFF_FIRST_SEED)")
	numNodes  = flag.Int("nodes", 30, "nodes per cluster")
	numPods   = flag.Int("pods", 40, "pending pods per cluster, scheduled one after the other")
	maxShown  = flag.Int("show", 3, "mismatching pods printed in full per cluster")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// tally counts, per category, the pods whose results differ.
type tally struct {
	pods int
	// outcomes counts pods by kube-scheduler's outcome, to show what the
	// clusters exercised.
	outcomes map[string]int
	ties     int
	// deallocationTies counts PostFilters that deallocated different
	// claims on the two sides (see alignDeallocations).
	deallocationTies int
	// preBinds counts DynamicResources' PreBind outcomes on
	// kube-scheduler's side, by status code and, for a failure, its cause.
	preBinds   map[string]int
	mismatches map[string]int
}

// TestUpstreamDiff schedules the pending pods of each random cluster one
// after the other with both frameworks and fails on the first pod whose
// results differ in any way the harness compares.
func TestUpstreamDiff(t *testing.T) {
	total := tally{outcomes: map[string]int{}, preBinds: map[string]int{}, mismatches: map[string]int{}}
	for seed := *firstSeed; seed < *firstSeed+*seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runSeed(t, uint64(seed), &total)
		})
	}
	t.Logf("%d clusters of %d nodes, %d pods compared; kube-scheduler's outcomes: %v; its DynamicResources PreBinds: %v; preemptions between tied nodes: %d; deallocations of different claims: %d; pods with a mismatch by category: %v",
		*seeds, *numNodes, total.pods, total.outcomes, total.preBinds, total.ties, total.deallocationTies, total.mismatches)
}

func runSeed(t *testing.T, seed uint64, total *tally) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(seed, *numNodes, *numPods)
	up, err := newUpstreamSide(ctx, c.objects)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	ours, err := newOursSide(ctx, c.objects)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.close()

	nodeNames := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		nodeNames[i] = n.Name
	}
	bound := slices.Clone(c.bound)
	nominated := nominations{}
	shown := 0
	// Pods a preemption nominated get a second cycle after the others, as
	// the queue retries them once their victims are gone.
	queue := slices.Clone(c.pending)
	for len(queue) > 0 {
		pod := queue[0]
		queue = queue[1:]
		for _, s := range []side{up, ours} {
			if err := s.setState(bound, c.nodes, nominated); err != nil {
				t.Fatal(err)
			}
		}
		if len(pod.Spec.ResourceClaims) > 0 || requestsExtendedResource(pod) {
			// The previous binding cycle's writes (PreBind, Unreserve)
			// reach the DRA managers through their informers.
			if err := awaitClaims(ctx, up, ours); err != nil {
				t.Fatal(err)
			}
		}
		// Evictions start during the cycle: count deletions from before it.
		upBefore, oursBefore := len(up.deleted()), len(ours.deleted())
		wantEnqueue, gotEnqueue := up.preEnqueue(ctx, pod), ours.preEnqueue(ctx, pod)
		want := up.cycle(ctx, pod, nodeNames)
		got := ours.cycle(ctx, pod, nodeNames)
		want.PreEnqueue, got.PreEnqueue = wantEnqueue, gotEnqueue
		if want.Nominated != "" || got.Nominated != "" {
			want.Victims, got.Victims = awaitVictims(up, ours, upBefore, oursBefore)
		}
		// A pod with claims, or with extended resources DynamicResources
		// may serve with devices, binds only if kube-scheduler's binding
		// cycle would have bound it.
		binds := true
		if len(pod.Spec.ResourceClaims) > 0 || requestsExtendedResource(pod) {
			if deallocated := "deallocation of ResourceClaim completed"; slices.Contains(want.PostFilter.Reasons, deallocated) && slices.Contains(got.PostFilter.Reasons, deallocated) {
				aligned, err := alignDeallocations(ctx, up, ours, pod)
				if err != nil {
					t.Fatal(err)
				}
				if aligned {
					total.deallocationTies++
				}
			}
			if node := pick(want.Totals); node != "" {
				if binds, err = bindingCycle(ctx, up, ours, pod, node, want, got); err != nil {
					t.Fatal(err)
				}
			}
		}
		total.pods++
		total.outcomes[outcome(want)]++
		if want.PreBind.Code != "" {
			cause, _, _ := strings.Cut(strings.Join(want.PreBind.Reasons, ""), ":")
			total.preBinds[strings.TrimSpace(want.PreBind.Code+" "+cause)]++
		}
		diffs := compare(want, got)
		if want.Nominated != got.Nominated && want.Nominated != "" && got.Nominated != "" &&
			victimsKey(want.Victims, bound) == victimsKey(got.Victims, bound) {
			// Tied candidates: not a difference (see victimsKey).
			delete(diffs, "nominated")
			delete(diffs, "victims")
			total.ties++
		}
		for cat := range diffs {
			total.mismatches[cat]++
		}
		if len(diffs) > 0 {
			t.Errorf("seed %d, pod %s: %d categories differ (%s)", seed, podKey(pod), len(diffs), strings.Join(slices.Sorted(maps.Keys(diffs)), ", "))
			if shown < *maxShown {
				shown++
				t.Logf("pod %s:\n%s", podKey(pod), podSummary(pod))
				for _, cat := range slices.Sorted(maps.Keys(diffs)) {
					t.Logf("%s (-kube-scheduler 1.37.2 +profile-scheduler):\n%s", cat, diffs[cat])
				}
			}
		}
		// The cluster moves on as kube-scheduler's results say.
		if n := pod.Status.NominatedNodeName; n != "" {
			nominated[n] = slices.DeleteFunc(nominated[n], func(p *v1.Pod) bool { return p.UID == pod.UID })
		}
		if want.Nominated != "" && pod.Status.NominatedNodeName == "" {
			retry := pod.DeepCopy()
			retry.Status.NominatedNodeName = want.Nominated
			nominated[want.Nominated] = append(nominated[want.Nominated], retry)
			queue = append(queue, retry)
		}
		if node := pick(want.Totals); node != "" && binds {
			placed := pod.DeepCopy()
			placed.Spec.NodeName = node
			placed.Status.Phase = v1.PodRunning
			bound = append(bound, placed)
			for _, s := range []side{up, ours} {
				if err := s.bind(ctx, placed); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(want.Victims)+len(got.Victims) > 0 {
			if err := alignVictims(ctx, ours.clientset(), bound, want.Victims, got.Victims); err != nil {
				t.Fatal(err)
			}
			bound = slices.DeleteFunc(bound, func(p *v1.Pod) bool { return slices.Contains(want.Victims, podKey(p)) })
		}
	}
}

// requestsExtendedResource reports whether some container of pod asks for
// an extended resource, which DynamicResources may serve with devices
// (DRAExtendedResource): Reserve then counts them as in flight.
func requestsExtendedResource(pod *v1.Pod) bool {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for name, q := range c.Resources.Requests {
			if !q.IsZero() && (name == gpuResource || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)) {
				return true
			}
		}
	}
	return false
}

// preBindTimeout bounds each side's PreBind: a device whose binding
// conditions never come true (attachSlow) makes it wait for its context,
// where kube-scheduler would wait for the binding timeout; the outcome,
// a device binding timeout, is the same. It may be that short because
// the simulated driver answers within the write of the allocation, and
// PreBind checks the conditions once before it looks at its context.
const preBindTimeout = 5 * time.Millisecond

// bindingCycle runs, for pod placed on node, what the binding cycle does
// with DynamicResources on both sides: Reserve, then, when it succeeded
// on both, PreBindPreFlight and PreBind (Unreserve after a failure), and
// records their statuses, the devices in use after Reserve and what the
// claims hold afterwards in want and got. It reports whether
// kube-scheduler would bind the pod.
func bindingCycle(ctx context.Context, up, ours side, pod *v1.Pod, node string, want, got *result) (bool, error) {
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	var err error
	if want.Reserve, want.Devices, err = up.reserve(ctx, assumed, node); err != nil {
		return false, err
	}
	if got.Reserve, got.Devices, err = ours.reserve(ctx, assumed, node); err != nil {
		return false, err
	}
	if want.Reserve.Code != "Success" || got.Reserve.Code != "Success" {
		// As the scheduler does after a failed Reserve.
		up.unreserve(ctx, assumed, node)
		ours.unreserve(ctx, assumed, node)
		return false, nil
	}
	for _, s := range []struct {
		side side
		res  *result
	}{{up, want}, {ours, got}} {
		preBindCtx, cancel := context.WithTimeout(ctx, preBindTimeout)
		s.res.PreBindPreFlight, s.res.PreBind = s.side.preBind(preBindCtx, assumed, node)
		cancel()
		if s.res.Claims, err = claimWrites(ctx, s.side.clientset(), pod); err != nil {
			return false, err
		}
	}
	return want.PreBind.Code == "Success", nil
}

// alignDeallocations makes the claims of pod on profile-scheduler's side
// hold what they hold on kube-scheduler's after both PostFilters
// deallocated a claim: DynamicResources picks one at random among the
// pod's claims unavailable on some node and not reserved, so with two
// such claims the sides may pick different ones, as kube-scheduler
// itself may from one run to the next. It reports whether they did.
func alignDeallocations(ctx context.Context, up, ours side, pod *v1.Pod) (bool, error) {
	want, err := claimWrites(ctx, up.clientset(), pod)
	if err != nil {
		return false, err
	}
	got, err := claimWrites(ctx, ours.clientset(), pod)
	if err != nil {
		return false, err
	}
	aligned := false
	for name := range want {
		if want[name] == got[name] {
			continue
		}
		upstream, err := up.clientset().ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		claim, err := ours.clientset().ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		claim.Status = upstream.Status
		if _, err := ours.clientset().ResourceV1().ResourceClaims(pod.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return false, err
		}
		aligned = true
	}
	return aligned, nil
}

// awaitVictims waits for the background evictions of a preemption on
// both sides: until both have deleted the same pods since the counts
// before and beforeOurs, or 2 seconds.
func awaitVictims(up, ours side, before, beforeOurs int) (want, got []string) {
	deadline := time.Now().Add(2 * time.Second)
	since := func() ([]string, []string) {
		want, got := up.deleted()[before:], ours.deleted()[beforeOurs:]
		slices.Sort(want)
		slices.Sort(got)
		return want, got
	}
	for {
		want, got = since()
		if (len(want) > 0 && slices.Equal(want, got)) || time.Now().After(deadline) {
			// Let a straggler of either side arrive: the evictions of one
			// preemption run in parallel, and under the race detector on
			// a busy machine the last may come tens of milliseconds after
			// the first.
			time.Sleep(100 * time.Millisecond)
			return since()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alignVictims makes profile-scheduler's clientset hold the pods
// kube-scheduler's does after a preemption whose victims differed (they
// may, among nodes tied under upstream's criteria): pods only ours evicted
// come back, pods only upstream evicted go.
func alignVictims(ctx context.Context, client *fake.Clientset, bound []*v1.Pod, want, got []string) error {
	for _, p := range bound {
		key := podKey(p)
		switch inWant, inGot := slices.Contains(want, key), slices.Contains(got, key); {
		case inGot && !inWant:
			if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case inWant && !inGot:
			if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// victimsKey is what kube-scheduler's pickOneNodeForPreemption compares
// candidates by, as far as the harness's pods tell them apart (none has a
// start time): the highest victim priority, the sum of the victims'
// priorities and their number. Nodes with equal keys are tied; upstream
// then takes the first candidate its randomly offset, parallel dry run
// listed, so either side may nominate any of them.
func victimsKey(victims []string, bound []*v1.Pod) [3]int64 {
	var key [3]int64
	key[0] = math.MinInt64
	for _, p := range bound {
		if !slices.Contains(victims, podKey(p)) {
			continue
		}
		prio := int64(*p.Spec.Priority)
		key[0] = max(key[0], prio)
		key[1] += prio
		key[2]++
	}
	return key
}

// outcome names what kube-scheduler did with a pod.
func outcome(r *result) string {
	switch {
	case r.Err != "":
		return "error"
	case len(r.Totals) > 0:
		return "placed"
	case r.Nominated != "":
		return "preempting"
	case r.PreFilter.Code != "Success":
		return "rejected at PreFilter"
	default:
		return "unschedulable"
	}
}

// pick returns the node with the top total; among equal totals the first
// by name, the same rule for both sides.
func pick(totals map[string]int64) string {
	best := ""
	for _, n := range slices.Sorted(maps.Keys(totals)) {
		if best == "" || totals[n] > totals[best] {
			best = n
		}
	}
	return best
}

// topNodes returns the nodes sharing the top total, sorted.
func topNodes(totals map[string]int64) []string {
	best := pick(totals)
	var out []string
	for n, s := range totals {
		if s == totals[best] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// sortScalarReasons sorts the "Insufficient <extended resource>" reasons
// of NodeResourcesFit verdicts, which follow its fixed ones ("Too many
// pods", cpu, memory, ephemeral-storage): kube-scheduler lists them in the
// order it ranges over a map of the pod's scalar requests, so a node
// short of two of them gets either order from it; profile-scheduler sorts
// them by name.
func sortScalarReasons(filter map[string]verdict) {
	fixed := []string{"Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage"}
	for _, v := range filter {
		if v.Plugin != "NodeResourcesFit" {
			continue
		}
		i := 0
		for i < len(v.Reasons) && slices.Contains(fixed, v.Reasons[i]) {
			i++
		}
		slices.Sort(v.Reasons[i:])
	}
}

// compare returns a diff per category of result that differs.
func compare(want, got *result) map[string]string {
	sortScalarReasons(want.Filter)
	sortScalarReasons(got.Filter)
	out := map[string]string{}
	check := func(cat string, w, g any) {
		if d := cmp.Diff(w, g); d != "" {
			out[cat] = d
		}
	}
	check("error", want.Err, got.Err)
	check("signature", want.Signature, got.Signature)
	check("prefilter", want.PreFilter, got.PreFilter)
	check("prefilter-nodes", want.PreFilterNodes, got.PreFilterNodes)
	check("filter", want.Filter, got.Filter)
	check("score", want.Scores, got.Scores)
	check("total", want.Totals, got.Totals)
	check("placement", topNodes(want.Totals), topNodes(got.Totals))
	check("message", want.Message, got.Message)
	check("postfilter", want.PostFilter, got.PostFilter)
	check("nominated", want.Nominated, got.Nominated)
	check("victims", want.Victims, got.Victims)
	check("reserve", want.Reserve, got.Reserve)
	check("devices", want.Devices, got.Devices)
	check("preenqueue", want.PreEnqueue, got.PreEnqueue)
	check("prebind-preflight", want.PreBindPreFlight, got.PreBindPreFlight)
	check("prebind", want.PreBind, got.PreBind)
	check("claims", want.Claims, got.Claims)
	return out
}

func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// podSummary prints what a pod asks of the scheduler, for a diff's reader.
func podSummary(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  labels %v, priority %d, nodeName %q\n", p.Labels, *p.Spec.Priority, p.Spec.NodeName)
	for _, c := range p.Spec.Containers {
		fmt.Fprintf(&b, "  container requests %v ports %v image %s\n", c.Resources.Requests, c.Ports, c.Image)
	}
	if len(p.Spec.NodeSelector) > 0 {
		fmt.Fprintf(&b, "  nodeSelector %v\n", p.Spec.NodeSelector)
	}
	if p.Spec.Affinity != nil {
		fmt.Fprintf(&b, "  affinity %v\n", p.Spec.Affinity)
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		fmt.Fprintf(&b, "  spread %v\n", c)
	}
	for _, t := range p.Spec.Tolerations {
		fmt.Fprintf(&b, "  toleration %v\n", t)
	}
	for _, v := range p.Spec.Volumes {
		fmt.Fprintf(&b, "  volume %s %+v\n", v.Name, v.VolumeSource)
	}
	for _, c := range p.Spec.ResourceClaims {
		fmt.Fprintf(&b, "  resource claim %s: %s%s\n", c.Name, ptr.Deref(c.ResourceClaimName, ""), ptr.Deref(c.ResourceClaimTemplateName, ""))
	}
	for _, c := range p.Status.ResourceClaimStatuses {
		fmt.Fprintf(&b, "  generated claim %s: %s\n", c.Name, ptr.Deref(c.ResourceClaimName, ""))
	}
	return b.String()
}
