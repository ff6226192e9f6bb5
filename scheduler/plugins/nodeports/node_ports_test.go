package nodeports_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeports"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestNodePorts(t *testing.T) {
	conflict := framework.NewStatus(framework.Unschedulable, nodeports.ErrReason).WithPlugin(nodeports.Name)
	existing := func() *st.PodWrapper { return st.MakePod().Name("existing").Node("busy") }
	tests := []struct {
		name       string
		pod        *v1.Pod
		existing   *v1.Pod
		wantStatus *framework.Status
	}{
		{
			name:     "no host ports",
			pod:      st.MakePod().Name("p").Container("img").Obj(),
			existing: existing().HostPort("", v1.ProtocolTCP, 80).Obj(),
		},
		{
			name:       "same ip, protocol and port",
			pod:        st.MakePod().Name("p").HostPort("127.0.0.1", v1.ProtocolUDP, 8080).Obj(),
			existing:   existing().HostPort("127.0.0.1", v1.ProtocolUDP, 8080).Obj(),
			wantStatus: conflict,
		},
		{
			name:     "other port",
			pod:      st.MakePod().Name("p").HostPort("127.0.0.1", v1.ProtocolUDP, 8080).Obj(),
			existing: existing().HostPort("127.0.0.1", v1.ProtocolUDP, 9090).Obj(),
		},
		{
			name:     "other protocol",
			pod:      st.MakePod().Name("p").HostPort("127.0.0.1", v1.ProtocolTCP, 8080).Obj(),
			existing: existing().HostPort("127.0.0.1", v1.ProtocolUDP, 8080).Obj(),
		},
		{
			name:     "other host ip",
			pod:      st.MakePod().Name("p").HostPort("127.0.0.2", v1.ProtocolTCP, 8080).Obj(),
			existing: existing().HostPort("127.0.0.1", v1.ProtocolTCP, 8080).Obj(),
		},
		{
			name:       "0.0.0.0 wanted conflicts with a specific ip in use",
			pod:        st.MakePod().Name("p").HostPort("0.0.0.0", v1.ProtocolTCP, 8001).Obj(),
			existing:   existing().HostPort("127.0.0.1", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name:       "specific ip wanted conflicts with 0.0.0.0 in use",
			pod:        st.MakePod().Name("p").HostPort("127.0.0.1", v1.ProtocolTCP, 8001).Obj(),
			existing:   existing().HostPort("0.0.0.0", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name:       "empty host ip means 0.0.0.0",
			pod:        st.MakePod().Name("p").HostPort("", v1.ProtocolTCP, 8001).Obj(),
			existing:   existing().HostPort("10.0.0.1", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name:     "0.0.0.0 on another protocol",
			pod:      st.MakePod().Name("p").HostPort("0.0.0.0", v1.ProtocolUDP, 8001).Obj(),
			existing: existing().HostPort("127.0.0.1", v1.ProtocolTCP, 8001).Obj(),
		},
		{
			name:       "empty protocol means TCP",
			pod:        st.MakePod().Name("p").HostPort("", "", 8001).Obj(),
			existing:   existing().HostPort("", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name:       "a sidecar of the existing pod holds its port",
			pod:        st.MakePod().Name("p").HostPort("", v1.ProtocolTCP, 8001).Obj(),
			existing:   existing().SidecarHostPort("", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name:       "the pod's own sidecar port counts",
			pod:        st.MakePod().Name("p").SidecarHostPort("", v1.ProtocolTCP, 8001).Obj(),
			existing:   existing().HostPort("", v1.ProtocolTCP, 8001).Obj(),
			wantStatus: conflict,
		},
		{
			name: "ordinary init containers release their ports",
			pod:  st.MakePod().Name("p").HostPort("", v1.ProtocolTCP, 8001).Obj(),
			existing: func() *v1.Pod {
				p := existing().SidecarHostPort("", v1.ProtocolTCP, 8001).Obj()
				p.Spec.InitContainers[0].RestartPolicy = nil
				return p
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot([]*v1.Pod{tt.existing}, []*v1.Node{st.MakeNode().Name("busy").Obj(), st.MakeNode().Name("free").Obj()})
			fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeports.Name, 0)), snapshot)
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			want := map[string]*framework.Status{"busy": tt.wantStatus, "free": nil}
			if diff := cmp.Diff(want, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodePortsMessage(t *testing.T) {
	snapshot := st.NewSnapshot(
		[]*v1.Pod{st.MakePod().Name("a").Node("n1").HostPort("", "", 80).Obj(), st.MakePod().Name("b").Node("n2").HostPort("", "", 80).Obj()},
		[]*v1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj()})
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeports.Name, 0)), snapshot)
	got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").HostPort("", "", 80).Obj())
	want := "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
	if diff := cmp.Diff(want, got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestNodePortsEvents(t *testing.T) {
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeports.Name, 0)), nil)
	pod := st.MakePod().Name("p").HostPort("", v1.ProtocolTCP, 80).Obj()
	podDelete := framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
	tests := []struct {
		name   string
		event  framework.ClusterEvent
		oldObj any
		newObj any
		want   framework.QueueingHint
	}{
		{"deleted pod held the port", podDelete, st.MakePod().Name("x").Node("n").HostPort("", v1.ProtocolTCP, 80).Obj(), nil, framework.Queue},
		{"deleted pod held another port", podDelete, st.MakePod().Name("x").Node("n").HostPort("", v1.ProtocolTCP, 81).Obj(), nil, framework.QueueSkip},
		{"deleted pod was not scheduled", podDelete, st.MakePod().Name("x").HostPort("", v1.ProtocolTCP, 80).Obj(), nil, framework.QueueSkip},
		{"deleted nominated pod held the port", podDelete, st.MakePod().Name("x").NominatedNodeName("n").HostPort("", v1.ProtocolTCP, 80).Obj(), nil, framework.Queue},
		// Upstream 1.37 registers AssignedPod/Delete only.
		{"unscheduled pod delete is not registered", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Delete},
			st.MakePod().Name("x").Node("n").HostPort("", v1.ProtocolTCP, 80).Obj(), nil, framework.QueueSkip},
		{"node added", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, st.MakeNode().Name("n").Obj(), framework.Queue},
		{"node updated", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}, st.MakeNode().Name("n").Obj(), st.MakeNode().Name("n").Obj(), framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, nodeports.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkNodePorts(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node { return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj() })
	var pods []*v1.Pod
	for i, n := range nodes {
		// Every node has ports in use; every tenth has the pod's port taken.
		port := int32(9000)
		if i%10 == 0 {
			port = 8080
		}
		pods = append(pods, st.MakePod().Name(fmt.Sprintf("pod-%d", i)).Node(n.Name).HostPort("", v1.ProtocolTCP, port).HostPort("", v1.ProtocolUDP, 53).Obj())
	}
	snapshot := st.NewSnapshot(pods, nodes)
	fwk := st.NewFramework(b, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeports.Name, 0)), snapshot, runtime.WithParallelism(1))
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").HostPort("", v1.ProtocolTCP, 8080).HostPort("10.0.0.1", v1.ProtocolTCP, 8443).Obj())
	})
}
