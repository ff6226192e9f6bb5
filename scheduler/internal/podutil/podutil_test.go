package podutil

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpdatePodCondition(t *testing.T) {
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	unschedulable := func(msg string) v1.PodCondition {
		return v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg, LastTransitionTime: then}
	}
	withGeneration := func(c v1.PodCondition, g int64) v1.PodCondition {
		c.ObservedGeneration = g
		return c
	}
	withReason := func(c v1.PodCondition, r string) v1.PodCondition {
		c.Reason = r
		return c
	}
	withProbe := func(c v1.PodCondition) v1.PodCondition {
		c.LastProbeTime = then
		return c
	}
	tests := []struct {
		name        string
		existing    []v1.PodCondition
		set         v1.PodCondition
		wantChanged bool
		// wantSameTransition says the transition time must be kept.
		wantSameTransition bool
	}{
		{name: "added", set: unschedulable("a"), wantChanged: true},
		{name: "identical", existing: []v1.PodCondition{unschedulable("a")}, set: unschedulable("a"), wantSameTransition: true},
		{name: "new message, same status", existing: []v1.PodCondition{unschedulable("a")}, set: unschedulable("b"), wantChanged: true, wantSameTransition: true},
		{name: "new reason, same status", existing: []v1.PodCondition{unschedulable("a")}, set: withReason(unschedulable("a"), v1.PodReasonSchedulerError), wantChanged: true, wantSameTransition: true},
		{name: "new probe time", existing: []v1.PodCondition{unschedulable("a")}, set: withProbe(unschedulable("a")), wantChanged: true, wantSameTransition: true},
		{
			// As upstream: the observed generation is stored but alone is no change.
			name:     "new observed generation only",
			existing: []v1.PodCondition{withGeneration(unschedulable("a"), 1)},
			set:      withGeneration(unschedulable("a"), 2), wantSameTransition: true,
		},
		{
			name:     "status flips",
			existing: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: then}},
			set:      unschedulable("a"), wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := &v1.PodStatus{Conditions: append([]v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: then}}, tt.existing...)}
			cond := tt.set
			cond.LastTransitionTime = metav1.Time{}
			if got := UpdatePodCondition(status, &cond); got != tt.wantChanged {
				t.Errorf("changed = %v, want %v", got, tt.wantChanged)
			}
			if len(status.Conditions) != 2 {
				t.Fatalf("%d conditions, want 2", len(status.Conditions))
			}
			if ready := status.Conditions[0]; ready.Type != v1.PodReady || ready.Status != v1.ConditionFalse || !ready.LastTransitionTime.Equal(&then) {
				t.Errorf("condition of another type was modified: %+v", ready)
			}
			got := status.Conditions[1]
			if got.Message != tt.set.Message || got.Reason != tt.set.Reason || got.ObservedGeneration != tt.set.ObservedGeneration {
				t.Errorf("condition = %+v, want the fields of %+v", got, tt.set)
			}
			if same := got.LastTransitionTime.Equal(&then); same != tt.wantSameTransition {
				t.Errorf("transition time kept = %v, want %v", same, tt.wantSameTransition)
			}
			if got.LastTransitionTime.IsZero() {
				t.Error("transition time not set")
			}
		})
	}
}
