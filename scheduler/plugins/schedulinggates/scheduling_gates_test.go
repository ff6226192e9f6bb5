package schedulinggates_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/schedulinggates"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestSchedulingGates(t *testing.T) {
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(schedulinggates.Name, 0)), nil)
	if got := len(fwk.PreEnqueuePlugins()); got != 1 {
		t.Fatalf("PreEnqueue plugins = %d, want 1", got)
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want *framework.Status
	}{
		{name: "no gates", pod: st.MakePod().Name("p").Obj()},
		{
			name: "one gate",
			pod:  st.MakePod().Name("p").SchedulingGates("example.com/quota").Obj(),
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for scheduling gates: [example.com/quota]"),
		},
		{
			name: "gates in spec order",
			pod:  st.MakePod().Name("p").SchedulingGates("b", "a").Obj(),
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for scheduling gates: [b a]"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fwk.PreEnqueuePlugins()[0].PreEnqueue(t.Context(), tt.pod)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchedulingGatesEvents(t *testing.T) {
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(schedulinggates.Name, 0)), nil)
	pod := st.MakePod().Name("p").SchedulingGates("g").Obj()
	ungated := st.MakePod().Name("p").Obj()
	gatesGone := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodSchedulingGatesEliminated}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"the pod lost its gates", gatesGone, pod, ungated, framework.Queue},
		// Upstream 1.37 registers TargetPod only: other pending pods' updates are not its events.
		{"another pending pod lost its gates", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodSchedulingGatesEliminated},
			st.MakePod().Name("q").SchedulingGates("g").Obj(), st.MakePod().Name("q").Obj(), framework.QueueSkip},
		{"labels changed", framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel}, pod, pod, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, schedulinggates.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}
