package cache

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// newBenchCache returns a cache of numNodes nodes in 10 zones with
// podsPerNode pods each, and a snapshot already up to date with it.
func newBenchCache(b *testing.B, numNodes, podsPerNode int) (*Cache, *Snapshot) {
	logger := klog.Background()
	c := New()
	for i := 0; i < numNodes; i++ {
		name := fmt.Sprint("node-", i)
		c.AddNode(logger, st.MakeNode().Name(name).Label(v1.LabelTopologyZone, fmt.Sprint("zone-", i%10)).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "32", v1.ResourceMemory: "64Gi"}).Obj())
		for j := 0; j < podsPerNode; j++ {
			if err := c.AddPod(logger, cpuPod(fmt.Sprintf("pod-%d-%d", i, j), name, "100m")); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		b.Fatal(err)
	}
	return c, s
}

// BenchmarkUpdateSnapshotOneNodeChanged measures what a scheduling cycle pays
// for the snapshot when one node changed since the previous cycle (the pod
// the previous cycle assumed), in a cluster of 5000 nodes with 10 pods each.
func BenchmarkUpdateSnapshotOneNodeChanged(b *testing.B) {
	logger := klog.Background()
	c, s := newBenchCache(b, 5000, 10)
	pi, _ := framework.NewPodInfo(cpuPod("assumed", "node-42", "1"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			if err := c.AssumePod(logger, pi); err != nil {
				b.Fatal(err)
			}
		} else if err := c.ForgetPod(logger, pi.Pod); err != nil {
			b.Fatal(err)
		}
		i++
		if err := c.UpdateSnapshot(logger, s); err != nil {
			b.Fatal(err)
		}
		if s.copied != 1 {
			b.Fatalf("copied %d nodes, want 1", s.copied)
		}
	}
}

// BenchmarkUpdateSnapshotNothingChanged is the floor: a cycle after a cycle
// that changed nothing.
func BenchmarkUpdateSnapshotNothingChanged(b *testing.B) {
	logger := klog.Background()
	c, s := newBenchCache(b, 5000, 10)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.UpdateSnapshot(logger, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSnapshotFromScratch is what a full copy would cost, for comparison.
func BenchmarkUpdateSnapshotFromScratch(b *testing.B) {
	logger := klog.Background()
	c, _ := newBenchCache(b, 5000, 10)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.UpdateSnapshot(logger, NewEmptySnapshot()); err != nil {
			b.Fatal(err)
		}
	}
}
