package nodevolumelimits

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// EventsToRegister returns upstream's events: a CSINode added or whose
// limits grew, a pod with countable volumes deleted from a node, the
// pod's PVC created, a VolumeAttachment removed. As upstream, no CSIDriver
// event is registered: a pod rejected because its driver is missing from a
// node is queued again by a CSINode created, or by a driver registering
// with an attach limit; a driver registering without one leaves it to the
// unschedulable pool's timeout.
func (pl *csiLimits) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		// No hint, as upstream: any new CSINode may lift a rejection.
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Update}, QueueingHintFn: isSchedulableAfterCSINodeUpdated},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodDeleted},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}, QueueingHintFn: isSchedulableAfterPVCAdded},
		{Event: framework.ClusterEvent{Resource: framework.VolumeAttachment, ActionType: framework.Delete}, QueueingHintFn: pl.isSchedulableAfterVolumeAttachmentDeleted},
	}, nil
}

// isSchedulableAfterCSINodeUpdated queues the pod only when some driver's
// limit grew; a driver that had no count before counts as 0.
func isSchedulableAfterCSINodeUpdated(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldCSINode, newCSINode, err := helper.As[*storagev1.CSINode](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterCSINodeUpdated: %w", err)
	}
	oldLimits := make(map[string]int32, len(oldCSINode.Spec.Drivers))
	for _, d := range oldCSINode.Spec.Drivers {
		oldLimits[d.Name] = allocatableCount(d)
	}
	for _, d := range newCSINode.Spec.Drivers {
		if newLimit, oldLimit := allocatableCount(d), oldLimits[d.Name]; newLimit > oldLimit {
			logger.V(5).Info("CSINode driver limit increased, might make this pod schedulable",
				"pod", klog.KObj(pod), "driver", d.Name, "oldLimit", oldLimit, "newLimit", newLimit)
			return framework.Queue, nil
		}
	}
	return framework.QueueSkip, nil
}

func allocatableCount(d storagev1.CSINodeDriver) int32 {
	if d.Allocatable == nil || d.Allocatable.Count == nil {
		return 0
	}
	return *d.Allocatable.Count
}

// isSchedulableAfterAssignedPodDeleted queues the pod when the deleted pod
// was on (or nominated to) a node and had a volume that may have counted
// there.
func (pl *csiLimits) isSchedulableAfterAssignedPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterAssignedPodDeleted: %w", err)
	}
	if len(deleted.Spec.Volumes) == 0 {
		return framework.QueueSkip, nil
	}
	if deleted.Spec.NodeName == "" && deleted.Status.NominatedNodeName == "" {
		return framework.QueueSkip, nil
	}
	if pl.hasCountableVolume(deleted) {
		return framework.Queue, nil
	}
	logger.V(5).Info("The deleted pod does not impact the scheduling of the unscheduled pod", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
	return framework.QueueSkip, nil
}

// isSchedulableAfterPVCAdded queues the pod when the new PVC is one of its
// claims (directly or as a generic ephemeral volume): a missing claim is
// what made the pod unresolvable.
func isSchedulableAfterPVCAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, added, err := helper.As[*v1.PersistentVolumeClaim](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterPVCAdded: %w", err)
	}
	if added.Namespace != pod.Namespace {
		return framework.QueueSkip, nil
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claim string
		switch {
		case vol.PersistentVolumeClaim != nil:
			claim = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claim = ephemeral.VolumeClaimName(pod, vol)
		default:
			continue
		}
		if claim == added.Name {
			logger.V(5).Info("PVC that is referred from the pod was created, which might make this pod schedulable", "pod", klog.KObj(pod), "PVC", klog.KObj(added))
			return framework.Queue, nil
		}
	}
	logger.V(5).Info("PVC irrelevant to the Pod was created, which doesn't make this pod schedulable", "pod", klog.KObj(pod), "PVC", klog.KObj(added))
	return framework.QueueSkip, nil
}

// isSchedulableAfterVolumeAttachmentDeleted queues the pod when it has a
// PVC (whose driver is not known without lookups), or an in-tree inline
// volume migrating to the attachment's driver.
func (pl *csiLimits) isSchedulableAfterVolumeAttachmentDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*storagev1.VolumeAttachment](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterVolumeAttachmentDeleted: %w", err)
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.PersistentVolumeClaim != nil {
			logger.V(5).Info("Pod volume uses PersistentVolumeClaim, which might make this pod schedulable due to VolumeAttachment deletion",
				"pod", klog.KObj(pod), "volumeAttachment", klog.KObj(deleted), "volume", vol.Name)
			return framework.Queue, nil
		}
		if !pl.translator.IsInlineMigratable(vol) {
			continue
		}
		pv, err := pl.translator.TranslateInTreeInlineVolumeToCSI(logger, vol, pod.Namespace)
		if err != nil || pv == nil {
			return framework.Queue, fmt.Errorf("converting volume(%s) from inline to csi: %w", vol.Name, err)
		}
		if pv.Spec.CSI != nil && deleted.Spec.Attacher == pv.Spec.CSI.Driver {
			logger.V(5).Info("Pod volume is an Inline Migratable volume that matches the CSI driver, which might make this pod schedulable due to VolumeAttachment deletion",
				"pod", klog.KObj(pod), "volumeAttachment", klog.KObj(deleted), "volume", vol.Name, "csiDriver", pv.Spec.CSI.Driver)
			return framework.Queue, nil
		}
	}
	logger.V(5).Info("The VolumeAttachment deletion wouldn't make this pod schedulable because the pod has no volume related to it",
		"pod", klog.KObj(pod), "volumeAttachment", klog.KObj(deleted))
	return framework.QueueSkip, nil
}
