package nodevolumelimits

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestEventsToRegister(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil))
	want := []st.Registration{
		// Upstream gives CSINode creation no hint: every new CSINode queues.
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Update}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.VolumeAttachment, ActionType: framework.Delete}, Hinted: true},
	}
	if diff := cmp.Diff(want, st.Registrations(t, fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestQueueingHints(t *testing.T) {
	var (
		podDelete = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
		pvcAdd    = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}
		vaDelete  = framework.ClusterEvent{Resource: framework.VolumeAttachment, ActionType: framework.Delete}
		csiAdd    = framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Add}
		csiUpdate = framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Update}
	)
	count := func(n int32) *int32 { return &n }
	withPVC := st.MakePod().Name("p").PVC("claim").Obj()
	withEphemeral := st.MakePod().Name("p").EphemeralVolume("scratch").Obj()
	withEBS := st.MakePod().Name("p").Volume(ebsInline("ebs", "vol-1")).Obj()
	withGCE := st.MakePod().Name("p").Volume(gceInline("gce", "disk-1")).Obj()
	withConfigMap := st.MakePod().Name("p").Volume(v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}).Obj()
	ebsVA := volumeAttachment("va", ebsDriver, "pv", nodeName)

	tests := []struct {
		name     string
		event    framework.ClusterEvent
		pod      *v1.Pod
		old, new any
		want     framework.QueueingHint
	}{
		{name: "CSINode added", event: csiAdd, pod: withPVC, new: csiNode(nodeName, nil), want: framework.Queue},
		{name: "CSINode limit raised", event: csiUpdate, pod: withPVC,
			old:  csiNode(nodeName, map[string]*int32{testDriver: count(1)}),
			new:  csiNode(nodeName, map[string]*int32{testDriver: count(2)}),
			want: framework.Queue},
		{name: "CSINode limit lowered", event: csiUpdate, pod: withPVC,
			old:  csiNode(nodeName, map[string]*int32{testDriver: count(2)}),
			new:  csiNode(nodeName, map[string]*int32{testDriver: count(1)}),
			want: framework.QueueSkip},
		{name: "CSINode limit unchanged", event: csiUpdate, pod: withPVC,
			old:  csiNode(nodeName, map[string]*int32{testDriver: count(2)}),
			new:  st.MakeCSINode(nodeName).Annotation("a", "b").Driver(testDriver, nodeName, count(2)).Obj(),
			want: framework.QueueSkip},
		{name: "CSINode driver added with a limit", event: csiUpdate, pod: withPVC,
			old:  csiNode(nodeName, nil),
			new:  csiNode(nodeName, map[string]*int32{testDriver: count(1)}),
			want: framework.Queue},
		{name: "CSINode driver loses its limit", event: csiUpdate, pod: withPVC,
			old:  csiNode(nodeName, map[string]*int32{testDriver: count(1)}),
			new:  csiNode(nodeName, map[string]*int32{testDriver: nil}),
			want: framework.QueueSkip},

		{name: "deleted pod had a PVC", event: podDelete, pod: withPVC, old: onNode("gone", "other"), want: framework.Queue},
		{name: "deleted pod had a migratable inline volume", event: podDelete, pod: withPVC,
			old: st.MakePod().Name("gone").Node(nodeName).Volume(ebsInline("ebs", "vol-2")).Obj(), want: framework.Queue},
		{name: "deleted pod had an ephemeral volume", event: podDelete, pod: withPVC,
			old: st.MakePod().Name("gone").Node(nodeName).EphemeralVolume("e").Obj(), want: framework.Queue},
		{name: "deleted pod had no volume", event: podDelete, pod: withPVC, old: st.MakePod().Name("gone").Node(nodeName).Obj(), want: framework.QueueSkip},
		{name: "deleted pod had only other volumes", event: podDelete, pod: withPVC,
			old: st.MakePod().Name("gone").Node(nodeName).Volume(withConfigMap.Spec.Volumes[0]).Obj(), want: framework.QueueSkip},
		{name: "deleted pod was neither scheduled nor nominated", event: podDelete, pod: withPVC,
			old: st.MakePod().Name("gone").PVC("other").Obj(), want: framework.QueueSkip},
		// The scheduler reports a nominated pod's deletion as AssignedPod/Delete,
		// as upstream: lower-priority pods treated it as assigned.
		{name: "deleted pod was nominated", event: podDelete, pod: withPVC,
			old: st.MakePod().Name("gone").PVC("other").NominatedNodeName(nodeName).Obj(), want: framework.Queue},
		{name: "unscheduled pod deletion is not registered", event: framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Delete}, pod: withPVC,
			old: st.MakePod().Name("gone").PVC("other").NominatedNodeName(nodeName).Obj(), want: framework.QueueSkip},
		{name: "deleted pod known only as a tombstone", event: podDelete, pod: withPVC,
			old: cache.DeletedFinalStateUnknown{Key: "default/gone", Obj: onNode("gone", "other")}, want: framework.Queue},

		{name: "the pod's PVC was added", event: pvcAdd, pod: withPVC, new: st.MakePVC(ns, "claim").Obj(), want: framework.Queue},
		{name: "a PVC of that name in another namespace", event: pvcAdd, pod: withPVC, new: st.MakePVC("other", "claim").Obj(), want: framework.QueueSkip},
		{name: "another PVC was added", event: pvcAdd, pod: withPVC, new: st.MakePVC(ns, "other").Obj(), want: framework.QueueSkip},
		{name: "the pod's ephemeral PVC was added", event: pvcAdd, pod: withEphemeral, new: st.MakePVC(ns, "p-scratch").Obj(), want: framework.Queue},
		{name: "a PVC was added for a pod without claims", event: pvcAdd, pod: withEBS, new: st.MakePVC(ns, "p-ebs").Obj(), want: framework.QueueSkip},

		{name: "VolumeAttachment deleted, pod has a PVC", event: vaDelete, pod: withPVC, old: ebsVA, want: framework.Queue},
		{name: "VolumeAttachment of the pod's inline volume's driver deleted", event: vaDelete, pod: withEBS, old: ebsVA, want: framework.Queue},
		{name: "VolumeAttachment of another driver deleted", event: vaDelete, pod: withGCE, old: ebsVA, want: framework.QueueSkip},
		{name: "VolumeAttachment deleted, pod has only an ephemeral volume", event: vaDelete, pod: withEphemeral, old: ebsVA, want: framework.QueueSkip},
		{name: "VolumeAttachment deleted, pod has no countable volume", event: vaDelete, pod: withConfigMap, old: ebsVA, want: framework.QueueSkip},

		{name: "PVC update is not registered", event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Update}, pod: withPVC,
			old: st.MakePVC(ns, "claim").Obj(), new: st.MakePVC(ns, "claim").Obj(), want: framework.QueueSkip},
		{name: "CSINode delete is not registered", event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Delete}, pod: withPVC,
			old: csiNode(nodeName, nil), want: framework.QueueSkip},
		{name: "VolumeAttachment add is not registered", event: framework.ClusterEvent{Resource: framework.VolumeAttachment, ActionType: framework.Add}, pod: withPVC,
			new: &storagev1.VolumeAttachment{}, want: framework.QueueSkip},
	}
	fwk := newFramework(t, st.NewSnapshot(nil, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(context.Background(), fwk, Name, tt.event, tt.pod, tt.old, tt.new)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueingHintsWrongObjects(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil))
	pod := st.MakePod().Name("p").PVC("claim").Obj()
	for _, event := range []framework.ClusterEvent{
		{Resource: framework.CSINode, ActionType: framework.Update},
		{Resource: framework.AssignedPod, ActionType: framework.Delete},
		{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add},
		{Resource: framework.VolumeAttachment, ActionType: framework.Delete},
	} {
		got, err := st.QueueingHint(context.Background(), fwk, Name, event, pod, &v1.Node{}, &v1.Node{})
		if err == nil || got != framework.Queue {
			t.Errorf("%s with nodes: got %v, %v; want Queue and an error", event.Label(), got, err)
		}
	}
}
