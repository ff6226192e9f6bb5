package volumebinding

import (
	"context"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// EventsToRegister lists upstream's events with its queueing hints. PV and
// Node events have no hint, as upstream: any of them may free or fit a
// volume.
func (pl *volumeBinding) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		// A new class, or new allowedTopologies, may allow provisioning.
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterStorageClassChange},
		// Claims get bound or created (ephemeral volumes).
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterPersistentVolumeClaimChange},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}},
		// Node labels decide PV node affinity and allowed topologies. With
		// queueing hints (GA, locked on) upstream does not register
		// UpdateNodeTaint here.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}},
		// The CSINode's migrated-plugins annotation decides how in-tree PVs are read.
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterCSINodeChange},
		{Event: framework.ClusterEvent{Resource: framework.CSIDriver, ActionType: framework.Update}, QueueingHintFn: pl.isSchedulableAfterCSIDriverChange},
		{Event: framework.ClusterEvent{Resource: framework.CSIStorageCapacity, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterCSIStorageCapacityChange},
	}, nil
}

func (pl *volumeBinding) isSchedulableAfterCSINodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	if oldObj == nil {
		logger.V(5).Info("CSINode creation could make the pod schedulable", "pod", klog.KObj(pod))
		return framework.Queue, nil
	}
	oldNode, newNode, err := helper.As[*storagev1.CSINode](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if oldNode.Annotations[v1.MigratedPluginsAnnotationKey] != newNode.Annotations[v1.MigratedPluginsAnnotationKey] {
		logger.V(5).Info("CSINode's migrated plugins changed, which may make the pod schedulable", "pod", klog.KObj(pod), "csiNode", klog.KObj(newNode))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterPersistentVolumeClaimChange queues for any change of
// one of the pod's own claims, in its namespace.
func (pl *volumeBinding) isSchedulableAfterPersistentVolumeClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, pvc, err := helper.As[*v1.PersistentVolumeClaim](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if pvc.Namespace != pod.Namespace {
		return framework.QueueSkip, nil
	}
	for i := range pod.Spec.Volumes {
		if name, _ := claimName(pod, &pod.Spec.Volumes[i]); name != "" && name == pvc.Name {
			logger.V(5).Info("A claim of the pod was created or updated", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
			return framework.Queue, nil
		}
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterStorageClassChange queues for a new class, or a
// change of allowedTopologies (the binding mode is immutable).
func (pl *volumeBinding) isSchedulableAfterStorageClassChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldSC, newSC, err := helper.As[*storagev1.StorageClass](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if oldSC == nil {
		return framework.Queue, nil
	}
	if !equality.Semantic.DeepEqual(newSC.AllowedTopologies, oldSC.AllowedTopologies) {
		logger.V(5).Info("StorageClass allowedTopologies changed", "pod", klog.KObj(pod), "storageClass", klog.KObj(newSC))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterCSIStorageCapacityChange queues for a new capacity, or
// a larger volume limit (topology and class are immutable).
func (pl *volumeBinding) isSchedulableAfterCSIStorageCapacityChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldCap, newCap, err := helper.As[*storagev1.CSIStorageCapacity](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if oldCap == nil {
		return framework.Queue, nil
	}
	oldLimit, newLimit := volumeLimit(oldCap), volumeLimit(newCap)
	if newLimit != nil && (oldLimit == nil || newLimit.Value() > oldLimit.Value()) {
		logger.V(5).Info("CSIStorageCapacity volume limit grew", "pod", klog.KObj(pod), "csiStorageCapacity", klog.KObj(newCap))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterCSIDriverChange queues when a driver the pod uses
// inline stops tracking capacity. It looks at inline CSI volumes only,
// as upstream does.
func (pl *volumeBinding) isSchedulableAfterCSIDriverChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldDriver, newDriver, err := helper.As[*storagev1.CSIDriver](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.CSI == nil || vol.CSI.Driver != newDriver.Name {
			continue
		}
		wasTracked := oldDriver.Spec.StorageCapacity != nil && *oldDriver.Spec.StorageCapacity
		isTracked := newDriver.Spec.StorageCapacity != nil && *newDriver.Spec.StorageCapacity
		if wasTracked && !isTracked {
			logger.V(5).Info("CSIDriver stopped tracking storage capacity", "pod", klog.KObj(pod), "csiDriver", klog.KObj(newDriver))
			return framework.Queue, nil
		}
	}
	return framework.QueueSkip, nil
}
