package deferredpodscheduling

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// newFramework builds a profile of the plugin with the gate on or off.
func newFramework(t *testing.T, gateOn bool, snapshot framework.SharedLister) framework.Framework {
	t.Helper()
	fts := feature.Features{EnableInPlacePodVerticalScalingSchedulerPreemption: gateOn}
	r := registry.New(map[string]fwkruntime.Factory{
		Name: func(ctx context.Context, args runtime.Object, h framework.Handle) (framework.Plugin, error) {
			return New(ctx, args, h, fts)
		},
	})
	return st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot)
}

func deferredPod() *st.PodWrapper {
	return st.MakePod().Name("pod1").Node("node1").Condition(v1.PodResizePending, v1.ConditionTrue, v1.PodReasonDeferred)
}

func TestPreFilter(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		gateOn bool
		want   *framework.Status
	}{
		{name: "feature gate off, deferred pod -> skip", pod: deferredPod().Obj(), want: framework.NewStatus(framework.Skip)},
		{name: "feature gate on, non-deferred pod -> skip", pod: st.MakePod().Name("pod1").Node("node1").Obj(), gateOn: true, want: framework.NewStatus(framework.Skip)},
		{name: "feature gate on, resize pending for another reason -> skip",
			pod:    st.MakePod().Name("pod1").Node("node1").Condition(v1.PodResizePending, v1.ConditionTrue, v1.PodReasonInfeasible).Obj(),
			gateOn: true, want: framework.NewStatus(framework.Skip)},
		{name: "feature gate on, deferred pod -> success/nil", pod: deferredPod().Obj(), gateOn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: tt.gateOn}
			_, got := pl.PreFilter(t.Context(), nil, tt.pod, nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	disabled := st.MakeNode().Name("node1").DisableResizePreemption("policy1").Obj()
	tests := []struct {
		name   string
		pod    *v1.Pod
		node   *v1.Node
		gateOn bool
		want   *framework.Status
	}{
		{name: "feature gate off -> success (ignore disabled policy)", pod: deferredPod().Obj(), node: disabled},
		{name: "feature gate on, non-deferred pod -> success (ignore disabled policy)", pod: st.MakePod().Name("pod1").Node("node1").Obj(), node: disabled, gateOn: true},
		{name: "node has nil preemption policy -> success", pod: deferredPod().Obj(), node: st.MakeNode().Name("node1").Obj(), gateOn: true},
		{name: "node has empty disable preemption policy -> success", pod: deferredPod().Obj(), node: st.MakeNode().Name("node1").DisableResizePreemption().Obj(), gateOn: true},
		{name: "node has disabled preemption policy -> unschedulable", pod: deferredPod().Obj(), node: disabled, gateOn: true,
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeDisablesResizePreemption)},
		{name: "pod without a node is not kept to one", pod: deferredPod().Node("").Obj(), node: st.MakeNode().Name("node2").Obj(), gateOn: true},
		{name: "node name does not match pod assigned node -> unschedulable", pod: deferredPod().Obj(), node: st.MakeNode().Name("node2").Obj(), gateOn: true,
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod assigned to different node")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: tt.gateOn}
			nodeInfo := framework.NewNodeInfo()
			nodeInfo.SetNode(tt.node)
			got := pl.Filter(t.Context(), nil, tt.pod, nodeInfo)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCycle runs the plugin in a framework instance: with the gate on, a
// deferred resize is kept to its node and off nodes that disable resize
// preemption, with upstream's message; with it off, the plugin is inert.
func TestCycle(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("node1").DisableResizePreemption("policy1").Obj(),
		st.MakeNode().Name("node2").Obj(),
	}
	snapshot := st.NewSnapshot(nil, nodes)
	tests := []struct {
		name        string
		gateOn      bool
		pod         *v1.Pod
		wantFilter  map[string]*framework.Status
		wantMessage string
	}{
		{
			name:   "gate on, deferred resize on a node that disables resize preemption",
			gateOn: true,
			pod:    deferredPod().Obj(),
			wantFilter: map[string]*framework.Status{
				"node1": framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeDisablesResizePreemption).WithPlugin(Name),
				"node2": framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod assigned to different node").WithPlugin(Name),
			},
			wantMessage: "0/2 nodes are available: 1 node had resize preemption disabled, 1 pod assigned to different node.",
		},
		{
			name:       "gate off, the plugin is inert",
			pod:        deferredPod().Obj(),
			wantFilter: map[string]*framework.Status{"node1": nil, "node2": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, tt.gateOn, snapshot)
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.wantFilter, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMessage, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	fwk := newFramework(t, true, nil)
	want := []framework.ClusterEvent{
		{Resource: framework.Node, ActionType: framework.UpdateNodePreemptionPolicy},
		{Resource: framework.Node, ActionType: framework.Add},
	}
	if diff := cmp.Diff(want, st.RegisteredEvents(t, fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	nodeEnabled := st.MakeNode().Name("node1").Obj()
	nodeDisabled := st.MakeNode().Name("node1").DisableResizePreemption("policy1").Obj()
	nodeOther := st.MakeNode().Name("node2").Obj()
	update := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodePreemptionPolicy}
	tests := []struct {
		name           string
		pod            *v1.Pod
		oldObj, newObj any
		gateOn         bool
		want           framework.QueueingHint
	}{
		{name: "gate off, deferred pod, transition to enabled -> skip", pod: deferredPod().Obj(), oldObj: nodeDisabled, newObj: nodeEnabled, want: framework.QueueSkip},
		{name: "gate on, non-deferred pod, transition to enabled -> skip", pod: st.MakePod().Name("pod1").Node("node1").Obj(), oldObj: nodeDisabled, newObj: nodeEnabled, gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, node is not pod's assigned node -> skip", pod: deferredPod().Obj(), oldObj: nodeOther, newObj: nodeOther, gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, another node enables resize preemption -> skip", pod: deferredPod().Obj(),
			oldObj: st.MakeNode().Name("node2").DisableResizePreemption("policy1").Obj(), newObj: nodeOther, gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, policy transition disabled -> enabled -> queue", pod: deferredPod().Obj(), oldObj: nodeDisabled, newObj: nodeEnabled, gateOn: true, want: framework.Queue},
		{name: "gate on, deferred pod, policy transition enabled -> disabled -> skip", pod: deferredPod().Obj(), oldObj: nodeEnabled, newObj: nodeDisabled, gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, other node field updated -> skip", pod: deferredPod().Obj(), oldObj: nodeEnabled, newObj: nodeEnabled, gateOn: true, want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, tt.gateOn, nil)
			got, err := st.QueueingHint(t.Context(), fwk, Name, update, tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsSchedulableAfterNodeAdd(t *testing.T) {
	add := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
	tests := []struct {
		name   string
		pod    *v1.Pod
		newObj any
		gateOn bool
		want   framework.QueueingHint
	}{
		{name: "gate off, deferred pod, add enabled node -> skip", pod: deferredPod().Obj(), newObj: st.MakeNode().Name("node1").Obj(), want: framework.QueueSkip},
		{name: "gate on, non-deferred pod, add enabled node -> skip", pod: st.MakePod().Name("pod1").Node("node1").Obj(), newObj: st.MakeNode().Name("node1").Obj(), gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, node is not pod's assigned node -> skip", pod: deferredPod().Obj(), newObj: st.MakeNode().Name("node2").Obj(), gateOn: true, want: framework.QueueSkip},
		{name: "gate on, deferred pod, add enabled node -> queue", pod: deferredPod().Obj(), newObj: st.MakeNode().Name("node1").Obj(), gateOn: true, want: framework.Queue},
		{name: "gate on, deferred pod, add disabled node -> skip", pod: deferredPod().Obj(), newObj: st.MakeNode().Name("node1").DisableResizePreemption("policy1").Obj(), gateOn: true, want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, tt.gateOn, nil)
			got, err := st.QueueingHint(t.Context(), fwk, Name, add, tt.pod, nil, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPermit(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		gateOn bool
		want   *framework.Status
	}{
		{name: "feature gate off, deferred pod -> success/nil", pod: deferredPod().Obj()},
		{name: "feature gate on, non-deferred pod -> success/nil", pod: st.MakePod().Name("pod1").Node("node1").Obj(), gateOn: true},
		{name: "feature gate on, deferred pod -> reject with UnschedulableAndUnresolvable", pod: deferredPod().Obj(), gateOn: true,
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod resize fits, waiting for Kubelet actuation").WithPlugin(Name)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, tt.gateOn, nil)
			got := fwk.RunPermitPlugins(t.Context(), framework.NewCycleState(), tt.pod, "node1")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Permit (-want +got):\n%s", diff)
			}
		})
	}
}
