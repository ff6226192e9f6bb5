package balancedallocation_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/balancedallocation"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

type res = map[v1.ResourceName]string

const gpu = "nvidia.com/gpu"

func newFramework(tb testing.TB, snapshot *st.Snapshot, args *configv1.NodeResourcesBalancedAllocationArgs, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(balancedallocation.Name, 1)), balancedallocation.Name, args)
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), profile, snapshot, opts...)
}

func node(name, cpu, memory string, extra res) *v1.Node {
	r := res{v1.ResourceCPU: cpu, v1.ResourceMemory: memory}
	for k, v := range extra {
		r[k] = v
	}
	return st.MakeNode().Name(name).Capacity(r).Obj()
}

func TestBalancedAllocation(t *testing.T) {
	withGPU := &configv1.NodeResourcesBalancedAllocationArgs{Resources: []configv1.ResourceSpec{{Name: "cpu"}, {Name: "memory"}, {Name: gpu}}}
	requested := func(name string) *v1.Pod {
		return st.MakePod().Name(name).Req(res{"cpu": "1000m", "memory": "2000"}).Req(res{"cpu": "2000m", "memory": "3000"}).Obj()
	}
	cpuOnly := func(name, nodeName string) *v1.Pod {
		return st.MakePod().Name(name).Node(nodeName).Req(res{"cpu": "1000m"}).Req(res{"cpu": "2000m"}).Obj()
	}
	tests := []struct {
		name     string
		args     *configv1.NodeResourcesBalancedAllocationArgs
		pod      *v1.Pod
		nodes    []*v1.Node
		existing []*v1.Pod
		want     map[string]int64
	}{
		{
			// Best-effort pods skip the plugin: no node is preferred.
			name:  "nothing requested skips scoring",
			pod:   st.MakePod().Name("p").Container("img").Obj(),
			nodes: []*v1.Node{node("node1", "4", "10000", nil), node("node2", "4", "10000", nil)},
			want:  map[string]int64{"node1": 0, "node2": 0},
		},
		{
			// node1: cpu 0→75%, memory 0→50%: balance 100→87 → 68.
			// node2: cpu 0→50%, memory 0→50%: balance 100→100 → 75.
			name:  "nothing scheduled, differently sized nodes",
			pod:   requested("p"),
			nodes: []*v1.Node{node("node1", "4", "10000", nil), node("node2", "6", "10000", nil)},
			want:  map[string]int64{"node1": 68, "node2": 75},
		},
		{
			name:     "pods scheduled with resources",
			pod:      requested("p"),
			nodes:    []*v1.Node{node("node1", "10", "20000", nil), node("node2", "10", "20000", nil)},
			existing: []*v1.Pod{cpuOnly("e1", "node1"), func() *v1.Pod { p := requested("e2"); p.Spec.NodeName = "node2"; return p }()},
			want:     map[string]int64{"node1": 73, "node2": 74},
		},
		{
			name:     "pods scheduled with resources, differently sized nodes",
			pod:      requested("p"),
			nodes:    []*v1.Node{node("node1", "10", "20000", nil), node("node2", "10", "50000", nil)},
			existing: []*v1.Pod{cpuOnly("e1", "node1"), func() *v1.Pod { p := requested("e2"); p.Spec.NodeName = "node2"; return p }()},
			want:     map[string]int64{"node1": 73, "node2": 70},
		},
		{
			// node1: cpu 100%→100%, memory 0→100%: balance 50→100 → 100.
			// node2: cpu 0→0, memory 0→100%: balance 100→50 → 50.
			name:     "min and max scores",
			pod:      st.MakePod().Name("p").Req(res{"memory": "2000"}).Req(res{"memory": "3000"}).Obj(),
			nodes:    []*v1.Node{node("node1", "3", "5000", nil), node("node2", "3", "5000", nil)},
			existing: []*v1.Pod{cpuOnly("e1", "node1")},
			want:     map[string]int64{"node1": 100, "node2": 50},
		},
		{
			name:     "requests at node capacity",
			pod:      st.MakePod().Name("p").Req(res{"cpu": "1000m"}).Req(res{"cpu": "2000m"}).Obj(),
			nodes:    []*v1.Node{node("node1", "6", "10000", nil), node("node2", "6", "10000", nil)},
			existing: []*v1.Pod{cpuOnly("e1", "node1"), func() *v1.Pod { p := requested("e2"); p.Spec.NodeName = "node2"; return p }()},
			want:     map[string]int64{"node1": 62, "node2": 62},
		},
		{
			// Three resources use the general standard deviation.
			name:  "a requested scalar resource is scored",
			args:  withGPU,
			pod:   st.MakePod().Name("p").Req(res{"cpu": "0", "memory": "0", gpu: "1"}).Obj(),
			nodes: []*v1.Node{node("node1", "3500m", "40000", res{gpu: "8"}), node("node2", "3500m", "40000", res{gpu: "8"})},
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("node1").Req(res{"cpu": "1000m", "memory": "2000"}).Req(res{"cpu": "2000m", "memory": "3000", gpu: "3"}).Obj(),
				st.MakePod().Name("e2").Node("node2").Req(res{"cpu": "1000m", "memory": "2000"}).Req(res{"cpu": "2000m", "memory": "3000"}).Obj(),
			},
			want: map[string]int64{"node1": 75, "node2": 76},
		},
		{
			name:  "a scalar resource the pod does not request is left out",
			args:  withGPU,
			pod:   requested("p"),
			nodes: []*v1.Node{node("node1", "3500m", "40000", res{gpu: "8"}), node("node2", "3500m", "40000", nil)},
			want:  map[string]int64{"node1": 56, "node2": 56},
		},
		{
			// Requests of running containers come from their status after an
			// in-place resize; the pending pod counts its spec.
			name:  "pod-level requests count",
			pod:   st.MakePod().Name("p").Req(res{"cpu": "1", "memory": "1000"}).PodLevelReq(res{"cpu": "3", "memory": "5000"}).Obj(),
			nodes: []*v1.Node{node("node1", "4", "10000", nil), node("node2", "6", "10000", nil)},
			want:  map[string]int64{"node1": 68, "node2": 75},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.existing, tt.nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot, tt.args), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBalancedAllocationArgs(t *testing.T) {
	tests := []struct {
		name string
		args *configv1.NodeResourcesBalancedAllocationArgs
		want string
	}{
		{name: "defaults", args: &configv1.NodeResourcesBalancedAllocationArgs{}},
		{name: "weights default to 1", args: &configv1.NodeResourcesBalancedAllocationArgs{Resources: []configv1.ResourceSpec{{Name: "cpu"}, {Name: gpu}}}},
		{
			name: "weight other than 1",
			args: &configv1.NodeResourcesBalancedAllocationArgs{Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 2}}},
			want: `PluginConfig plugin "NodeResourcesBalancedAllocation": invalid args: resources[0].weight: Invalid value: 2: must be 1`,
		},
		{
			name: "duplicate resource",
			args: &configv1.NodeResourcesBalancedAllocationArgs{Resources: []configv1.ResourceSpec{{Name: "cpu"}, {Name: "cpu"}}},
			want: `PluginConfig plugin "NodeResourcesBalancedAllocation": invalid args: resources[1].name: Duplicate value: "cpu"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(balancedallocation.Name, 0)), balancedallocation.Name, tt.args)
			fwk, err := st.BuildFramework(plugins.NewInTreeRegistry(), profile, nil)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				_ = fwk.Close()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkBalancedAllocation(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return node(fmt.Sprintf("node-%d", i), "32", "128Gi", nil)
	})
	var pods []*v1.Pod
	for i, n := range nodes {
		for j := range 10 {
			pods = append(pods, st.MakePod().Name(fmt.Sprintf("pod-%d-%d", i, j)).Node(n.Name).
				Req(res{"cpu": fmt.Sprintf("%dm", 500+100*(i%30)), "memory": fmt.Sprintf("%dGi", 1+j%4)}).Obj())
		}
	}
	snapshot := st.NewSnapshot(pods, nodes)
	fwk := newFramework(b, snapshot, nil, runtime.WithParallelism(1))
	b.Run("Score", func(b *testing.B) {
		st.BenchmarkScore(b, fwk, snapshot, st.MakePod().Name("p").Req(res{"cpu": "2", "memory": "4Gi"}).Obj())
	})
}
