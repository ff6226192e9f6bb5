package volumebinding

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

const (
	benchZones    = 10
	benchLocalPVs = 500
)

// BenchmarkFilter measures one pod's PreFilter and Filter over 5000 nodes
// in 10 zones, sequentially, for the common kinds of claims: a bound PV
// pinned to a zone, a WaitForFirstConsumer claim choosing among 500 local
// PVs pinned to single nodes, and a WaitForFirstConsumer claim provisioned
// in allowed zones with capacity tracking.
func BenchmarkFilter(b *testing.B) {
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
	e := newEnv(b, snapshot, nil, objs...)
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
