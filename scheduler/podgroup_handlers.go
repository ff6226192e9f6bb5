package scheduler

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Cluster events of PodGroups, as upstream reports them.
var (
	eventPodGroupAdd    = framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Add}
	eventPodGroupUpdate = framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Update}
	eventPodGroupDelete = framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Delete}
)

// addPodGroupHandlers connects the scheduling.k8s.io/v1beta1 PodGroup
// informer to the cache and the queue, with GenericWorkload on, as
// upstream does with the gate on.
func (s *Scheduler) addPodGroupHandlers() error {
	if s.podGroupInformer == nil {
		return nil
	}
	reg, err := s.podGroupInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.addPodGroup,
		UpdateFunc: s.updatePodGroup,
		DeleteFunc: s.deletePodGroup,
	})
	if err != nil {
		return fmt.Errorf("adding the pod group event handler: %w", err)
	}
	s.handlers = append(s.handlers, reg)
	return nil
}

func (s *Scheduler) addPodGroup(obj any) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		s.logger.Error(nil, "Cannot convert to *v1beta1.PodGroup", "obj", obj)
		return
	}
	s.logger.V(3).Info("Add event for pod group", "podGroup", klog.KObj(pg))
	s.cache.AddPodGroup(pg)
	// Its members waiting for it are queued as one entity.
	s.queue.AddPodGroup(s.logger, pg)
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, eventPodGroupAdd, nil, pg, nil)
}

func (s *Scheduler) updatePodGroup(oldObj, newObj any) {
	oldPG, ok := oldObj.(*schedulingv1beta1.PodGroup)
	if !ok {
		s.logger.Error(nil, "Cannot convert oldObj to *v1beta1.PodGroup", "oldObj", oldObj)
		return
	}
	newPG, ok := newObj.(*schedulingv1beta1.PodGroup)
	if !ok {
		s.logger.Error(nil, "Cannot convert newObj to *v1beta1.PodGroup", "newObj", newObj)
		return
	}
	// Resyncs and duplicate deliveries carry no change.
	if oldPG.ResourceVersion == newPG.ResourceVersion {
		return
	}
	s.logger.V(4).Info("Update event for pod group", "podGroup", klog.KObj(newPG))
	s.cache.UpdatePodGroup(s.logger, oldPG, newPG)
	s.queue.UpdatePodGroup(s.logger, newPG)
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, eventPodGroupUpdate, oldPG, newPG, nil)
}

func (s *Scheduler) deletePodGroup(obj any) {
	var pg *schedulingv1beta1.PodGroup
	switch t := obj.(type) {
	case *schedulingv1beta1.PodGroup:
		pg = t
	case cache.DeletedFinalStateUnknown:
		var ok bool
		if pg, ok = t.Obj.(*schedulingv1beta1.PodGroup); !ok {
			s.logger.Error(nil, "Cannot convert to *v1beta1.PodGroup", "obj", t.Obj)
			return
		}
	default:
		s.logger.Error(nil, "Cannot convert to *v1beta1.PodGroup", "obj", t)
		return
	}
	s.logger.V(3).Info("Delete event for pod group", "podGroup", klog.KObj(pg))
	s.cache.RemovePodGroup(s.logger, pg)
	s.queue.DeletePodGroup(s.logger, pg)
	s.queue.MoveAllToActiveOrBackoffQueue(s.logger, eventPodGroupDelete, pg, nil, nil)
}
