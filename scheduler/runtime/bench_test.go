package runtime

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Benchmark plugins do a realistic amount of per-node work: read their
// PreFilter state from CycleState and compare a few numbers, as Fit-like
// plugins do.

type benchState struct{ cpu, mem int64 }

func (s *benchState) Clone() framework.StateData { return s }

type benchFit struct{ name string }

func (p *benchFit) Name() string { return p.name }
func (p *benchFit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	pi, _ := framework.NewPodInfo(pod)
	r := pi.CalculateResource()
	state.Write(framework.StateKey(p.name), &benchState{cpu: r.Resource.MilliCPU, mem: r.Resource.Memory})
	return nil, nil
}
func (p *benchFit) PreFilterExtensions() framework.PreFilterExtensions { return nil }
func (p *benchFit) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*benchState](state, framework.StateKey(p.name))
	if err != nil {
		return framework.AsStatus(err)
	}
	if ni.Allocatable.MilliCPU-ni.Requested.MilliCPU < s.cpu || ni.Allocatable.Memory-ni.Requested.Memory < s.mem {
		return framework.NewStatus(framework.Unschedulable, "Insufficient resources")
	}
	return nil
}
func (p *benchFit) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*benchState](state, framework.StateKey(p.name))
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	free := ni.Allocatable.MilliCPU - ni.Requested.MilliCPU - s.cpu
	return free * framework.MaxNodeScore / max(ni.Allocatable.MilliCPU, 1), nil
}
func (p *benchFit) ScoreExtensions() framework.ScoreExtensions { return nil }

type benchLabel struct{ name string }

func (p *benchLabel) Name() string { return p.name }
func (p *benchLabel) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	for k, v := range pod.Spec.NodeSelector {
		if ni.Node().Labels[k] != v {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match Pod's node affinity/selector")
		}
	}
	return nil
}
func (p *benchLabel) Score(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return int64(len(ni.Pods)), nil
}
func (p *benchLabel) ScoreExtensions() framework.ScoreExtensions { return p }
func (p *benchLabel) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s.Score)
	}
	for i := range scores {
		if hi > 0 {
			scores[i].Score = framework.MaxNodeScore - scores[i].Score*framework.MaxNodeScore/hi
		}
	}
	return nil
}

func benchFramework(b *testing.B) (*frameworkImpl, []*framework.NodeInfo, *v1.Pod) {
	r := baseRegistry(map[string]framework.Plugin{
		"FitA":   &benchFit{name: "FitA"},
		"FitB":   &benchFit{name: "FitB"},
		"Labels": &benchLabel{name: "Labels"},
	})
	nodes := makeNodes(5000)
	for i, n := range nodes {
		n.Node().Labels = map[string]string{"zone": "a"}
		for j := 0; j < i%8; j++ {
			p := makePod("existing")
			p.UID = "existing-" + p.UID
			n.AddPod(p)
		}
	}
	fw, err := NewFramework(b.Context(), r, &configv1.KubeSchedulerProfile{
		Plugins: &configv1.Plugins{MultiPoint: enabled("FitA", "FitB", "Labels")},
	}, WithDefaultPlugins(baseDefaults()), WithSnapshotSharedLister(&snapshot{nodes: nodes}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fw.Close() })
	pod := makePod("incoming")
	pod.Spec.NodeSelector = map[string]string{"zone": "a"}
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}
	return fw.(*frameworkImpl), nodes, pod
}

// BenchmarkFilter5000Nodes is one Filter phase over every node of a
// 5000-node cluster (numNodesToFind = all nodes), three Filter plugins.
func BenchmarkFilter5000Nodes(b *testing.B) {
	fw, nodes, pod := benchFramework(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		if _, s, _ := fw.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
			b.Fatal(s)
		}
		diag := &framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
		feasible, err := fw.FindNodesThatPassFilters(ctx, state, pod, diag, nodes, 0, len(nodes))
		if err != nil || len(feasible) != len(nodes) {
			b.Fatalf("feasible %d, err %v", len(feasible), err)
		}
	}
}

// BenchmarkFilter5000NodesAdaptive stops at the adaptive
// percentageOfNodesToScore (10% of 5000 nodes), as a real cycle does.
func BenchmarkFilter5000NodesAdaptive(b *testing.B) {
	fw, nodes, pod := benchFramework(b)
	ctx := b.Context()
	want := int(fw.NumFeasibleNodesToFind(int32(len(nodes))))
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		fw.RunPreFilterPlugins(ctx, state, pod)
		diag := &framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
		feasible, err := fw.FindNodesThatPassFilters(ctx, state, pod, diag, nodes, 0, want)
		if err != nil || len(feasible) != want {
			b.Fatalf("feasible %d, err %v", len(feasible), err)
		}
	}
}

// BenchmarkScore5000Nodes is PreScore + Score + NormalizeScore + weights
// over 5000 nodes with three Score plugins.
func BenchmarkScore5000Nodes(b *testing.B) {
	fw, nodes, pod := benchFramework(b)
	ctx := b.Context()
	state := framework.NewCycleState()
	fw.RunPreFilterPlugins(ctx, state, pod)
	b.ReportAllocs()
	for b.Loop() {
		if s := fw.RunPreScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
			b.Fatal(s)
		}
		scores, s := fw.RunScorePlugins(ctx, state, pod, nodes)
		if !s.IsSuccess() || len(scores) != len(nodes) {
			b.Fatal(s)
		}
	}
}

// BenchmarkFilterSampledMetrics is the full Filter phase on a cycle whose
// plugin durations are observed (1 in 10 cycles).
func BenchmarkFilterSampledMetrics(b *testing.B) {
	fw, nodes, pod := benchFramework(b)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		state.SetRecordPluginMetrics(true)
		fw.RunPreFilterPlugins(ctx, state, pod)
		diag := &framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
		if _, err := fw.FindNodesThatPassFilters(ctx, state, pod, diag, nodes, 0, len(nodes)); err != nil {
			b.Fatal(err)
		}
	}
}
