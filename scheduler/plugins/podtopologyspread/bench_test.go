package podtopologyspread

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	benchNodes = 5000
	benchPods  = 1000
	benchZones = 10
)

// benchCluster is 5000 nodes in 10 zones with 1000 pods labelled app=web,
// one on every fifth node or so, spread over every zone.
func benchCluster() ([]*v1.Node, []*v1.Pod) {
	nodes := make([]*v1.Node, benchNodes)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%d", i), fmt.Sprintf("zone-%d", i%benchZones)).Obj()
	}
	pods := make([]*v1.Pod, benchPods)
	for i := range pods {
		pods[i] = st.MakePod().Name(fmt.Sprintf("web-%d", i)).Label("app", "web").Node(nodes[i*benchNodes/benchPods+i%5].Name).Obj()
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
	service := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}},
	}
	fwk := newFramework(b, snapshot, nil, service)
	web := func() *st.PodWrapper { return st.MakePod().Name("p").Label("app", "web") }
	cases := map[string]*v1.Pod{
		"hard zone+host":        web().SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").SpreadConstraint(1, hostnameKey, v1.DoNotSchedule, "app", "web").Obj(),
		"soft zone+host":        web().SpreadConstraint(1, zoneKey, v1.ScheduleAnyway, "app", "web").SpreadConstraint(1, hostnameKey, v1.ScheduleAnyway, "app", "web").Obj(),
		"system defaults":       web().Obj(),
		"no spreading anywhere": st.MakePod().Name("p").Label("app", "other").Obj(),
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
