package noderesources_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/noderesources"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const extended = "example.com/aaa"

func newFramework(tb testing.TB, snapshot *st.Snapshot, args *configv1.NodeResourcesFitArgs, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(noderesources.Name, 1)), noderesources.Name, args)
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), profile, snapshot, opts...)
}

type res = map[v1.ResourceName]string

func TestFitFilter(t *testing.T) {
	status := func(code framework.Code, reasons ...string) *framework.Status {
		return framework.NewStatus(code, reasons...).WithPlugin(noderesources.Name)
	}
	node := st.MakeNode().Name("n").Capacity(res{
		v1.ResourceCPU: "10", v1.ResourceMemory: "20", v1.ResourcePods: "32", extended: "5",
		"hugepages-2Mi": "5Mi", v1.ResourceEphemeralStorage: "5",
	}).Obj()
	tests := []struct {
		name     string
		pod      *v1.Pod
		used     res
		podsFull bool
		args     *configv1.NodeResourcesFitArgs
		want     *framework.Status
	}{
		{
			name: "a pod requesting nothing fits a full node",
			pod:  st.MakePod().Name("p").Container("img").Obj(),
			used: res{v1.ResourceCPU: "10", v1.ResourceMemory: "20"},
		},
		{
			name: "every short resource is a reason",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1", v1.ResourceMemory: "1"}).Obj(),
			used: res{v1.ResourceCPU: "10", v1.ResourceMemory: "20"},
			want: status(framework.Unschedulable, "Insufficient cpu", "Insufficient memory"),
		},
		{
			name: "fits exactly",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "1"}).Obj(),
			used: res{v1.ResourceCPU: "8", v1.ResourceMemory: "19"},
		},
		{
			name: "the largest init container counts",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).InitReq(res{v1.ResourceCPU: "3"}).Obj(),
			used: res{v1.ResourceCPU: "8"},
			want: status(framework.Unschedulable, "Insufficient cpu"),
		},
		{
			name: "init containers below the containers do not count",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2"}).InitReq(res{v1.ResourceCPU: "1"}).Obj(),
			used: res{v1.ResourceCPU: "8"},
		},
		{
			name: "sidecars add to the containers",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).SidecarReq(res{v1.ResourceCPU: "2"}).Obj(),
			used: res{v1.ResourceCPU: "8"},
			want: status(framework.Unschedulable, "Insufficient cpu"),
		},
		{
			name: "an init container after a sidecar runs beside it",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).SidecarReq(res{v1.ResourceCPU: "1"}).InitReq(res{v1.ResourceCPU: "3"}).Obj(),
			used: res{v1.ResourceCPU: "7"},
			want: status(framework.Unschedulable, "Insufficient cpu"),
		},
		{
			name: "an init container before a sidecar runs alone",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).InitReq(res{v1.ResourceCPU: "3"}).SidecarReq(res{v1.ResourceCPU: "1"}).Obj(),
			used: res{v1.ResourceCPU: "7"},
		},
		{
			name: "overhead counts",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).Overhead(res{v1.ResourceCPU: "2"}).Obj(),
			used: res{v1.ResourceCPU: "8"},
			want: status(framework.Unschedulable, "Insufficient cpu"),
		},
		{
			name: "pod-level requests replace the containers' sum",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "3"}).PodLevelReq(res{v1.ResourceCPU: "4"}).Obj(),
			used: res{v1.ResourceCPU: "7"},
			want: status(framework.Unschedulable, "Insufficient cpu"),
		},
		{
			name: "pod-level requests below the free room",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).PodLevelReq(res{v1.ResourceCPU: "3"}).Obj(),
			used: res{v1.ResourceCPU: "7"},
		},
		{
			name: "more than the node has is unresolvable",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "11", v1.ResourceMemory: "1"}).Obj(),
			used: res{v1.ResourceMemory: "20"},
			want: status(framework.UnschedulableAndUnresolvable, "Insufficient cpu", "Insufficient memory"),
		},
		{
			name:     "too many pods",
			pod:      st.MakePod().Name("p").Req(res{v1.ResourceCPU: "11"}).Obj(),
			podsFull: true,
			want:     status(framework.UnschedulableAndUnresolvable, "Too many pods", "Insufficient cpu"),
		},
		{
			name:     "too many pods alone is resolvable",
			pod:      st.MakePod().Name("p").Obj(),
			podsFull: true,
			want:     status(framework.Unschedulable, "Too many pods"),
		},
		{
			name: "extended resource",
			pod:  st.MakePod().Name("p").Req(res{extended: "3"}).Obj(),
			used: res{extended: "3"},
			want: status(framework.Unschedulable, "Insufficient example.com/aaa"),
		},
		{
			// Upstream 1.37 added a "request > 0" guard here, which only
			// matters behind InPlacePodVerticalScalingSchedulerPreemption
			// (alpha, off): a zero request already passed in 1.36.
			name: "a zero extended request fits an overcommitted node",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1", extended: "0"}).Obj(),
			used: res{extended: "6"},
		},
		{
			name: "extended resource the node does not have",
			pod:  st.MakePod().Name("p").Req(res{"example.com/bbb": "1"}).Obj(),
			want: status(framework.UnschedulableAndUnresolvable, "Insufficient example.com/bbb"),
		},
		{
			name: "ignored resource",
			pod:  st.MakePod().Name("p").Req(res{"example.com/bbb": "1"}).Obj(),
			args: &configv1.NodeResourcesFitArgs{IgnoredResources: []string{"example.com/bbb"}},
		},
		{
			name: "ignored resource group",
			pod:  st.MakePod().Name("p").Req(res{"example.com/bbb": "1", extended: "9"}).Obj(),
			args: &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"example.com"}},
		},
		{
			name: "ignoring a group leaves other groups checked",
			pod:  st.MakePod().Name("p").Req(res{"example.com/bbb": "1", "other.io/ccc": "1"}).Obj(),
			args: &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"example.com"}},
			want: status(framework.UnschedulableAndUnresolvable, "Insufficient other.io/ccc"),
		},
		{
			name: "hugepages",
			pod:  st.MakePod().Name("p").Req(res{"hugepages-2Mi": "4Mi"}).Obj(),
			used: res{"hugepages-2Mi": "2Mi"},
			want: status(framework.Unschedulable, "Insufficient hugepages-2Mi"),
		},
		{
			name: "ephemeral storage",
			pod:  st.MakePod().Name("p").Req(res{v1.ResourceEphemeralStorage: "6"}).Obj(),
			want: status(framework.UnschedulableAndUnresolvable, "Insufficient ephemeral-storage"),
		},
		{
			name: "scalar reasons sorted by name",
			pod:  st.MakePod().Name("p").Req(res{"z.io/z": "1", "a.io/a": "1", extended: "6"}).Obj(),
			want: status(framework.UnschedulableAndUnresolvable, "Insufficient a.io/a", "Insufficient example.com/aaa", "Insufficient z.io/z"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node
			var pods []*v1.Pod
			if tt.used != nil {
				pods = append(pods, st.MakePod().Name("existing").Node("n").Req(tt.used).Obj())
			}
			if tt.podsFull {
				n = node.DeepCopy()
				n.Status.Allocatable[v1.ResourcePods] = st.ResourceList(res{v1.ResourcePods: "1"})[v1.ResourcePods]
				pods = append(pods, st.MakePod().Name("other").Node("n").Obj())
			}
			snapshot := st.NewSnapshot(pods, []*v1.Node{n})
			got := st.RunCycle(t.Context(), newFramework(t, snapshot, tt.args), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(map[string]*framework.Status{"n": tt.want}, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitMessage(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("small").Capacity(res{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj(),
		st.MakeNode().Name("busy").Capacity(res{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi"}).Obj(),
		st.MakeNode().Name("full").Capacity(res{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "1"}).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("a").Node("busy").Req(res{v1.ResourceCPU: "3"}).Obj(),
		st.MakePod().Name("b").Node("full").Obj(),
	}
	snapshot := st.NewSnapshot(pods, nodes)
	got := st.RunCycle(t.Context(), newFramework(t, snapshot, nil), snapshot, st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "2Gi"}).Obj())
	// Reasons are counted per node and sorted as text, as upstream does.
	want := "0/3 nodes are available: 1 Insufficient memory, 1 Too many pods, 2 Insufficient cpu."
	if diff := cmp.Diff(want, got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestFitScore(t *testing.T) {
	defaultResources := []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}
	shape := []configv1.UtilizationShapePoint{{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}}
	strategy := func(typ configv1.ScoringStrategyType, resources []configv1.ResourceSpec) *configv1.NodeResourcesFitArgs {
		args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: typ, Resources: resources}}
		if typ == configv1.RequestedToCapacityRatio {
			args.ScoringStrategy.RequestedToCapacityRatio = &configv1.RequestedToCapacityRatioParam{Shape: shape}
		}
		return args
	}
	twoContainers := st.MakePod().Name("p").Req(res{"cpu": "1000", "memory": "2000"}).Req(res{"cpu": "2000", "memory": "3000"}).Obj()
	tests := []struct {
		name     string
		args     *configv1.NodeResourcesFitArgs
		pod      *v1.Pod
		nodes    []*v1.Node
		existing []*v1.Pod
		want     map[string]int64
	}{
		{
			// Defaults are LeastAllocated over cpu and memory.
			name: "default strategy, nothing scheduled, nothing requested",
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 100, "node2": 100},
		},
		{
			// cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 → 37;
			// cpu (6000-3000)*100/6000 = 50, memory 50 → 50.
			name: "least allocated, differently sized nodes",
			args: strategy(configv1.LeastAllocated, defaultResources),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 37, "node2": 50},
		},
		{
			name: "least allocated, pods scheduled with resources",
			args: strategy(configv1.LeastAllocated, defaultResources),
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "10000", "memory": "20000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "10000", "memory": "20000"}).Obj(),
			},
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("node1").Req(res{"cpu": "3000", "memory": "0"}).Obj(),
				st.MakePod().Name("e2").Node("node1").Req(res{"cpu": "3000", "memory": "0"}).Obj(),
				st.MakePod().Name("e3").Node("node2").Req(res{"cpu": "3000", "memory": "0"}).Obj(),
				st.MakePod().Name("e4").Node("node2").Req(res{"cpu": "3000", "memory": "5000"}).Obj(),
			},
			want: map[string]int64{"node1": 70, "node2": 57},
		},
		{
			name: "least allocated, resources requested and scheduled, differently sized nodes",
			args: strategy(configv1.LeastAllocated, defaultResources),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "10000", "memory": "20000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "10000", "memory": "50000"}).Obj(),
			},
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("node1").Req(res{"cpu": "3000", "memory": "0"}).Obj(),
				st.MakePod().Name("e2").Node("node2").Req(res{"cpu": "3000", "memory": "5000"}).Obj(),
			},
			want: map[string]int64{"node1": 57, "node2": 60},
		},
		{
			// A container without requests counts 100m cpu and 200Mi memory:
			// cpu (250-100)*100/250 = 60; memory (1000Mi-200Mi)*100/1000Mi = 80 → 70.
			name: "least allocated counts default requests for containers without any",
			args: strategy(configv1.LeastAllocated, defaultResources),
			pod:  st.MakePod().Name("p").Container("img").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "250m", "memory": "1000Mi"}).Obj(),
			},
			want: map[string]int64{"node1": 70},
		},
		{
			name: "most allocated, nothing scheduled, nothing requested",
			args: strategy(configv1.MostAllocated, defaultResources),
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 0, "node2": 0},
		},
		{
			// cpu 3000*100/4000 = 75, memory 5000*100/10000 = 50 → 62; cpu 50, memory 50 → 50.
			name: "most allocated, differently sized nodes",
			args: strategy(configv1.MostAllocated, defaultResources),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 62, "node2": 50},
		},
		{
			name: "most allocated, requests equal to node capacity",
			args: strategy(configv1.MostAllocated, defaultResources),
			pod:  st.MakePod().Name("p").Req(res{"cpu": "2000", "memory": "4000"}).Req(res{"cpu": "3000", "memory": "5000"}).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "5000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "10000", "memory": "9000"}).Obj(),
			},
			// node2 memory 9000 < 9000 requested? 4000+5000 = 9000: fits exactly.
			want: map[string]int64{"node1": 95, "node2": 75},
		},
		{
			// memory weight 2: (75*1 + 50*2)/3 = 58 on node1, 50 on node2.
			name: "most allocated with resource weights",
			args: strategy(configv1.MostAllocated, []configv1.ResourceSpec{{Name: "memory", Weight: 2}, {Name: "cpu", Weight: 1}}),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 58, "node2": 50},
		},
		{
			// Defaults exceed the node (250m > 100m... capped at capacity).
			name: "most allocated caps default requests at capacity",
			args: strategy(configv1.MostAllocated, defaultResources),
			pod:  st.MakePod().Name("p").Container("img").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "250m", "memory": "1000Mi"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "250m", "memory": "1000Mi"}).Obj(),
			},
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("node2").Container("img").Container("img").Obj(),
			},
			// node1: cpu 100*100/250 = 40, memory 200*100/1000 = 20 → 30;
			// node2: cpu 300 capped 250 → 100, memory 600*100/1000 = 60 → 80.
			want: map[string]int64{"node1": 30, "node2": 80},
		},
		{
			name: "extended resources the pod does not request are left out",
			args: strategy(configv1.MostAllocated, []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: extended, Weight: 2}}),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000", extended: "4"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 62, "node2": 50},
		},
		{
			// node1 extended 2/4 = 50 weighted 2 → (75+50+100)/4 = 56; node2 has none → (50+50)/2.
			name: "requested extended resources are weighted in",
			args: strategy(configv1.MostAllocated, []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: extended, Weight: 2}}),
			pod:  st.MakePod().Name("p").Req(res{"cpu": "3000", "memory": "5000", extended: "2"}).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000", extended: "4"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000", extended: "2"}).Obj(),
			},
			want: map[string]int64{"node1": 56, "node2": 75},
		},
		{
			name: "requested to capacity ratio, nothing requested",
			args: strategy(configv1.RequestedToCapacityRatio, defaultResources),
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
			},
			existing: []*v1.Pod{st.MakePod().Name("e1").Node("node1").Obj(), st.MakePod().Name("e2").Node("node1").Obj()},
			want:     map[string]int64{"node1": 100, "node2": 100},
		},
		{
			// Utilization 75% and 50% → shape scores 25 and 50 → round(37.5) = 38.
			name: "requested to capacity ratio rounds like upstream",
			args: strategy(configv1.RequestedToCapacityRatio, defaultResources),
			pod:  twoContainers,
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4000", "memory": "10000"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "6000", "memory": "10000"}).Obj(),
			},
			want: map[string]int64{"node1": 38, "node2": 50},
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

func TestFitRequestedToCapacityRatioShapes(t *testing.T) {
	// Bin packing on an extended resource, after upstream's examples: the
	// shape {0: 0, 100: 10} favours fuller nodes.
	binPacking := []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}
	tests := []struct {
		name      string
		shape     []configv1.UtilizationShapePoint
		resources []configv1.ResourceSpec
		pod       *v1.Pod
		nodes     []*v1.Node
		existing  []*v1.Pod
		want      map[string]int64
	}{
		{
			name:      "bin packing an extended resource",
			shape:     binPacking,
			resources: []configv1.ResourceSpec{{Name: extended, Weight: 1}},
			pod:       st.MakePod().Name("p").Req(res{extended: "2"}).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4", "memory": "1Gi", extended: "4"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "4", "memory": "1Gi", extended: "8"}).Obj(),
			},
			existing: []*v1.Pod{st.MakePod().Name("e").Node("node2").Req(res{extended: "2"}).Obj()},
			// node1 2/4 = 50% → 50; node2 4/8 = 50% → 50.
			want: map[string]int64{"node1": 50, "node2": 50},
		},
		{
			name:      "weights and a multi-point shape",
			shape:     []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 30, Score: 6}, {Utilization: 60, Score: 9}, {Utilization: 100, Score: 10}},
			resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 3}, {Name: extended, Weight: 5}},
			pod:       st.MakePod().Name("p").Req(res{"cpu": "1", extended: "1"}).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("node1").Capacity(res{"cpu": "4", "memory": "1Gi", extended: "10"}).Obj(),
				st.MakeNode().Name("node2").Capacity(res{"cpu": "10", "memory": "1Gi", extended: "2"}).Obj(),
			},
			// node1: cpu 25% → 0+(60-0)*25/30 = 50; extended 10% → 60*10/30 = 20;
			//        (50*3 + 20*5)/8 = 31.25 → 31.
			// node2: cpu 10% → 20; extended 50% → 60+(90-60)*(50-30)/30 = 80;
			//        (20*3 + 80*5)/8 = 57.5 → 58.
			want: map[string]int64{"node1": 31, "node2": 58},
		},
		{
			name:      "a resource rated 0 does not dilute the others",
			shape:     binPacking,
			resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
			pod:       st.MakePod().Name("p").Req(res{"cpu": "2", "memory": "0"}).Obj(),
			nodes:     []*v1.Node{st.MakeNode().Name("node1").Capacity(res{"cpu": "4", "memory": "1Gi"}).Obj()},
			want:      map[string]int64{"node1": 50},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{
				Type: configv1.RequestedToCapacityRatio, Resources: tt.resources,
				RequestedToCapacityRatio: &configv1.RequestedToCapacityRatioParam{Shape: tt.shape},
			}}
			snapshot := st.NewSnapshot(tt.existing, tt.nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot, args), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitArgs(t *testing.T) {
	shape := func(points ...int32) *configv1.RequestedToCapacityRatioParam {
		p := &configv1.RequestedToCapacityRatioParam{}
		for i := 0; i+1 < len(points); i += 2 {
			p.Shape = append(p.Shape, configv1.UtilizationShapePoint{Utilization: points[i], Score: points[i+1]})
		}
		return p
	}
	tests := []struct {
		name string
		args *configv1.NodeResourcesFitArgs
		want string
	}{
		{name: "defaults", args: &configv1.NodeResourcesFitArgs{}},
		{
			name: "ignored resource is not a label name",
			args: &configv1.NodeResourcesFitArgs{IgnoredResources: []string{"example.com/a/b"}},
			want: `invalid args: ignoredResources[0]: Invalid value: "example.com/a/b": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
		},
		{
			name: "ignored group with a slash",
			args: &configv1.NodeResourcesFitArgs{IgnoredResourceGroups: []string{"example.com/"}},
			want: `invalid args: [ignoredResourceGroups[0]: Invalid value: "example.com/": resource group name can't contain '/', ignoredResourceGroups[0]: Invalid value: "example.com/": name part must be non-empty, ignoredResourceGroups[0]: Invalid value: "example.com/": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]`,
		},
		{
			name: "unknown strategy",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: "Balanced"}},
			want: `invalid args: scoringStrategy.type: Unsupported value: "Balanced": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"`,
		},
		{
			name: "weight above 100",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.MostAllocated, Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 101}}}},
			want: `invalid args: scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]`,
		},
		{
			name: "negative weight",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.MostAllocated, Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: -1}}}},
			want: `invalid args: scoringStrategy.resources[0].weight: Invalid value: -1: resource weight of cpu not in valid range (0, 100]`,
		},
		{
			name: "ratio without shape",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.RequestedToCapacityRatio}},
			want: `invalid args: scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio`,
		},
		{
			name: "ratio with an empty shape",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.RequestedToCapacityRatio, RequestedToCapacityRatio: shape()}},
			want: `invalid args: scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified`,
		},
		{
			name: "shape not increasing and out of range",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.RequestedToCapacityRatio, RequestedToCapacityRatio: shape(50, 5, 50, 11, 101, 2)}},
			want: `invalid args: [scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 50: values must be sorted in increasing order, scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: 11: not in valid range [0, 10], scoringStrategy.requestedToCapacityRatio.shape[2].utilization: Invalid value: 101: not in valid range [0, 100]]`,
		},
		{
			name: "shape with another strategy",
			args: &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated, RequestedToCapacityRatio: shape(0, 0)}},
			want: `invalid args: scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(noderesources.Name, 0)), noderesources.Name, tt.args)
			fwk, err := st.BuildFramework(plugins.NewInTreeRegistry(), profile, nil)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				_ = fwk.Close()
			}
			want := tt.want
			if want != "" {
				want = `PluginConfig plugin "NodeResourcesFit": ` + want
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitEvents(t *testing.T) {
	fwk := newFramework(t, nil, nil)
	pod := st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2"}).Obj()
	small := st.MakeNode().Name("n").Capacity(res{v1.ResourceCPU: "1"}).Obj()
	big := st.MakeNode().Name("n").Capacity(res{v1.ResourceCPU: "4"}).Obj()
	bigger := st.MakeNode().Name("n").Capacity(res{v1.ResourceCPU: "8"}).Obj()
	biggerMem := st.MakeNode().Name("n").Capacity(res{v1.ResourceCPU: "4", v1.ResourceMemory: "1Gi"}).Obj()
	scheduled := st.MakePod().Name("o").Node("n").Req(res{v1.ResourceCPU: "2"}).Obj()
	scaledDown := st.MakePod().Name("o").Node("n").Req(res{v1.ResourceCPU: "1"}).Obj()
	memScaledDown := st.MakePod().Name("o").Node("n").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "1"}).Obj()
	nodeAdd := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
	allocatable := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeAllocatable}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"scheduled pod deleted", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, scheduled, nil, framework.Queue},
		{"nominated pod deleted", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, st.MakePod().Name("o").NominatedNodeName("n").Obj(), nil, framework.Queue},
		{"pod neither bound nor nominated deleted", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, st.MakePod().Name("o").Obj(), nil, framework.QueueSkip},
		// Upstream 1.37 registers AssignedPod and TargetPod events only.
		{"unscheduled pod delete is not registered", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Delete}, st.MakePod().Name("o").NominatedNodeName("n").Obj(), nil, framework.QueueSkip},
		{"another pending pod scaled down is not registered", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodScaleDown},
			st.MakePod().Name("o").Req(res{v1.ResourceCPU: "2"}).Obj(), st.MakePod().Name("o").Req(res{v1.ResourceCPU: "1"}).Obj(), framework.QueueSkip},
		{"the pod itself scaled down", framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodScaleDown},
			pod, st.MakePod().Name("p").Req(res{v1.ResourceCPU: "1"}).Obj(), framework.Queue},
		{"the pod itself scaled up is not registered", framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodScaleUp},
			pod, st.MakePod().Name("p").Req(res{v1.ResourceCPU: "3"}).Obj(), framework.QueueSkip},
		{"a bound pod scaled up is not registered", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodScaleUp}, scaledDown, scheduled, framework.QueueSkip},
		{"pod scaled down on cpu", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodScaleDown}, scheduled, scaledDown, framework.Queue},
		{"pod scaled down on a resource not requested", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodScaleDown},
			st.MakePod().Name("o").Node("n").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "2"}).Obj(), memScaledDown, framework.QueueSkip},
		{"big enough node added", nodeAdd, nil, big, framework.Queue},
		{"too small node added", nodeAdd, nil, small, framework.QueueSkip},
		{"allocatable grew", allocatable, big, bigger, framework.Queue},
		{"allocatable of another resource grew", allocatable, big, biggerMem, framework.QueueSkip},
		{"labels changed", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}, small, big, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, noderesources.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkFit(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Capacity(res{v1.ResourceCPU: "32", v1.ResourceMemory: "128Gi", extended: "8"}).Obj()
	})
	var pods []*v1.Pod
	for i, n := range nodes {
		for j := range 10 {
			pods = append(pods, st.MakePod().Name(fmt.Sprintf("pod-%d-%d", i, j)).Node(n.Name).
				Req(res{v1.ResourceCPU: fmt.Sprintf("%dm", 500+100*(i%30)), v1.ResourceMemory: "2Gi"}).Obj())
		}
	}
	snapshot := st.NewSnapshot(pods, nodes)
	pod := st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", extended: "1"}).Obj()
	for _, typ := range []configv1.ScoringStrategyType{configv1.LeastAllocated, configv1.MostAllocated, configv1.RequestedToCapacityRatio} {
		args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: typ,
			Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: extended, Weight: 3}}}}
		if typ == configv1.RequestedToCapacityRatio {
			args.ScoringStrategy.RequestedToCapacityRatio = &configv1.RequestedToCapacityRatioParam{Shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}}
		}
		fwk := newFramework(b, snapshot, args, runtime.WithParallelism(1))
		if typ == configv1.LeastAllocated {
			b.Run("Filter", func(b *testing.B) { st.BenchmarkFilter(b, fwk, snapshot, pod) })
		}
		b.Run("Score/"+string(typ), func(b *testing.B) { st.BenchmarkScore(b, fwk, snapshot, pod) })
	}
}
