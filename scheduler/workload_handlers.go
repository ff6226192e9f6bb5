package scheduler

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
)

// Reasons of the events the scheduler records on PodGroups about their
// Workload. Upstream's scheduler does not read Workloads: these are the
// operator's own, and change nothing upstream schedules.
const (
	// ReasonWorkloadNotFound: the PodGroup's spec.workloadRef names a
	// Workload that does not exist. The group is scheduled all the same,
	// as kube-scheduler 1.37.2 does.
	ReasonWorkloadNotFound = "WorkloadNotFound"
	// ReasonWorkloadDeleted: the Workload was deleted while members of the
	// PodGroup were held at Permit, which released them.
	ReasonWorkloadDeleted = "WorkloadDeleted"
)

// workloadEventSource reports the events on PodGroups about their
// Workload: the operator's, not a profile's.
const workloadEventSource = "profile-scheduler"

// workloadRefGrace is how long a PodGroup naming a Workload the informer
// does not know waits before the Workload is looked up and found missing:
// a Workload and its PodGroups created together reach the two informers in
// any order.
const workloadRefGrace = 2 * time.Second

// startWorkloadInformer registers the handlers of the scheduling.k8s.io
// Workload informer, once: StartPodGroupInformer calls it, so it starts
// only once the API server serves the workload API. Callers hold mu.
func (s *Scheduler) startWorkloadInformer() (cache.ResourceEventHandlerRegistration, error) {
	if s.workloadHandler != nil {
		return s.workloadHandler, nil
	}
	workloads := s.informerFactory.Scheduling().V1beta1().Workloads()
	reg, err := workloads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: s.deleteWorkload})
	if err != nil {
		return nil, fmt.Errorf("adding the workload event handler: %w", err)
	}
	s.workloadHandler = reg
	s.workloadLister = workloads.Lister()
	s.podGroupLister = s.informerFactory.Scheduling().V1beta1().PodGroups().Lister()
	return reg, nil
}

// workloadListers returns the Workload and PodGroup listers, nil until
// StartPodGroupInformer ran. Asking the factory for them earlier would
// register informers that a later factory Start would run against an API
// server that may not serve them.
func (s *Scheduler) workloadListers() (schedulinglisters.WorkloadLister, schedulinglisters.PodGroupLister) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workloadLister, s.podGroupLister
}

// WorkloadGroup returns the scheduling.k8s.io/v1beta1 PodGroup
// namespace/name and the Workload its spec.workloadRef names, as the
// scheduler's informers know them: pg is nil when the PodGroup is not
// known (or the workload API not watched), wl when it names no Workload or
// that Workload does not exist.
func (s *Scheduler) WorkloadGroup(namespace, name string) (pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) {
	workloads, podGroups := s.workloadListers()
	if podGroups == nil {
		return nil, nil
	}
	pg, err := podGroups.PodGroups(namespace).Get(name)
	if err != nil {
		return nil, nil
	}
	if ref := pg.Spec.WorkloadRef; ref != nil {
		wl, _ = workloads.Workloads(namespace).Get(ref.WorkloadName)
	}
	return pg, wl
}

// checkWorkloadRef warns on pg when the Workload its spec.workloadRef
// names does not exist. Upstream schedules such a group as any other, and
// so does the scheduler; the event only tells the PodGroup's author. A
// Workload the informer does not know yet is given workloadRefGrace, then
// asked of the API server, so that one created with the group is not
// reported missing.
func (s *Scheduler) checkWorkloadRef(pg *schedulingv1beta1.PodGroup) {
	ref := pg.Spec.WorkloadRef
	if ref == nil {
		return
	}
	workloads, _ := s.workloadListers()
	if workloads == nil {
		return
	}
	if _, err := workloads.Workloads(pg.Namespace).Get(ref.WorkloadName); err == nil {
		return
	}
	time.AfterFunc(workloadRefGrace, func() {
		if _, err := workloads.Workloads(pg.Namespace).Get(ref.WorkloadName); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := s.client.SchedulingV1beta1().Workloads(pg.Namespace).Get(ctx, ref.WorkloadName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return
		}
		s.workloadRecorder.Eventf(pg, nil, v1.EventTypeWarning, ReasonWorkloadNotFound, "Scheduling",
			"PodGroup %s/%s references Workload %q (template %q), which does not exist in namespace %s; its pods are scheduled without it",
			pg.Namespace, pg.Name, ref.WorkloadName, ref.TemplateName, pg.Namespace)
	})
}

// deleteWorkload releases the members of the deleted Workload's PodGroups
// that GangScheduling holds at Permit: they are rejected back to the
// queue, not bound, and each PodGroup gets an event saying why. Members
// already let go are left to bind: Permit cannot call them back. It runs
// on the informer's goroutine, off the scheduling cycle.
func (s *Scheduler) deleteWorkload(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	wl, ok := obj.(*schedulingv1beta1.Workload)
	if !ok {
		s.logger.Error(nil, "Cannot convert to *v1beta1.Workload", "obj", obj)
		return
	}
	_, podGroups := s.workloadListers()
	pgs, err := podGroups.PodGroups(wl.Namespace).List(labels.Everything())
	if err != nil {
		s.logger.Error(err, "Listing the PodGroups of a deleted Workload", "workload", klog.KObj(wl))
		return
	}
	for _, pg := range pgs {
		if ref := pg.Spec.WorkloadRef; ref == nil || ref.WorkloadName != wl.Name {
			continue
		}
		msg := fmt.Sprintf("Workload %s/%s was deleted while PodGroup %s was held at Permit", wl.Namespace, wl.Name, pg.Name)
		if released := s.releaseHeldMembers(pg, msg); released > 0 {
			s.logger.V(2).Info("Released the held members of a deleted Workload's pod group", "workload", klog.KObj(wl), "podGroup", klog.KObj(pg), "released", released)
			s.workloadRecorder.Eventf(pg, nil, v1.EventTypeWarning, ReasonWorkloadDeleted, "Scheduling",
				"%s: %d held pods released back to the queue", msg, released)
		}
	}
}

// releaseHeldMembers rejects, with msg, the members of pg that
// GangScheduling holds at Permit, and counts them. Only a pod whose own
// scheduling group is pg is a member.
func (s *Scheduler) releaseHeldMembers(pg *schedulingv1beta1.PodGroup, msg string) int {
	state, err := s.cache.PodGroupStates().Get(pg.Namespace, pg.Name)
	if err != nil {
		return 0
	}
	released := 0
	for uid := range state.AssumedPods() {
		wp, _ := s.profiles.GetWaitingPod(uid)
		if wp == nil {
			continue
		}
		if held, _ := wp.HeldBy(gangscheduling.Name); held && wp.Reject(gangscheduling.Name, msg) {
			released++
		}
	}
	return released
}
