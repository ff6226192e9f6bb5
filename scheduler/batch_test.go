package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// reserveRejecter rejects at Reserve the pods annotated rejectAnnotation
// (an annotation, so the pods still sign alike).
type reserveRejecter struct{}

const (
	reserveRejecterName = "ReserveRejecter"
	rejectAnnotation    = "test/reject-at-reserve"
)

func (reserveRejecter) Name() string { return reserveRejecterName }
func (reserveRejecter) Reserve(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) *framework.Status {
	if pod.Annotations[rejectAnnotation] != "" {
		return framework.NewStatus(framework.Unschedulable, "rejected at Reserve")
	}
	return nil
}
func (reserveRejecter) Unreserve(context.Context, *framework.CycleState, *v1.Pod, string) {}

// batchEnv is a scheduler, not started, serving one profile; its cycles
// are run one at a time through the queue, so each has its own
// scheduling cycle number as in the loop. Assumed pods stay assumed: the
// next cycle sees the room they took.
type batchEnv struct {
	t    *testing.T
	ctx  context.Context
	s    *Scheduler
	reg  *prometheus.Registry
	name string
	// full is an instance of the same profile that never batches, for
	// bestNodes.
	full framework.Framework
	// pods counts the pods made by pod, for their names.
	pods int
}

const batchProfile = "batch"

// noSpreadProfile is the default profile without PodTopologySpread: its
// system default constraints leave no pod signable (see TestSignPodDefaultProfile),
// so this is the closest profile to the default that upstream batches in.
func noSpreadProfile() *configv1.KubeSchedulerProfile {
	return &configv1.KubeSchedulerProfile{
		SchedulerName: ptr.To(batchProfile),
		Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
			Enabled:  []configv1.Plugin{{Name: reserveRejecterName}},
			Disabled: []configv1.Plugin{{Name: "PodTopologySpread"}},
		}},
	}
}

func newBatchEnv(t *testing.T, profile *configv1.KubeSchedulerProfile, nodes []*v1.Node, opts ...Option) *batchEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := plugins.NewInTreeRegistry()
	if err := r.Register(reserveRejecterName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return reserveRejecter{}, nil
	}, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, fake.NewClientset(), r, append([]Option{WithDefaultPlugins(plugins.DefaultPlugins()), WithMetrics(m)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		s.cache.AddNode(s.logger, n)
	}
	e := &batchEnv{t: t, ctx: ctx, s: s, reg: reg, name: *profile.SchedulerName}
	e.publish(profile)
	e.full, err = profilebuild.Builder(s)(ctx, profile, runtime.WithOpportunisticBatching(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.full.Close() })
	return e
}

// publish builds a new instance of profile and makes it serve, replacing
// the current one of its schedulerName.
func (e *batchEnv) publish(profile *configv1.KubeSchedulerProfile) {
	e.t.Helper()
	fwk, err := profilebuild.Builder(e.s)(e.ctx, profile)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = fwk.Close() })
	e.s.Profiles().Publish(*profile.SchedulerName, fwk)
}

// schedule runs one scheduling cycle for pod and returns the node it was
// assumed on, or "" when the cycle failed.
func (e *batchEnv) schedule(pod *v1.Pod) string {
	e.t.Helper()
	e.s.queue.Add(e.s.logger, pod)
	entity, err := e.s.queue.Pop(e.s.logger)
	if err != nil {
		e.t.Fatal(err)
	}
	pi := entity.(*framework.QueuedPodInfo)
	defer e.s.queue.Done(pi.Pod.UID)
	state := framework.NewCycleState()
	podsToActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, podsToActivate)
	result, _, status := e.s.schedulingCycle(e.ctx, state, e.s.Profiles().Get(pi.Pod.Spec.SchedulerName), pi, podsToActivate)
	if !status.IsSuccess() {
		return ""
	}
	return result.SuggestedHost
}

// batchSeries returns the batch counters of the profile, without the
// profile label.
func (e *batchEnv) batchSeries() []string {
	e.t.Helper()
	var out []string
	label := "profile=" + e.name + ","
	for _, s := range series(e.t, e.reg, "scheduler_batch_attempts_total", "scheduler_batch_cache_flushed_total") {
		if strings.Contains(s, label) {
			out = append(out, strings.Replace(s, label, "", 1))
		}
	}
	return out
}

// batchNodes are nodes of different sizes, so that scores rarely tie.
func batchNodes(n int) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		nodes[i] = st.MakeNode().Name(fmt.Sprintf("node-%02d", i)).Label(v1.LabelHostname, fmt.Sprintf("node-%02d", i)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprint(4 + 3*i), v1.ResourceMemory: fmt.Sprintf("%dGi", 64-(7*i)%23), v1.ResourcePods: "110"}).Obj()
	}
	return nodes
}

// pod is one of a run of identical pods: only name and UID differ.
func (e *batchEnv) pod() *st.PodWrapper {
	e.pods++
	name := fmt.Sprint("pod-", e.pods)
	return st.MakePod().Name(name).UID(name).SchedulerName(batchProfile).Label("app", "web").Container("nginx").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"})
}

// bestNodes returns the nodes a full search (every node filtered and
// scored, no batch) ranks first for pod in the current cluster state:
// without batching the pod goes to one of them, the tie broken by the
// order the search found them in.
func (e *batchEnv) bestNodes(pod *v1.Pod) []string {
	e.t.Helper()
	if err := e.s.cache.UpdateSnapshot(e.s.logger, e.s.picker.snapshot); err != nil {
		e.t.Fatal(err)
	}
	res := st.RunCycle(e.ctx, e.full, e.s.picker.snapshot, pod)
	if res.Err != nil {
		e.t.Fatal(res.Err)
	}
	var best []string
	top := int64(-1)
	for name, score := range res.Scores {
		switch {
		case score > top:
			top, best = score, []string{name}
		case score == top:
			best = append(best, name)
		}
	}
	slices.Sort(best)
	return best
}

// TestBatchingPlacesAsWithout: in a profile where upstream batches, every
// pod of a run of identical pods goes to a node a full search ranks
// first, while all but the first use the previous cycle's results. One
// pod of the run is rejected at Reserve: its node was stored as chosen,
// so the next pod filters and re-scores it, as upstream, rather than
// dropping the batch.
func TestBatchingPlacesAsWithout(t *testing.T) {
	e := newBatchEnv(t, noSpreadProfile(), batchNodes(12))
	for i := range 40 {
		pod := e.pod().Obj()
		if i == 20 {
			pod.Annotations = map[string]string{rejectAnnotation: "true"}
		}
		best := e.bestNodes(pod)
		got := e.schedule(pod)
		switch {
		case i == 20 && got != "":
			t.Errorf("pod %d, rejected at Reserve, was placed on %s", i, got)
		case i != 20 && !slices.Contains(best, got):
			t.Errorf("pod %d went to %q, a full search ranks %v first", i, got, best)
		}
	}
	if diff := cmp.Diff([]string{
		"scheduler_batch_attempts_total{result=hint_used} 39",
		"scheduler_batch_attempts_total{result=no_hint} 1",
	}, e.batchSeries()); diff != "" {
		t.Errorf("batch metrics (-want +got):\n%s", diff)
	}
}

// TestBatchingOff: with the gate off nothing is signed or counted.
func TestBatchingOff(t *testing.T) {
	e := newBatchEnv(t, noSpreadProfile(), batchNodes(4), WithOpportunisticBatching(false))
	for range 3 {
		if e.schedule(e.pod().Obj()) == "" {
			t.Fatal("pod not placed")
		}
	}
	if got := e.batchSeries(); len(got) != 0 {
		t.Errorf("batching turned off still counted: %v", got)
	}
}

// TestBatchInvalidation checks each of upstream's reasons not to use the
// previous cycle's results: pod A is placed and its results kept, then
// the cluster, the loop or pod B differs from what the results assumed.
// B must then be placed by a search of its own (a node a full search
// ranks first) and the reason counted as upstream counts it.
func TestBatchInvalidation(t *testing.T) {
	tests := []struct {
		name string
		// between runs after A, given A's node; it may return B instead
		// of the plain identical pod.
		between func(e *batchEnv, nodeA string) *v1.Pod
		// wantNode, if set, is where B must go instead of a best node.
		wantNode string
		want     []string
	}{
		{
			name: "identical pod uses the hint",
			want: []string{
				"scheduler_batch_attempts_total{result=hint_used} 1",
				"scheduler_batch_attempts_total{result=no_hint} 1",
			},
		},
		{
			name:     "a nominated pod bypasses the batch and tries its nominated node",
			between:  func(e *batchEnv, _ string) *v1.Pod { return e.pod().NominatedNodeName("node-00").Obj() },
			wantNode: "node-00",
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 2",
				// B passed its nominated node alone: no other node is kept.
				"scheduler_batch_cache_flushed_total{reason=empty_list} 1",
				"scheduler_batch_cache_flushed_total{reason=pod_nominated} 1",
			},
		},
		{
			name:    "a pod with another signature",
			between: func(e *batchEnv, _ string) *v1.Pod { return e.pod().Label("app", "db").Obj() },
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 2",
				"scheduler_batch_cache_flushed_total{reason=pod_incompatible} 1",
			},
		},
		{
			name: "a pod that failed in between",
			between: func(e *batchEnv, _ string) *v1.Pod {
				if node := e.schedule(e.pod().Req(map[v1.ResourceName]string{v1.ResourceCPU: "1000"}).Obj()); node != "" {
					e.t.Fatalf("pod too large for any node placed on %s", node)
				}
				return nil
			},
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 3",
				"scheduler_batch_cache_flushed_total{reason=pod_incompatible} 1",
				"scheduler_batch_cache_flushed_total{reason=pod_skipped} 1",
			},
		},
		{
			name: "another profile's pod in between",
			between: func(e *batchEnv, _ string) *v1.Pod {
				other := noSpreadProfile()
				other.SchedulerName = ptr.To("other")
				e.publish(other)
				if e.schedule(e.pod().SchedulerName("other").Obj()) == "" {
					e.t.Fatal("other profile's pod not placed")
				}
				return nil
			},
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 2",
				"scheduler_batch_cache_flushed_total{reason=pod_skipped} 1",
			},
		},
		{
			name: "a kept node was removed",
			between: func(e *batchEnv, nodeA string) *v1.Pod {
				gone := "node-00"
				if nodeA == gone {
					gone = "node-01"
				}
				if err := e.s.cache.RemoveNode(e.s.logger, st.MakeNode().Name(gone).Obj()); err != nil {
					e.t.Fatal(err)
				}
				return nil
			},
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 2",
				"scheduler_batch_cache_flushed_total{reason=node_missing} 1",
			},
		},
		{
			name: "the results expired",
			between: func(*batchEnv, string) *v1.Pod {
				time.Sleep(600 * time.Millisecond)
				return nil
			},
			want: []string{
				"scheduler_batch_attempts_total{result=no_hint} 2",
				"scheduler_batch_cache_flushed_total{reason=expired} 1",
			},
		},
		{
			name: "the profile's instance was replaced",
			between: func(e *batchEnv, _ string) *v1.Pod {
				e.publish(noSpreadProfile())
				return nil
			},
			want: []string{"scheduler_batch_attempts_total{result=no_hint} 2"},
		},
		{
			name: "nodes filled between cycles: the hint fails Filter and B searches",
			between: func(e *batchEnv, _ string) *v1.Pod {
				for i := 1; i < 8; i++ {
					node := fmt.Sprintf("node-%02d", i)
					filler := st.MakePod().Name("filler-" + node).UID("filler-" + node).Node(node).
						Req(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprint(4 + 3*i)}).Obj()
					if err := e.s.cache.AddPod(e.s.logger, filler); err != nil {
						e.t.Fatal(err)
					}
				}
				return nil
			},
			wantNode: "node-00",
			want: []string{
				"scheduler_batch_attempts_total{result=hint_not_used} 1",
				"scheduler_batch_attempts_total{result=no_hint} 1",
				"scheduler_batch_cache_flushed_total{reason=empty_list} 1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newBatchEnv(t, noSpreadProfile(), batchNodes(8))
			nodeA := e.schedule(e.pod().Obj())
			if nodeA == "" {
				t.Fatal("pod A not placed")
			}
			var b *v1.Pod
			if tt.between != nil {
				b = tt.between(e, nodeA)
			}
			if b == nil {
				b = e.pod().Obj()
			}
			best := []string{tt.wantNode}
			if tt.wantNode == "" {
				best = e.bestNodes(b)
			}
			if got := e.schedule(b); !slices.Contains(best, got) {
				t.Errorf("pod B went to %q, want one of %v", got, best)
			}
			if diff := cmp.Diff(tt.want, e.batchSeries()); diff != "" {
				t.Errorf("batch metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBatchPercentageOfNodesToScore: a pod that takes the hint is not
// searched for, so the search window does not move, as upstream; it goes
// to a node of the previous pod's window, where a search of its own would
// have looked at the next window.
func TestBatchPercentageOfNodesToScore(t *testing.T) {
	profile := noSpreadProfile()
	profile.PercentageOfNodesToScore = ptr.To[int32](50)
	e := newBatchEnv(t, profile, batchNodes(200), WithParallelism(1))
	if e.schedule(e.pod().Obj()) == "" {
		t.Fatal("pod A not placed")
	}
	if e.s.picker.nextStartNodeIndex != 100 {
		t.Fatalf("after a search of half of 200 nodes the next starts at %d, want 100", e.s.picker.nextStartNodeIndex)
	}
	nodeB := e.schedule(e.pod().Obj())
	var index int
	if _, err := fmt.Sscanf(nodeB, "node-%d", &index); err != nil || index >= 100 {
		t.Errorf("pod B went to %q, want a node of the first window (node-00 to node-99)", nodeB)
	}
	if e.s.picker.nextStartNodeIndex != 100 {
		t.Errorf("a hinted pod moved the next search's start to %d, want 100", e.s.picker.nextStartNodeIndex)
	}
	if diff := cmp.Diff([]string{
		"scheduler_batch_attempts_total{result=hint_used} 1",
		"scheduler_batch_attempts_total{result=no_hint} 1",
	}, e.batchSeries()); diff != "" {
		t.Errorf("batch metrics (-want +got):\n%s", diff)
	}
}

// TestSearchStartAfterRejectedNominatedNode: a nominated node that fails
// Filter moves the next search's start one node further than the search
// itself, as upstream counts it among the nodes with a status.
func TestSearchStartAfterRejectedNominatedNode(t *testing.T) {
	profile := noSpreadProfile()
	profile.PercentageOfNodesToScore = ptr.To[int32](50)
	e := newBatchEnv(t, profile, batchNodes(200), WithParallelism(1))
	full := st.MakePod().Name("filler").UID("filler").Node("node-150").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprint(4 + 3*150)}).Obj()
	if err := e.s.cache.AddPod(e.s.logger, full); err != nil {
		t.Fatal(err)
	}
	if e.schedule(e.pod().NominatedNodeName("node-150").Obj()) == "" {
		t.Fatal("pod not placed")
	}
	if e.s.picker.nextStartNodeIndex != 101 {
		t.Errorf("after node-150 was rejected and a search of half of 200 nodes the next starts at %d, want 101", e.s.picker.nextStartNodeIndex)
	}
}

// TestSearchWithoutScoring: a profile that scores nothing (no Score
// plugins, no extenders) stops its search at the first feasible node, as
// upstream: every node would score the same.
func TestSearchWithoutScoring(t *testing.T) {
	profile := noSpreadProfile()
	profile.Plugins.Score.Disabled = []configv1.Plugin{{Name: "*"}}
	e := newBatchEnv(t, profile, batchNodes(200), WithParallelism(1))
	if e.schedule(e.pod().Obj()) == "" {
		t.Fatal("pod not placed")
	}
	if e.s.picker.nextStartNodeIndex != 1 {
		t.Errorf("the next search starts at %d, want 1: the first node fits", e.s.picker.nextStartNodeIndex)
	}
}

// TestBatchingInPodGroupCycle: the pods of a group share their pod-group
// cycle's number; as upstream with GenericWorkload on, each identical pod
// after the first takes the hint the one before it left, instead of
// finding the results unusable because no cycle went by.
func TestBatchingInPodGroupCycle(t *testing.T) {
	var objs []k8sruntime.Object
	for _, n := range batchNodes(8) {
		objs = append(objs, n)
	}
	cs := fake.NewClientset(objs...)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, cs, plugins.NewInTreeRegistry(), WithDefaultPlugins(plugins.DefaultPlugins()), WithMetrics(m), WithWorkloadGates(true, false))
	if err != nil {
		t.Fatal(err)
	}
	profile := &configv1.KubeSchedulerProfile{
		SchedulerName: ptr.To(batchProfile),
		Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
			Enabled:  []configv1.Plugin{{Name: "GangScheduling"}},
			Disabled: []configv1.Plugin{{Name: "PodTopologySpread"}},
		}},
	}
	fwk, err := profilebuild.Builder(s)(ctx, profile, runtime.WithWorkloadGates(s.WorkloadGates()))
	if err != nil {
		t.Fatal(err)
	}
	if !fwk.WorkloadAware() {
		t.Fatal("the profile is not workload-aware")
	}
	if err := s.StartPodGroupInformer(ctx); err != nil {
		t.Fatal(err)
	}
	s.Profiles().Publish(batchProfile, fwk)
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		if err := fwk.Close(); err != nil {
			t.Errorf("closing the instance: %v", err)
		}
	})
	poll(t, "the pod group informer to watch", func() bool { return watching(cs, "podgroups") })

	names := []string{"p0", "p1", "p2", "p3"}
	group := []k8sruntime.Object{st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name("pg").MinCount(4).Obj()}
	for _, n := range names {
		group = append(group, st.MakePod().Namespace(metav1.NamespaceDefault).Name(n).UID(n).SchedulerName(batchProfile).PodGroupName("pg").
			Label("app", "web").Container("nginx").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj())
	}
	createAll(t, cs, group...)
	poll(t, "the group to be bound", func() bool { return !slices.Contains(slices.Collect(maps.Values(boundNodes(cs, names...))), "") })
	var got []string
	for _, s := range series(t, reg, "scheduler_batch_attempts_total", "scheduler_batch_cache_flushed_total") {
		if strings.Contains(s, "profile="+batchProfile+",") {
			got = append(got, strings.Replace(s, "profile="+batchProfile+",", "", 1))
		}
	}
	if diff := cmp.Diff([]string{
		"scheduler_batch_attempts_total{result=hint_used} 3",
		"scheduler_batch_attempts_total{result=no_hint} 1",
	}, got); diff != "" {
		t.Errorf("batch metrics (-want +got):\n%s", diff)
	}
}
