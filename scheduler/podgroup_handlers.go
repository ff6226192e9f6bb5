package scheduler

import (
	"context"
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

// StartPodGroupInformer starts the scheduling.k8s.io/v1beta1 PodGroup
// informer, with its handlers feeding the cache and the queue as upstream's
// do with GenericWorkload on, and the Workload informer (which upstream's
// scheduler does not have: see workload_handlers.go), and waits until they
// have seen every existing PodGroup and Workload. It is not started with the other informers: on an API server
// that does not serve PodGroups it would never sync, and nothing that waits
// for the informers (the scheduling loop, profile builds, readiness) may
// wait for it. The caller calls it once discovery says the API server
// serves PodGroups, before building a workload-aware profile; later calls
// only wait for the sync. Without GenericWorkload it does nothing.
func (s *Scheduler) StartPodGroupInformer(ctx context.Context) error {
	if !s.workloadGates.GenericWorkload {
		return nil
	}
	informer := s.informerFactory.Scheduling().V1beta1().PodGroups().Informer()
	s.mu.Lock()
	workloadReg, err := s.startWorkloadInformer()
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if s.podGroupHandler == nil {
		reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    s.addPodGroup,
			UpdateFunc: s.updatePodGroup,
			DeleteFunc: s.deletePodGroup,
		})
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("adding the pod group event handler: %w", err)
		}
		s.podGroupHandler = reg
	}
	reg, informerCtx := s.podGroupHandler, s.informerCtx
	s.mu.Unlock()
	if informerCtx == nil {
		// startInformers starts it with the others, and waitForInformers
		// waits for it.
		return nil
	}
	s.informerFactory.Start(informerCtx.Done())
	waitCtx, cancel := context.WithTimeout(ctx, informerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), informer.HasSynced, reg.HasSynced) {
		return fmt.Errorf("the PodGroup informer did not sync within %v (may the operator list and watch podgroups.scheduling.k8s.io?)", informerSyncTimeout)
	}
	if !cache.WaitForCacheSync(waitCtx.Done(), workloadReg.HasSynced) {
		return fmt.Errorf("the Workload informer did not sync within %v (may the operator list and watch workloads.scheduling.k8s.io?)", informerSyncTimeout)
	}
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
	s.checkWorkloadRef(pg)
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
