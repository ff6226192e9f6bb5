package scheduler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTruncateMessage(t *testing.T) {
	long := strings.Repeat("x", 2000)
	tests := []struct {
		name, msg string
		wantLen   int
	}{
		{name: "short", msg: "0/1 nodes are available: 1 Insufficient cpu.", wantLen: 44},
		{name: "at the limit", msg: long[:maxEventNoteLength], wantLen: maxEventNoteLength},
		{name: "too long", msg: long, wantLen: maxEventNoteLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateMessage(tt.msg)
			if len(got) != tt.wantLen {
				t.Errorf("length %d, want %d", len(got), tt.wantLen)
			}
			if len(tt.msg) > maxEventNoteLength && !strings.HasSuffix(got, " ...") {
				t.Errorf("a truncated note must say so: %q", got[len(got)-10:])
			}
		})
	}
}

func TestStatusPatch(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42"},
		Status:     v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}}},
	}
	newStatus := pod.Status.DeepCopy()
	newStatus.NominatedNodeName = "n1"
	newStatus.Conditions = append(newStatus.Conditions, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "m"})
	patch, err := statusPatch(pod, newStatus)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": "42"},
		"status": map[string]any{
			"nominatedNodeName":           "n1",
			"$setElementOrder/conditions": []any{map[string]any{"type": "PodReadyToStartContainers"}, map[string]any{"type": "PodScheduled"}},
			"conditions": []any{map[string]any{
				"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m",
				"lastProbeTime": nil, "lastTransitionTime": nil,
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}
