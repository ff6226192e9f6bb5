package scheduler

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
)

// addEventHandlers connects the pod and node informers to the cache and
// the queue, and the storage informers to the queue. Handlers run on the
// informers' goroutines, never on the loop.
func (s *Scheduler) addEventHandlers() error {
	podReg, err := s.podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.addPod,
		UpdateFunc: s.updatePod,
		DeleteFunc: s.deletePod,
	})
	if err != nil {
		return fmt.Errorf("adding the pod event handler: %w", err)
	}
	nodeReg, err := s.nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.addNode,
		UpdateFunc: s.updateNode,
		DeleteFunc: s.deleteNode,
	})
	if err != nil {
		return fmt.Errorf("adding the node event handler: %w", err)
	}
	s.handlers = []cache.ResourceEventHandlerRegistration{podReg, nodeReg}
	for _, ri := range s.eventSources {
		reg, err := ri.informer.AddEventHandler(s.clusterEventHandler(ri.resource))
		if err != nil {
			return fmt.Errorf("adding the %s event handler: %w", ri.resource, err)
		}
		s.handlers = append(s.handlers, reg)
	}
	return nil
}

// resourceInformer is an informer whose changes only matter to the queue:
// the scheduler keeps no cache of those objects, plugins read them
// through listers of the same informer.
type resourceInformer struct {
	resource framework.EventResource
	informer EventSource
}

// EventSource is an informer of objects the loop keeps no cache of but
// whose changes can make pods schedulable, such as a plugin's custom
// resource. A client-go or controller-runtime informer is one. Whoever
// passes it in (WithEventSource) runs it; readiness waits for it to sync.
type EventSource interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	HasSynced() bool
}

// newStorageInformers asks f for the informers of the objects the volume
// plugins (VolumeBinding, VolumeZone, NodeVolumeLimits, VolumeRestrictions)
// read, so that their listers and the queue's events come from one watch.
//
// Upstream installs a handler only for the resources and actions that some
// plugin of its fixed profiles registered. Profiles here come and go at
// runtime, and a handler added later would first replay the whole store as
// Adds; so all seven are watched from the start, for every action. The
// cost is one informer per kind and, per change, a queue lookup that
// returns at once when no served profile registered the event.
func newStorageInformers(f informers.SharedInformerFactory) []resourceInformer {
	core, storage := f.Core().V1(), f.Storage().V1()
	return []resourceInformer{
		{framework.PersistentVolume, core.PersistentVolumes().Informer()},
		{framework.PersistentVolumeClaim, core.PersistentVolumeClaims().Informer()},
		{framework.StorageClass, storage.StorageClasses().Informer()},
		{framework.CSINode, storage.CSINodes().Informer()},
		{framework.CSIDriver, storage.CSIDrivers().Informer()},
		{framework.CSIStorageCapacity, storage.CSIStorageCapacities().Informer()},
		{framework.VolumeAttachment, storage.VolumeAttachments().Informer()},
	}
}

// newDRASources builds the scheduler's DRA manager and the sources of the
// queue's DRA events, as upstream's scheduler does: ResourceClaim events
// come from the claim assume cache, ResourceSlice events from the
// ResourceSlice tracker (DeviceTaintRules applied), DeviceClass events
// from the extended resource cache, once it has applied them.
func newDRASources(ctx context.Context, client clientset.Interface, f informers.SharedInformerFactory) ([]resourceInformer, *dynamicresources.Manager, error) {
	manager, err := dynamicresources.NewManager(klog.NewContext(ctx, klog.FromContext(ctx).WithName("dra")), client, f)
	if err != nil {
		return nil, nil, err
	}
	return []resourceInformer{
		{framework.ResourceClaim, manager.ClaimEvents()},
		{framework.ResourceSlice, manager.SliceEvents()},
		{framework.DeviceClass, manager.DeviceClassEvents()},
	}, manager, nil
}

// clusterEventHandler reports every change of resource to the queue, as
// upstream does: Add with the new object only, Update with both, Delete
// with the last known object only. No update is skipped, as upstream
// skips none for these kinds (with queueing hints, locked on since 1.34,
// even a StorageClass Add is reported whatever its binding mode): the
// plugins' hints tell which changes matter. A deletion the watch missed
// arrives as a tombstone; hints get the object inside it.
func (s *Scheduler) clusterEventHandler(resource framework.EventResource) cache.ResourceEventHandlerFuncs {
	add := framework.ClusterEvent{Resource: resource, ActionType: framework.Add}
	update := framework.ClusterEvent{Resource: resource, ActionType: framework.Update}
	del := framework.ClusterEvent{Resource: resource, ActionType: framework.Delete}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.queue.MoveAllToActiveOrBackoffQueue(s.logger, add, nil, obj, nil)
		},
		UpdateFunc: func(oldObj, newObj any) {
			s.queue.MoveAllToActiveOrBackoffQueue(s.logger, update, oldObj, newObj, nil)
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			s.queue.MoveAllToActiveOrBackoffQueue(s.logger, del, obj, nil, nil)
		},
	}
}

func assignedPod(pod *v1.Pod) bool { return pod.Spec.NodeName != "" }

func terminalPod(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// responsibleForPod reports whether a profile of this scheduler serves pod.
func (s *Scheduler) responsibleForPod(pod *v1.Pod) bool {
	return s.queue.HasProfile(pod.Spec.SchedulerName)
}

func (s *Scheduler) addNode(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		s.logger.Error(nil, "Cannot convert to *v1.Node", "obj", obj)
		return
	}
	s.logger.V(3).Info("Add event for node", "node", klog.KObj(node))
	s.cache.AddNode(s.logger, node)
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventNodeAdd, nil, node, nil)
}

func (s *Scheduler) updateNode(oldObj, newObj any) {
	oldNode, ok := oldObj.(*v1.Node)
	if !ok {
		s.logger.Error(nil, "Cannot convert oldObj to *v1.Node", "oldObj", oldObj)
		return
	}
	newNode, ok := newObj.(*v1.Node)
	if !ok {
		s.logger.Error(nil, "Cannot convert newObj to *v1.Node", "newObj", newObj)
		return
	}
	s.logger.V(4).Info("Update event for node", "node", klog.KObj(newNode))
	s.cache.UpdateNode(s.logger, oldNode, newNode)
	for _, evt := range queue.NodeSchedulingPropertiesChange(newNode, oldNode) {
		s.queue.MoveAllToActiveOrBackoffQueue(s.logger, evt, oldNode, newNode, nil)
	}
}

func (s *Scheduler) deleteNode(obj any) {
	var node *v1.Node
	switch t := obj.(type) {
	case *v1.Node:
		node = t
	case cache.DeletedFinalStateUnknown:
		var ok bool
		if node, ok = t.Obj.(*v1.Node); !ok {
			s.logger.Error(nil, "Cannot convert to *v1.Node", "obj", t.Obj)
			return
		}
	default:
		s.logger.Error(nil, "Cannot convert to *v1.Node", "obj", t)
		return
	}
	s.logger.V(3).Info("Delete event for node", "node", klog.KObj(node))
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventNodeDelete, node, nil, nil)
	if err := s.cache.RemoveNode(s.logger, node); err != nil {
		s.logger.Error(err, "Removing a node from the scheduler cache", "node", klog.KObj(node))
	}
}

func (s *Scheduler) addPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		s.logger.Error(nil, "Cannot convert to *v1.Pod", "obj", obj)
		return
	}
	s.unserved.add(pod)
	if assignedPod(pod) {
		s.addAssignedPodToCache(pod)
	} else if s.responsibleForPod(pod) {
		s.logger.V(3).Info("Add event for unscheduled pod", "pod", klog.KObj(pod))
		s.cache.AddPodGroupMember(pod)
		s.queue.Add(s.logger, pod)
		if s.workloadGates.GenericWorkload {
			// A new member may complete a gang whose pods wait for it.
			s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventUnscheduledPodAdd, nil, pod, nil)
		}
	}
}

func (s *Scheduler) updatePod(oldObj, newObj any) {
	oldPod, ok := oldObj.(*v1.Pod)
	if !ok {
		s.logger.Error(nil, "Cannot convert oldObj to *v1.Pod", "oldObj", oldObj)
		return
	}
	newPod, ok := newObj.(*v1.Pod)
	if !ok {
		s.logger.Error(nil, "Cannot convert newObj to *v1.Pod", "newObj", newObj)
		return
	}
	s.unserved.update(oldPod, newPod)
	switch {
	case assignedPod(oldPod) && terminalPod(newPod):
		// Only reached with an informer that keeps terminal pods.
		s.deleteAssignedPodFromCache(newPod)
	case assignedPod(oldPod):
		s.updateAssignedPodInCache(oldPod, newPod)
	case assignedPod(newPod):
		// The binding arrived: this confirms an assumed pod.
		s.addAssignedPodToCache(newPod)
		if s.responsibleForPod(oldPod) {
			s.queue.Delete(s.logger, oldPod)
		}
		// A placement, whoever made it: after the cache counts the pod,
		// which the shadows' snapshots then take out again.
		s.observePlacement(newPod)
	case s.responsibleForPod(oldPod):
		s.updatePodInSchedulingQueue(oldPod, newPod)
	}
}

func (s *Scheduler) deletePod(obj any) {
	var pod *v1.Pod
	switch t := obj.(type) {
	case *v1.Pod:
		pod = t
	case cache.DeletedFinalStateUnknown:
		var ok bool
		if pod, ok = t.Obj.(*v1.Pod); !ok {
			s.logger.Error(nil, "Cannot convert to *v1.Pod", "obj", t.Obj)
			return
		}
	default:
		s.logger.Error(nil, "Cannot convert to *v1.Pod", "obj", t)
		return
	}
	s.unserved.remove(pod)
	if assignedPod(pod) {
		s.deleteAssignedPodFromCache(pod)
	} else if s.responsibleForPod(pod) {
		s.deletePodFromSchedulingQueue(pod)
	}
}

func (s *Scheduler) updatePodInSchedulingQueue(oldPod, newPod *v1.Pod) {
	// Resyncs and duplicate deliveries carry no change.
	if oldPod.ResourceVersion == newPod.ResourceVersion {
		return
	}
	s.cache.UpdatePodGroupMember(s.logger, oldPod, newPod)
	if s.cache.IsAssumedPod(newPod) {
		// Being bound; if it is being deleted, give its room back now.
		if newPod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
			s.handleAssumedPodDeletion(newPod)
		}
		return
	}
	s.logger.V(4).Info("Update event for unscheduled pod", "pod", klog.KObj(newPod))
	s.queue.Update(s.logger, oldPod, newPod)
	if nnn := oldPod.Status.NominatedNodeName; nnn != "" && nnn != newPod.Status.NominatedNodeName {
		// The room promised to this pod is free again for pods it outranked.
		s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventAssignedPodDelete, oldPod, nil, lowerOrEqualPriority(oldPod))
	}
}

func (s *Scheduler) deletePodFromSchedulingQueue(pod *v1.Pod) {
	s.logger.V(3).Info("Delete event for unscheduled pod", "pod", klog.KObj(pod))
	s.queue.Delete(s.logger, pod)
	if s.cache.IsAssumedPod(pod) {
		s.handleAssumedPodDeletion(pod)
		// A waiting pod rejected above is forgotten later by its binding
		// cycle, which would leave it in its pod group as unscheduled
		// (upstream does): it leaves now, and the forget finds nothing.
		s.cache.RemovePodGroupMember(pod)
		return
	}
	s.cache.RemovePodGroupMember(pod)
	if pod.Status.NominatedNodeName != "" {
		s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventAssignedPodDelete, pod, nil, lowerOrEqualPriority(pod))
	}
}

// handleAssumedPodDeletion releases the room of a pod deleted while it was
// being bound. A pod waiting at Permit is rejected, and its binding
// goroutine cleans up; otherwise the assumed pod is forgotten here.
func (s *Scheduler) handleAssumedPodDeletion(pod *v1.Pod) {
	assumed, err := s.cache.GetPod(pod)
	if err != nil {
		s.logger.V(5).Info("Assumed pod was already forgotten", "pod", klog.KObj(pod))
		return
	}
	if wp, _ := s.profiles.GetWaitingPod(pod.UID); wp == nil || !wp.Reject("", "pod was deleted") {
		// Deleted, it also leaves its pod group, unlike a forgotten pod.
		if err := s.cache.RemoveAssumedPod(s.logger, assumed); err != nil {
			s.logger.Error(err, "Forgetting a deleted assumed pod", "pod", klog.KObj(pod))
		}
	}
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventAssignedPodDelete, assumed, nil, nil)
}

func lowerOrEqualPriority(pod *v1.Pod) queue.PreEnqueueCheck {
	prio := corev1helpers.PodPriority(pod)
	return func(p *v1.Pod) bool { return corev1helpers.PodPriority(p) <= prio }
}

func (s *Scheduler) addAssignedPodToCache(pod *v1.Pod) {
	s.logger.V(3).Info("Add event for scheduled pod", "pod", klog.KObj(pod))
	if err := s.cache.AddPod(s.logger, pod); err != nil {
		s.logger.Error(err, "Adding a pod to the scheduler cache", "pod", klog.KObj(pod))
	}
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventAssignedPodAdd, nil, pod, nil)
}

func (s *Scheduler) updateAssignedPodInCache(oldPod, newPod *v1.Pod) {
	s.logger.V(4).Info("Update event for scheduled pod", "pod", klog.KObj(oldPod))
	if err := s.cache.UpdatePod(s.logger, oldPod, newPod); err != nil {
		s.logger.Error(err, "Updating a pod in the scheduler cache", "pod", klog.KObj(oldPod))
	}
	for _, evt := range queue.PodSchedulingPropertiesChange(newPod, oldPod, false) {
		s.queue.MoveAllToActiveOrBackoffQueue(s.logger, evt, oldPod, newPod, nil)
	}
}

func (s *Scheduler) deleteAssignedPodFromCache(pod *v1.Pod) {
	s.logger.V(3).Info("Delete event for scheduled pod", "pod", klog.KObj(pod))
	if _, err := s.cache.GetPod(pod); err != nil {
		// Already released (e.g. it turned terminal before it was deleted).
		return
	}
	if err := s.cache.RemovePod(s.logger, pod); err != nil {
		s.logger.Error(err, "Removing a pod from the scheduler cache", "pod", klog.KObj(pod))
	}
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, queue.EventAssignedPodDelete, pod, nil, nil)
}
