package queue

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// queueingStrategy is where an event sends a pod.
type queueingStrategy int

const (
	// queueSkip leaves the pod where it is.
	queueSkip queueingStrategy = iota
	// queueAfterBackoff sends it to the backoff queue, or straight to the
	// active queue if its backoff already ended.
	queueAfterBackoff
	// queueImmediately sends it to the active queue (a plugin that returned
	// Pending says the wait is over).
	queueImmediately
)

type pluginHint struct {
	plugin string
	fn     framework.QueueingHintFn
}

// eventHints are the plugins that registered one event, with their hints.
type eventHints struct {
	event framework.ClusterEvent
	hints []pluginHint
}

func queueAlways(klog.Logger, *v1.Pod, any, any) (framework.QueueingHint, error) {
	return framework.Queue, nil
}

// requeueEntityWithQueueingStrategy moves e where strategy says and
// returns the name of the queue it ended in. The caller holds the lock.
func (p *PriorityQueue) requeueEntityWithQueueingStrategy(logger klog.Logger, e framework.QueuedEntityInfo, strategy queueingStrategy, event string) string {
	if strategy == queueSkip {
		p.addUnschedulable(e)
		return unschedulableQ
	}
	if strategy == queueAfterBackoff && p.isBackingOff(e) {
		p.moveToBackoffQ(logger, e, event)
		return backoffQ
	}
	if p.moveToActiveQ(logger, e, event) {
		return activeQ
	}
	return unschedulableQ
}

// isEntityWorthRequeuing is isPodWorthRequeuing for each pod of e: a group
// is worth requeuing as soon as one of its pods is, with the strongest
// strategy any of them gets.
func (p *PriorityQueue) isEntityWorthRequeuing(logger klog.Logger, e framework.QueuedEntityInfo, event framework.ClusterEvent, oldObj, newObj any) queueingStrategy {
	if pInfo, ok := e.(*framework.QueuedPodInfo); ok {
		// The common case, without a closure per pod and event.
		return p.isPodWorthRequeuing(logger, pInfo, event, oldObj, newObj)
	}
	best := queueSkip
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		best = max(best, p.isPodWorthRequeuing(logger, pInfo, event, oldObj, newObj))
		return best != queueImmediately
	})
	return best
}

// isPodWorthRequeuing asks the queueing hints of the plugins that rejected
// the pod whether event may make it schedulable. The caller holds the lock.
func (p *PriorityQueue) isPodWorthRequeuing(logger klog.Logger, pInfo *framework.QueuedPodInfo, event framework.ClusterEvent, oldObj, newObj any) queueingStrategy {
	// Every event is offered to every pod in the pool: avoid building a
	// union when, as usual, no plugin returned Pending.
	rejectors := pInfo.UnschedulablePlugins
	if pInfo.PendingPlugins.Len() > 0 {
		rejectors = rejectors.Union(pInfo.PendingPlugins)
	}
	if rejectors.Len() == 0 {
		logger.V(6).Info("Worth requeuing because no failed plugins", "pod", klog.KObj(pInfo.Pod))
		return queueAfterBackoff
	}
	if event.IsWildCard() {
		// A wildcard event carrying a pod targets that pod only.
		if newObj != nil {
			if pod, ok := newObj.(*v1.Pod); !ok || pod.UID != pInfo.Pod.UID {
				return queueSkip
			}
		}
		return queueAfterBackoff
	}
	pq := p.profiles[pInfo.Pod.Spec.SchedulerName]
	if pq == nil {
		return queueSkip
	}
	strategy := queueSkip
	for _, eh := range pq.hints {
		if !eh.event.Match(event) {
			continue
		}
		for _, h := range eh.hints {
			if !rejectors.Has(h.plugin) {
				continue
			}
			hint, err := h.fn(logger, pInfo.Pod, oldObj, newObj)
			if err != nil {
				// A failing hint must not strand the pod.
				logger.Error(err, "QueueingHintFn returned an error", "event", event.Label(), "plugin", h.plugin, "pod", klog.KObj(pInfo.Pod))
				hint = framework.Queue
			}
			if hint == framework.QueueSkip {
				continue
			}
			if pInfo.PendingPlugins.Has(h.plugin) {
				return queueImmediately
			}
			if pInfo.PendingPlugins.Len() == 0 {
				return queueAfterBackoff
			}
			strategy = queueAfterBackoff
		}
	}
	return strategy
}

// isEventOfInterest reports whether any served profile registered an event
// matching event; others cannot move any pod and are dropped early.
func (p *PriorityQueue) isEventOfInterest(event framework.ClusterEvent) bool {
	if event.IsWildCard() {
		return true
	}
	for _, pq := range p.ring {
		if pq.interestedIn(event) {
			return true
		}
	}
	return false
}

// MoveAllToActiveOrBackoffQueue offers event to every entity in the
// unschedulable pool with a pod that passes preCheck (nil: all). Entities
// whose rejecting plugins' hints say the event may help move to the backoff
// or active queue. The event is also recorded for pods in flight.
func (p *PriorityQueue) MoveAllToActiveOrBackoffQueue(logger klog.Logger, event framework.ClusterEvent, oldObj, newObj any, preCheck PreEnqueueCheck) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if !p.isEventOfInterest(event) {
		return
	}
	entities := make([]framework.QueuedEntityInfo, 0, len(p.unschedulable))
	for _, u := range p.unschedulable {
		if preCheck == nil || anyPod(u.entity, preCheck) {
			entities = append(entities, u.entity)
		}
	}
	p.moveEntitiesToActiveOrBackoffQueue(logger, entities, event, oldObj, newObj)
	p.updateMetrics()
}

func (p *PriorityQueue) moveEntitiesToActiveOrBackoffQueue(logger klog.Logger, entities []framework.QueuedEntityInfo, event framework.ClusterEvent, oldObj, newObj any) {
	activated := false
	for _, e := range entities {
		// A gated entity is only worth a PreEnqueue run on its gating plugin's events.
		if e.Gated() && !slices.ContainsFunc(gatingPluginEvents(e), func(ce framework.ClusterEvent) bool { return ce.Match(event) }) {
			continue
		}
		strategy := p.isEntityWorthRequeuing(logger, e, event, oldObj, newObj)
		if strategy == queueSkip {
			// Guarded: this runs for every unschedulable entity on every
			// event, and the arguments allocate even when V(5) is off.
			if v := logger.V(5); v.Enabled() {
				v.Info("Event is not making entity schedulable", "type", e.Type(), "entity", klog.KObj(e), "event", event.Label())
			}
			continue
		}
		p.deleteUnschedulable(keyOf(e))
		if p.requeueEntityWithQueueingStrategy(logger, e, strategy, event.Label()) == activeQ {
			activated = true
		}
	}
	if len(p.inFlightPods) > 0 {
		p.inFlightEvents.PushBack(&inFlightEvent{event: event, oldObj: oldObj, newObj: newObj})
	}
	if activated {
		p.cond.Broadcast()
	}
}
