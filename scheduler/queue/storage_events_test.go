package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// The queue matches storage events by resource and action like any other:
// these are the registrations the volume plugins make upstream.
func TestStorageEventMoves(t *testing.T) {
	event := func(r framework.EventResource, a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: r, ActionType: a}
	}
	registered := func(r framework.EventResource, a framework.ActionType) []framework.ClusterEventWithHint {
		return []framework.ClusterEventWithHint{{Event: event(r, a)}}
	}
	lateBinding := func(_ klog.Logger, _ *v1.Pod, _, newObj any) (framework.QueueingHint, error) {
		if sc, ok := newObj.(*storagev1.StorageClass); ok && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	storageClass := func(mode *storagev1.VolumeBindingMode) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, VolumeBindingMode: mode}
	}

	tests := []struct {
		name   string
		events []framework.ClusterEventWithHint
		event  framework.ClusterEvent
		newObj any
		want   Summary
	}{
		{
			name:   "PV Add registered, PV added",
			events: registered(framework.PersistentVolume, framework.Add),
			event:  event(framework.PersistentVolume, framework.Add),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "PV Add registered, PV updated",
			events: registered(framework.PersistentVolume, framework.Add),
			event:  event(framework.PersistentVolume, framework.Update),
			want:   Summary{Unschedulable: 1},
		},
		{
			name:   "PVC Add|Update registered, PVC updated",
			events: registered(framework.PersistentVolumeClaim, framework.Add|framework.Update),
			event:  event(framework.PersistentVolumeClaim, framework.Update),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "PVC Add|Update registered, PVC deleted",
			events: registered(framework.PersistentVolumeClaim, framework.Add|framework.Update),
			event:  event(framework.PersistentVolumeClaim, framework.Delete),
			want:   Summary{Unschedulable: 1},
		},
		{
			name:   "PVC registered, PV of the same action does not match",
			events: registered(framework.PersistentVolumeClaim, framework.Add|framework.Update),
			event:  event(framework.PersistentVolume, framework.Add),
			want:   Summary{Unschedulable: 1},
		},
		{
			name:   "CSINode All registered, CSINode deleted",
			events: registered(framework.CSINode, framework.All),
			event:  event(framework.CSINode, framework.Delete),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "VolumeAttachment Delete registered, VolumeAttachment deleted",
			events: registered(framework.VolumeAttachment, framework.Delete),
			event:  event(framework.VolumeAttachment, framework.Delete),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "CSIStorageCapacity registered, CSIDriver added",
			events: registered(framework.CSIStorageCapacity, framework.Add|framework.Update),
			event:  event(framework.CSIDriver, framework.Add),
			want:   Summary{Unschedulable: 1},
		},
		{
			name:   "CSIDriver Update registered, CSIDriver updated",
			events: registered(framework.CSIDriver, framework.Update),
			event:  event(framework.CSIDriver, framework.Update),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "a Pod registration does not match storage events",
			events: registered(framework.Pod, framework.All),
			event:  event(framework.PersistentVolumeClaim, framework.Add),
			want:   Summary{Unschedulable: 1},
		},
		{
			name:   "StorageClass hint sees the class: late binding helps",
			events: []framework.ClusterEventWithHint{{Event: event(framework.StorageClass, framework.Add), QueueingHintFn: lateBinding}},
			event:  event(framework.StorageClass, framework.Add),
			newObj: storageClass(&wffc),
			want:   Summary{Backoff: 1},
		},
		{
			name:   "StorageClass hint sees the class: immediate binding does not",
			events: []framework.ClusterEventWithHint{{Event: event(framework.StorageClass, framework.Add), QueueingHintFn: lateBinding}},
			event:  event(framework.StorageClass, framework.Add),
			newObj: storageClass(&immediate),
			want:   Summary{Unschedulable: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			q, logger := newQueue(t, clk, newProfile(t, "p", prioritySort{}, &rejector{name: "Volumes", events: tt.events}))
			q.Add(logger, pod("a", "p").Obj())
			failOnce(t, q, logger, "Volumes")
			if diff := cmp.Diff(Summary{Unschedulable: 1}, q.Summary()); diff != "" {
				t.Fatalf("after the failure (-want +got):\n%s", diff)
			}
			q.MoveAllToActiveOrBackoffQueue(logger, tt.event, nil, tt.newObj, nil)
			if diff := cmp.Diff(tt.want, q.Summary()); diff != "" {
				t.Errorf("after %s (-want +got):\n%s", tt.event.Label(), diff)
			}
		})
	}
}
