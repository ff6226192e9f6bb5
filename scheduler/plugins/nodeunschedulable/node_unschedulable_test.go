package nodeunschedulable_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeunschedulable"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestNodeUnschedulable(t *testing.T) {
	rejected := framework.NewStatus(framework.UnschedulableAndUnresolvable, nodeunschedulable.ErrReasonUnschedulable).WithPlugin(nodeunschedulable.Name)
	tests := []struct {
		name        string
		pod         *v1.Pod
		wantCordon  *framework.Status
		wantMessage string
	}{
		{
			name:        "cordoned node rejects a pod without toleration",
			pod:         st.MakePod().Name("p").Obj(),
			wantCordon:  rejected,
			wantMessage: "0/2 nodes are available: 1 node(s) were unschedulable.",
		},
		{
			name: "toleration of the unschedulable taint",
			pod:  st.MakePod().Name("p").Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
		},
		{
			name: "toleration with empty effect covers NoSchedule",
			pod:  st.MakePod().Name("p").Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", "").Obj(),
		},
		{
			name: "wildcard toleration",
			pod:  st.MakePod().Name("p").Toleration("", v1.TolerationOpExists, "", "").Obj(),
		},
		{
			name:       "toleration with another effect does not help",
			pod:        st.MakePod().Name("p").Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoExecute).Obj(),
			wantCordon: rejected,
		},
		{
			name:       "toleration of another key does not help",
			pod:        st.MakePod().Name("p").Toleration("other", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
			wantCordon: rejected,
		},
	}
	nodes := []*v1.Node{st.MakeNode().Name("ready").Obj(), st.MakeNode().Name("cordoned").Unschedulable(true).Obj()}
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeunschedulable.Name, 0)), snapshot)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			want := map[string]*framework.Status{"ready": nil, "cordoned": tt.wantCordon}
			if diff := cmp.Diff(want, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
	// With every node cordoned the pod stays pending with upstream's message.
	all := st.NewSnapshot(nil, []*v1.Node{nodes[1], st.MakeNode().Name("cordoned2").Unschedulable(true).Obj()})
	fwk = st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeunschedulable.Name, 0)), all)
	got := st.RunCycle(t.Context(), fwk, all, st.MakePod().Name("p").Obj())
	if diff := cmp.Diff("0/2 nodes are available: 2 node(s) were unschedulable.", got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestNodeUnschedulableEvents(t *testing.T) {
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeunschedulable.Name, 0)), nil)
	pod := st.MakePod().Name("p").Obj()
	tolerating := st.MakePod().Name("p").Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj()
	cordoned := st.MakeNode().Name("n").Unschedulable(true).Obj()
	ready := st.MakeNode().Name("n").Obj()
	targetToleration := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"node added schedulable", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, ready, framework.Queue},
		{"node added cordoned", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, cordoned, framework.QueueSkip},
		{"node uncordoned", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}, cordoned, ready, framework.Queue},
		{"node cordoned", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}, ready, cordoned, framework.QueueSkip},
		{"pod gains the toleration", targetToleration, pod, tolerating, framework.Queue},
		{"pod gains another toleration", targetToleration, pod,
			st.MakePod().Name("p").Toleration("x", v1.TolerationOpExists, "", "").Obj(), framework.QueueSkip},
		// Upstream 1.37 registers TargetPod only: other pending pods' updates are not its events.
		{"another pending pod gains the toleration", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodToleration},
			st.MakePod().Name("q").Obj(), st.MakePod().Name("q").Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(), framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, nodeunschedulable.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkNodeUnschedulable(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Unschedulable(i%10 == 0).Obj()
	})
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := st.NewFramework(b, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodeunschedulable.Name, 0)), snapshot, runtime.WithParallelism(1))
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").Toleration("other", v1.TolerationOpExists, "", "").Obj())
	})
}
