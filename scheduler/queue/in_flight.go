package queue

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// inFlightEvent is an event seen while pods were being scheduled.
type inFlightEvent struct {
	event          framework.ClusterEvent
	oldObj, newObj any
}

// Done ends the flight of the pod with uid: events after this no longer
// concern it. Calling it for a pod not in flight is a no-op.
func (p *PriorityQueue) Done(uid types.UID) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.done(uid)
}

func (p *PriorityQueue) done(uid types.UID) {
	e, ok := p.inFlightPods[uid]
	if !ok {
		return
	}
	delete(p.inFlightPods, uid)
	p.inFlightEvents.Remove(e)
	// Events older than the oldest pod still in flight concern nobody.
	for front := p.inFlightEvents.Front(); front != nil; front = p.inFlightEvents.Front() {
		if _, isPod := front.Value.(*v1.Pod); isPod {
			break
		}
		p.inFlightEvents.Remove(front)
	}
}

// determineSchedulingHintForInFlightPod replays the events seen while the
// pod was in flight against its rejecting plugins.
func (p *PriorityQueue) determineSchedulingHintForInFlightPod(logger klog.Logger, pInfo *framework.QueuedPodInfo) queueingStrategy {
	if pInfo.UnschedulablePlugins.Len() == 0 && pInfo.PendingPlugins.Len() == 0 {
		// No plugin rejected it: an error (an API call failed, ...). Retry
		// after backoff rather than wait for an event that may never come.
		return queueAfterBackoff
	}
	e, ok := p.inFlightPods[pInfo.Pod.UID]
	if !ok {
		logger.Error(nil, "Pod handed back to the queue was not in flight", "pod", klog.KObj(pInfo.Pod))
		return queueAfterBackoff
	}
	strategy := queueSkip
	for e = e.Next(); e != nil; e = e.Next() {
		ev, ok := e.Value.(*inFlightEvent)
		if !ok {
			continue
		}
		switch p.isPodWorthRequeuing(logger, pInfo, ev.event, ev.oldObj, ev.newObj) {
		case queueImmediately:
			return queueImmediately
		case queueAfterBackoff:
			strategy = queueAfterBackoff
			if pInfo.PendingPlugins.Len() == 0 {
				// Only a Pending plugin could make it queueImmediately.
				return queueAfterBackoff
			}
		}
	}
	return strategy
}
