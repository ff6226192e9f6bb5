package deferredpodscheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// The runtime refuses profiles naming DeferredPodScheduling, whose gate
// cannot be set, so these tests call the plugin itself, as upstream's do.

// TestNew checks that the plugin follows the gate it is built with.
func TestNew(t *testing.T) {
	for _, gateOn := range []bool{false, true} {
		p, err := New(t.Context(), nil, nil, feature.Features{EnableInPlacePodVerticalScalingSchedulerPreemption: gateOn})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*deferredPodScheduling).enableInPlacePodVerticalScalingSchedulerPreemption; got != gateOn {
			t.Errorf("built with the gate %v: plugin has it %v", gateOn, got)
		}
	}
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

func TestEvents(t *testing.T) {
	pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: true}
	events, err := pl.EventsToRegister(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []framework.ClusterEvent
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("event %s has no queueing hint", e.Event.Label())
		}
		got = append(got, e.Event)
	}
	want := []framework.ClusterEvent{
		{Resource: framework.Node, ActionType: framework.UpdateNodePreemptionPolicy},
		{Resource: framework.Node, ActionType: framework.Add},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	nodeEnabled := st.MakeNode().Name("node1").Obj()
	nodeDisabled := st.MakeNode().Name("node1").DisableResizePreemption("policy1").Obj()
	nodeOther := st.MakeNode().Name("node2").Obj()
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
			pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: tt.gateOn}
			got, err := pl.isSchedulableAfterNodeChange(klog.FromContext(t.Context()), tt.pod, tt.oldObj, tt.newObj)
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
			pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: tt.gateOn}
			got, err := pl.isSchedulableAfterNodeAdd(klog.FromContext(t.Context()), tt.pod, nil, tt.newObj)
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
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod resize fits, waiting for Kubelet actuation")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &deferredPodScheduling{enableInPlacePodVerticalScalingSchedulerPreemption: tt.gateOn}
			got, _ := pl.Permit(t.Context(), nil, tt.pod, "node1")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Permit (-want +got):\n%s", diff)
			}
		})
	}
}
