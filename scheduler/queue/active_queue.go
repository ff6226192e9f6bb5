package queue

import (
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// moveToActiveQ puts e in its profile's active queue if no PreEnqueue
// plugin holds it (or, for a group, any of its pods), and in the
// unschedulable pool otherwise. It reports whether e became active. The
// caller holds the lock.
func (p *PriorityQueue) moveToActiveQ(logger klog.Logger, e framework.QueuedEntityInfo, event string) bool {
	key := keyOf(e)
	pq := p.profiles[profileOf(e)]
	if pq == nil {
		// The profile went away; its pods return with it.
		p.deleteUnschedulable(key)
		p.backoffQ.delete(key)
		return false
	}
	p.runPreEnqueuePlugins(logger, pq, e)
	if e.Gated() {
		if pq.activeQ.has(key) || p.backoffQ.has(key) {
			return false
		}
		if _, ok := p.unschedulable[key]; !ok {
			logger.V(5).Info("Entity moved to an internal scheduling queue, because it is gated", "type", e.Type(), "entity", klog.KObj(e), "event", event, "queue", unschedulableQ)
		}
		// Re-added even when already there: its gate may have changed
		// how it is counted.
		p.addUnschedulable(e)
		return false
	}
	// Time spent gated does not count towards the scheduling latency.
	setInitialAttemptTimestamp(e, p.clock.Now())
	p.deleteUnschedulable(key)
	p.backoffQ.delete(key)
	pq.activeQ.addOrUpdate(e)
	// Guarded: every pod passes here, and the arguments allocate even
	// when V(5) is off.
	if v := logger.V(5); v.Enabled() {
		v.Info("Entity moved to an internal scheduling queue", "type", e.Type(), "entity", klog.KObj(e), "event", event, "queue", activeQ)
	}
	if pInfo, ok := e.(*framework.QueuedPodInfo); ok && (event == EventUnscheduledPodAdd.Label() || event == EventUnscheduledPodUpdate.Label()) {
		p.nominator.add(logger, pInfo.PodInfo, nil)
	}
	return true
}

// Pop blocks until an entity is active in some profile and returns it,
// serving the profiles round-robin: a *framework.QueuedPodInfo, or a
// *framework.QueuedPodGroupInfo for a pod group of a workload-aware
// profile. Each pod popped is in flight until Done or
// AddUnschedulableIfNotPresent; a group's attempt ends with
// AddAttemptedPodGroupIfNeeded. It returns ErrClosed once the queue is
// closed.
func (p *PriorityQueue) Pop(logger klog.Logger) (framework.QueuedEntityInfo, error) {
	p.lock.Lock()
	defer p.lock.Unlock()
	for {
		for p.activeEntities() == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			return nil, ErrClosed
		}
		var e framework.QueuedEntityInfo
		for i := range p.ring {
			idx := (p.next + i) % len(p.ring)
			if pq := p.ring[idx]; pq.activeQ.len() > 0 {
				e = pq.activeQ.pop()
				p.next = (idx + 1) % len(p.ring)
				break
			}
		}
		if p.moveToInFlight(logger, e) {
			p.schedulingCycle++
			p.lastPopped = keyOf(e)
			p.updateMetrics()
			return e, nil
		}
	}
}

// moveToInFlight counts the attempt and marks e's pods in flight. A group
// member already in flight (tracked twice, a bug) is dropped from the
// group, as upstream does; a group left empty is discarded and false
// returned.
func (p *PriorityQueue) moveToInFlight(logger klog.Logger, e framework.QueuedEntityInfo) bool {
	g, ok := e.(*framework.QueuedPodGroupInfo)
	if !ok {
		pInfo := e.(*framework.QueuedPodInfo)
		pInfo.Attempts++
		p.inFlightPods[pInfo.Pod.UID] = p.inFlightEvents.PushBack(pInfo.Pod)
		return true
	}
	g.IncAttempts()
	var discard []*framework.QueuedPodInfo
	g.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		if _, ok := p.inFlightPods[pInfo.Pod.UID]; ok {
			discard = append(discard, pInfo)
			return true
		}
		p.inFlightPods[pInfo.Pod.UID] = p.inFlightEvents.PushBack(pInfo.Pod)
		return true
	})
	for _, pInfo := range discard {
		g.RemovePod(pInfo.Pod)
		logger.Error(nil, "Discarding the popped pod group member. It's tracked in multiple places in the scheduler", "pod", klog.KObj(pInfo.Pod), "podGroup", klog.KObj(g))
	}
	if !g.HasQueuedPodInfos() {
		logger.Error(nil, "Discarding the popped entity: all pods from the pod group are tracked in multiple places in the scheduler", "type", g.Type(), "entity", klog.KObj(g))
		return false
	}
	return true
}

// activeEntities counts the entities over all active queues.
func (p *PriorityQueue) activeEntities() int {
	n := 0
	for _, pq := range p.ring {
		n += pq.activeQ.len()
	}
	return n
}
