package queue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestNodeSchedulingPropertiesChange(t *testing.T) {
	base := func() *st.NodeWrapper {
		return st.MakeNode().Name("n").Label("a", "b").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2"})
	}
	ev := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.Node, ActionType: a}
	}
	heartbeat := base().Obj()
	heartbeat.Status.Conditions[0].Reason = "KubeletReady"
	notReady := base().Obj()
	notReady.Status.Conditions[0].Status = v1.ConditionFalse
	tests := []struct {
		name string
		old  *v1.Node
		new  *v1.Node
		want []framework.ClusterEvent
	}{
		{name: "nothing that matters", old: base().Obj(), new: heartbeat},
		{name: "allocatable", old: base().Obj(), new: base().Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj(), want: []framework.ClusterEvent{ev(framework.UpdateNodeAllocatable)}},
		{name: "label", old: base().Obj(), new: base().Label("a", "c").Obj(), want: []framework.ClusterEvent{ev(framework.UpdateNodeLabel)}},
		{name: "taint", old: base().Obj(), new: base().Taint("k", "v", v1.TaintEffectNoSchedule).Obj(), want: []framework.ClusterEvent{ev(framework.UpdateNodeTaint)}},
		{name: "condition", old: base().Obj(), new: notReady, want: []framework.ClusterEvent{ev(framework.UpdateNodeCondition)}},
		{name: "declared features", old: base().DeclaredFeatures("A").Obj(), new: base().DeclaredFeatures("A", "B").Obj(), want: []framework.ClusterEvent{ev(framework.UpdateNodeDeclaredFeature)}},
		{name: "becoming schedulable", old: base().Unschedulable(true).Obj(), new: base().Obj(), want: []framework.ClusterEvent{ev(framework.UpdateNodeTaint)}},
		{name: "becoming unschedulable helps nobody", old: base().Obj(), new: base().Unschedulable(true).Obj()},
		{
			name: "preemption policy", old: base().Obj(),
			new: func() *v1.Node {
				n := base().Obj()
				n.Spec.PodPreemptionPolicy = &v1.NodePodPreemptionPolicy{}
				return n
			}(),
			want: []framework.ClusterEvent{ev(framework.UpdateNodePreemptionPolicy)},
		},
		{
			name: "several at once", old: base().Obj(),
			new:  base().Label("x", "y").Taint("k", "v", v1.TaintEffectNoSchedule).Obj(),
			want: []framework.ClusterEvent{ev(framework.UpdateNodeLabel), ev(framework.UpdateNodeTaint)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NodeSchedulingPropertiesChange(tt.new, tt.old)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodSchedulingPropertiesChange(t *testing.T) {
	cpu := func(q string) map[v1.ResourceName]string { return map[v1.ResourceName]string{v1.ResourceCPU: q} }
	ev := func(r framework.EventResource, a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: r, ActionType: a}
	}
	tests := []struct {
		name   string
		old    *v1.Pod
		new    *v1.Pod
		target bool
		want   []framework.ClusterEvent
	}{
		{
			name: "label of a bound pod", old: st.MakePod().Name("p").Node("n").Obj(), new: st.MakePod().Name("p").Node("n").Label("a", "b").Obj(),
			want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodLabel)},
		},
		{
			name: "scale down of a bound pod", old: st.MakePod().Name("p").Node("n").Req(cpu("2")).Obj(), new: st.MakePod().Name("p").Node("n").Req(cpu("1")).Obj(),
			want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodScaleDown)},
		},
		{
			name: "a bound pod is never the target", old: st.MakePod().Name("p").Node("n").Obj(), new: st.MakePod().Name("p").Node("n").Label("a", "b").Obj(),
			target: true, want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodLabel)},
		},
		{
			name: "scale up of a bound pod", old: st.MakePod().Name("p").Node("n").Req(cpu("1")).Obj(), new: st.MakePod().Name("p").Node("n").Req(cpu("2")).Obj(),
			want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodScaleUp)},
		},
		{
			name: "a request added is a scale up", old: st.MakePod().Name("p").Node("n").Obj(), new: st.MakePod().Name("p").Node("n").Req(cpu("1")).Obj(),
			want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodScaleUp)},
		},
		{
			name: "one request down and another up", old: st.MakePod().Name("p").Node("n").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "1Gi"}).Obj(),
			new:  st.MakePod().Name("p").Node("n").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}).Obj(),
			want: []framework.ClusterEvent{ev(framework.AssignedPod, framework.UpdatePodScaleDown), ev(framework.AssignedPod, framework.UpdatePodScaleUp)},
		},
		{
			name: "gates lifted", old: st.MakePod().Name("p").SchedulingGates("g").Obj(), new: st.MakePod().Name("p").Obj(),
			want: []framework.ClusterEvent{ev(framework.UnscheduledPod, framework.UpdatePodSchedulingGatesEliminated)},
		},
		{
			name: "gates lifted on the target pod", old: st.MakePod().Name("p").SchedulingGates("g").Obj(), new: st.MakePod().Name("p").Obj(),
			target: true, want: []framework.ClusterEvent{ev(framework.TargetPod, framework.UpdatePodSchedulingGatesEliminated)},
		},
		{
			name: "labels and tolerations of the target pod", old: st.MakePod().Name("p").Obj(),
			new:    st.MakePod().Name("p").Label("a", "b").Toleration("k", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
			target: true, want: []framework.ClusterEvent{ev(framework.TargetPod, framework.UpdatePodLabel), ev(framework.TargetPod, framework.UpdatePodToleration)},
		},
		{
			name: "one of two gates lifted is a general update", old: st.MakePod().Name("p").SchedulingGates("g", "h").Obj(), new: st.MakePod().Name("p").SchedulingGates("g").Obj(),
			want: []framework.ClusterEvent{ev(framework.UnscheduledPod, framework.Update)},
		},
		{
			name: "toleration added", old: st.MakePod().Name("p").Obj(), new: st.MakePod().Name("p").Toleration("k", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
			want: []framework.ClusterEvent{ev(framework.UnscheduledPod, framework.UpdatePodToleration)},
		},
		{
			name: "generated claim recorded in the target pod's status", old: st.MakePod().Name("p").ResourceClaim("gpus", "one-gpu").Obj(),
			new: func() *v1.Pod {
				p := st.MakePod().Name("p").ResourceClaim("gpus", "one-gpu").Obj()
				p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr("p-gpus-x")}}
				return p
			}(),
			target: true, want: []framework.ClusterEvent{ev(framework.TargetPod, framework.UpdatePodGeneratedResourceClaim)},
		},
		{
			name: "generated extended resource claim recorded", old: st.MakePod().Name("p").Obj(),
			new: func() *v1.Pod {
				p := st.MakePod().Name("p").Obj()
				p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-x"}
				return p
			}(),
			want: []framework.ClusterEvent{ev(framework.UnscheduledPod, framework.UpdatePodGeneratedResourceClaim)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, PodSchedulingPropertiesChange(tt.new, tt.old, tt.target)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
