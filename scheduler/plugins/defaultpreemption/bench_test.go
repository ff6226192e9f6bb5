package defaultpreemption

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// BenchmarkPreemption measures the preemption of one pod in a cluster of
// 5000 nodes and 1000 pods: 1000 4-cpu nodes each full with one
// low-priority pod, and 4000 1-cpu nodes too small for the 2-cpu
// preemptor. Every node is a potential node (Insufficient cpu); with the
// default args the dry run looks for 500 candidates among them. Each
// iteration runs PostFilter (dry run, node choice) and waits for the
// background eviction, through the fake clientset, to end.
func BenchmarkPreemption(b *testing.B) {
	var nodes []*v1.Node
	var pods []*v1.Pod
	for i := 0; i < 5000; i++ {
		name := fmt.Sprintf("node-%d", i)
		if i%5 == 0 {
			nodes = append(nodes, makeNode(name, "4").Label(v1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).Obj())
			pods = append(pods, placed(fmt.Sprintf("low-%d", i), name, 1, "4", i%60).Obj())
		} else {
			nodes = append(nodes, makeNode(name, "1").Label(v1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%10)).Obj())
		}
	}
	p := preemptor(100, "2").Obj()
	e := newEnv(b, envConfig{nodes: nodes, pods: append(pods, p)})
	// The cycle state and node statuses PostFilter gets from PreFilter and
	// Filter (every node: Insufficient cpu). PostFilter only reads them.
	ctx := context.Background()
	state := framework.NewCycleState()
	if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, p); !s.IsSuccess() {
		b.Fatal(s)
	}
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	all, _ := e.snapshot.List()
	if feasible, err := e.fwk.FindNodesThatPassFilters(ctx, state, p, &diagnosis, all, 0, len(all)); err != nil || len(feasible) != 0 {
		b.Fatalf("Filter: %d feasible, %v", len(feasible), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.pl.offset = func(n int32) int32 { return int32(i) % n }
		result, status := e.pl.PostFilter(ctx, state, p, diagnosis.NodeToStatus)
		if !status.IsSuccess() || result.NominatedNodeName == "" {
			b.Fatalf("PostFilter = %v, %v", result, status)
		}
		e.pl.inFlight.Wait()
	}
}
