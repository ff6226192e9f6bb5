package testing

import (
	"context"
	gotesting "testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// BenchNodes is the cluster size of plugin benchmarks.
const BenchNodes = 5000

// MakeNodes returns n nodes built by mk.
func MakeNodes(n int, mk func(i int) *v1.Node) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		nodes[i] = mk(i)
	}
	return nodes
}

// BenchmarkFilter measures one pod's PreFilter plus Filter over every node
// of snapshot, run sequentially through the framework, per op. It also
// reports the time per node. Build fwk with runtime.WithParallelism(1) for
// figures that do not depend on the machine's cores.
func BenchmarkFilter(b *gotesting.B, fwk framework.Framework, snapshot framework.SharedLister, pod *v1.Pod) {
	b.Helper()
	ctx := context.Background()
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
			b.Fatalf("PreFilter: %v", s)
		}
		for _, ni := range nodes {
			if s := fwk.RunFilterPlugins(ctx, state, pod, ni); s.IsError() {
				b.Fatalf("Filter: %v", s)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(nodes)), "ns/node")
}

// BenchmarkScore measures one pod's PreScore plus Score (with
// normalization and weights) over every node of snapshot, per op, and
// reports the time per node.
func BenchmarkScore(b *gotesting.B, fwk framework.Framework, snapshot framework.SharedLister, pod *v1.Pod) {
	b.Helper()
	ctx := context.Background()
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		if s := fwk.RunPreScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
			b.Fatalf("PreScore: %v", s)
		}
		if _, s := fwk.RunScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
			b.Fatalf("Score: %v", s)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(nodes)), "ns/node")
}

// BenchmarkCycle measures one pod's PreFilter, Filter (stopping after
// numNodesToFind feasible nodes, starting one node further each iteration as
// the loop does), PreScore and Score over the snapshot's nodes.
func BenchmarkCycle(b *gotesting.B, fwk framework.Framework, pod *v1.Pod, numNodesToFind int) {
	ctx := context.Background()
	all, err := fwk.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		state := framework.NewCycleState()
		if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
			b.Fatal(s)
		}
		diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
		feasible, err := fwk.FindNodesThatPassFilters(ctx, state, pod, &diagnosis, all, i, numNodesToFind)
		if err != nil {
			b.Fatal(err)
		}
		if len(feasible) == 0 {
			b.Fatal("no feasible node")
		}
		if s := fwk.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
			b.Fatal(s)
		}
		if _, s := fwk.RunScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
			b.Fatal(s)
		}
	}
}
