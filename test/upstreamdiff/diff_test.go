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
	outcomes   map[string]int
	ties       int
	mismatches map[string]int
}

// TestUpstreamDiff schedules the pending pods of each random cluster one
// after the other with both frameworks and fails on the first pod whose
// results differ in any way the harness compares.
func TestUpstreamDiff(t *testing.T) {
	total := tally{outcomes: map[string]int{}, mismatches: map[string]int{}}
	for seed := *firstSeed; seed < *firstSeed+*seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runSeed(t, uint64(seed), &total)
		})
	}
	t.Logf("%d clusters of %d nodes, %d pods compared; kube-scheduler's outcomes: %v; preemptions between tied nodes: %d; pods with a mismatch by category: %v",
		*seeds, *numNodes, total.pods, total.outcomes, total.ties, total.mismatches)
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
	// Writes to claims awaitClaims saw, on both sides.
	claimWritesSeen := 0
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
		// Evictions start during the cycle: count deletions from before it.
		upBefore, oursBefore := len(up.deleted()), len(ours.deleted())
		want := up.cycle(ctx, pod, nodeNames)
		got := ours.cycle(ctx, pod, nodeNames)
		if want.Nominated != "" || got.Nominated != "" {
			want.Victims, got.Victims = awaitVictims(up, ours, upBefore, oursBefore)
		}
		if len(pod.Spec.ResourceClaims) > 0 || requestsExtendedResource(pod) {
			if err := awaitClaims(ctx, &claimWritesSeen, up, ours); err != nil {
				t.Fatal(err)
			}
			if node := pick(want.Totals); node != "" {
				assumed := pod.DeepCopy()
				assumed.Spec.NodeName = node
				if want.Reserve, want.Devices, err = up.reserve(ctx, assumed, node); err != nil {
					t.Fatal(err)
				}
				if got.Reserve, got.Devices, err = ours.reserve(ctx, assumed, node); err != nil {
					t.Fatal(err)
				}
			}
		}
		total.pods++
		total.outcomes[outcome(want)]++
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
		if node := pick(want.Totals); node != "" {
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
			// Let a straggler of either side arrive.
			time.Sleep(20 * time.Millisecond)
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
