package interpodaffinity

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	benchNodes = 5000
	benchPods  = 1000
	benchZones = 10
)

// benchCluster is 5000 nodes in 10 zones with 1000 pods labelled app=web,
// one on every fifth node or so; every fifth of those pods also carries required
// anti-affinity against app=new pods on its host and a preferred affinity
// for them in its zone, so the symmetric paths have work too.
func benchCluster() ([]*v1.Node, []*v1.Pod) {
	nodes := make([]*v1.Node, benchNodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		nodes[i] = st.MakeNode().Name(name).Label(hostnameKey, name).Label(zoneKey, fmt.Sprintf("zone-%d", i%benchZones)).Obj()
	}
	pods := make([]*v1.Pod, benchPods)
	for i := range pods {
		// Every fifth node, shifted so that every zone gets pods.
		p := st.MakePod().Name(fmt.Sprintf("web-%d", i)).Label("app", "web").Node(nodes[i*benchNodes/benchPods+i%5].Name)
		if i%5 == 0 {
			p.PodAntiAffinity(st.PodAffinityTerm("app", "new", hostnameKey)).
				PreferredPodAffinity(10, st.PodAffinityTerm("app", "new", zoneKey))
		}
		pods[i] = p.Obj()
	}
	return nodes, pods
}

// BenchmarkFilterScore measures one pod's PreFilter, Filter, PreScore and
// Score through the framework over 5000 nodes holding 1000 pods: either
// every node ("all nodes") or, as the scheduling loop does at this size,
// until 10% of the nodes were found feasible ("adaptive").
func BenchmarkFilterScore(b *testing.B) {
	nodes, pods := benchCluster()
	snapshot := st.NewSnapshot(pods, nodes)
	fwk := newFramework(b, snapshot, nil, namespace("default", nil))
	cases := map[string]*v1.Pod{
		"required affinity (zone)":       st.MakePod().Name("p").Label("app", "other").PodAffinity(st.PodAffinityTerm("app", "web", zoneKey)).Obj(),
		"required anti-affinity (host)":  st.MakePod().Name("p").Label("app", "other").PodAntiAffinity(st.PodAffinityTerm("app", "web", hostnameKey)).Obj(),
		"preferred affinity (zone+host)": st.MakePod().Name("p").Label("app", "other").PreferredPodAffinity(10, st.PodAffinityTerm("app", "web", zoneKey)).PreferredPodAntiAffinity(5, st.PodAffinityTerm("app", "web", hostnameKey)).Obj(),
		"symmetry only (existing terms)": st.MakePod().Name("p").Label("app", "new").Obj(),
		"no affinity anywhere":           st.MakePod().Name("p").Label("app", "other").Obj(),
	}
	for name, pod := range cases {
		for _, mode := range []string{"all nodes", "adaptive"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				find := len(nodes)
				if mode == "adaptive" {
					find = int(runtime.NumFeasibleNodesToFind(nil, nil, int32(len(nodes))))
				}
				st.BenchmarkCycle(b, fwk, pod, find)
			})
		}
	}
}
