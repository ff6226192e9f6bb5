package volumebinding

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

const (
	benchZones    = 10
	benchLocalPVs = 500
)

// benchCluster is 5000 nodes in 10 zones with the common kinds of claims:
// a bound PV pinned to a zone, a WaitForFirstConsumer claim choosing among
// 500 local PVs pinned to single nodes, and a WaitForFirstConsumer claim
// provisioned in allowed zones with capacity tracking.
func benchCluster(b *testing.B) (*env, *st.Snapshot) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).
			Label(zoneKey, fmt.Sprintf("zone-%d", i%benchZones)).
			Label(v1.LabelHostname, fmt.Sprintf("node-%d", i)).Obj()
	})
	objs := []k8sruntime.Object{
		st.MakeStorageClass("local").WaitForFirstConsumer().Obj(),
		st.MakeStorageClass("zonal").WaitForFirstConsumer().Provisioner(capDriver).AllowedTopology(zoneKey, "zone-0", "zone-1", "zone-2").Obj(),
		st.MakeCSIDriver(capDriver).StorageCapacity(true).Obj(),
		st.MakePV("bound").StorageClass("local").Capacity("1Gi").NodeAffinityIn(zoneKey, "zone-3").ClaimRef("default", "bound", "bound").Phase(v1.VolumeBound).Obj(),
		st.MakePVC("default", "bound").StorageClass("local").Request("1Gi").Bound("bound").Obj(),
		st.MakePVC("default", "local").StorageClass("local").Request("1Gi").Obj(),
		st.MakePVC("default", "zonal").StorageClass("zonal").Request("1Gi").Obj(),
	}
	for z := range benchZones {
		objs = append(objs, st.MakeCSIStorageCapacity("kube-system", fmt.Sprintf("cap-%d", z), "zonal").
			Topology(zoneKey, fmt.Sprintf("zone-%d", z)).Capacity("100Gi").Obj())
	}
	for i := range benchLocalPVs {
		objs = append(objs, st.MakePV(fmt.Sprintf("local-%d", i)).StorageClass("local").Capacity("2Gi").
			NodeAffinityIn(v1.LabelHostname, fmt.Sprintf("node-%d", i*st.BenchNodes/benchLocalPVs)).Obj())
	}
	snapshot := st.NewSnapshot(nil, nodes)
	return newEnv(b, snapshot, nil, objs...), snapshot
}

// BenchmarkFilter measures one pod's PreFilter and Filter over the bench
// cluster's nodes, sequentially.
func BenchmarkFilter(b *testing.B) {
	e, snapshot := benchCluster(b)
	cases := []struct {
		name string
		pod  *v1.Pod
	}{
		{"bound PV with zone affinity", st.MakePod().Name("p").PVC("bound").Obj()},
		{"WaitForFirstConsumer among local PVs", st.MakePod().Name("p").PVC("local").Obj()},
		{"WaitForFirstConsumer provisioning with capacity", st.MakePod().Name("p").PVC("zonal").Obj()},
		{"bound PV and local PV", st.MakePod().Name("p").PVC("bound").PVC("local").Obj()},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			st.BenchmarkFilter(b, e.fwk, snapshot, c.pod)
		})
	}
}

// BenchmarkScore measures PreScore and Score (StorageCapacityScoring, on
// since 1.37) over the nodes that passed Filter: every node for a pod
// without claims, which scores 0 everywhere, and the nodes of the allowed
// zones for a claim provisioned with capacity tracking.
func BenchmarkScore(b *testing.B) {
	e, snapshot := benchCluster(b)
	ctx := b.Context()
	for _, c := range []struct {
		name string
		pod  *v1.Pod
	}{
		{"no claims", st.MakePod().Name("p").Obj()},
		{"WaitForFirstConsumer provisioning with capacity", st.MakePod().Name("p").PVC("zonal").Obj()},
	} {
		b.Run(c.name, func(b *testing.B) {
			state := framework.NewCycleState()
			if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, c.pod); !s.IsSuccess() && !s.IsSkip() {
				b.Fatal(s)
			}
			all, err := snapshot.NodeInfos().List()
			if err != nil {
				b.Fatal(err)
			}
			var feasible []*framework.NodeInfo
			for _, ni := range all {
				if e.fwk.RunFilterPlugins(ctx, state, c.pod, ni).IsSuccess() {
					feasible = append(feasible, ni)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if s := e.fwk.RunPreScorePlugins(ctx, state, c.pod, feasible); !s.IsSuccess() {
					b.Fatal(s)
				}
				if _, s := e.fwk.RunScorePlugins(ctx, state, c.pod, feasible); !s.IsSuccess() {
					b.Fatal(s)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(feasible)), "ns/node")
		})
	}
}
