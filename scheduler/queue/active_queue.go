package queue

import (
	"fmt"

	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// moveToActiveQ puts pInfo in its profile's active queue if no PreEnqueue
// plugin holds it, and in the unschedulable pool otherwise. It reports
// whether the pod became active. The caller holds the lock.
func (p *PriorityQueue) moveToActiveQ(logger klog.Logger, pInfo *framework.QueuedPodInfo, event string) bool {
	pq := p.profiles[pInfo.Pod.Spec.SchedulerName]
	if pq == nil {
		// The profile went away; the pod returns with it.
		p.deleteUnschedulable(pInfo.Pod.UID)
		p.backoffQ.delete(pInfo.Pod.UID)
		return false
	}
	p.runPreEnqueuePlugins(logger, pq, pInfo)
	if pInfo.Gated() {
		if pq.activeQ.has(pInfo.Pod.UID) || p.backoffQ.has(pInfo.Pod.UID) {
			return false
		}
		if _, ok := p.unschedulable[pInfo.Pod.UID]; !ok {
			p.addUnschedulable(pInfo)
			logger.V(5).Info("Pod moved to an internal scheduling queue, because the pod is gated", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", unschedulableQ)
		}
		return false
	}
	if pInfo.InitialAttemptTimestamp == nil {
		// Time spent gated does not count towards the scheduling latency.
		now := p.clock.Now()
		pInfo.InitialAttemptTimestamp = &now
	}
	p.deleteUnschedulable(pInfo.Pod.UID)
	p.backoffQ.delete(pInfo.Pod.UID)
	if !pq.activeQ.has(pInfo.Pod.UID) {
		p.activeCount++
	}
	pq.activeQ.addOrUpdate(pInfo)
	logger.V(5).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", activeQ)
	if event == EventUnscheduledPodAdd.Label() || event == EventUnscheduledPodUpdate.Label() {
		p.nominator.add(logger, pInfo.PodInfo, nil)
	}
	return true
}

// Pop blocks until a pod is active in some profile and returns it, serving
// the profiles round-robin. The pod is in flight until Done or
// AddUnschedulableIfNotPresent. It returns ErrClosed once the queue is closed.
func (p *PriorityQueue) Pop(logger klog.Logger) (*framework.QueuedPodInfo, error) {
	p.lock.Lock()
	defer p.lock.Unlock()
	for p.activeCount == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return nil, ErrClosed
	}
	var pInfo *framework.QueuedPodInfo
	for i := range p.ring {
		idx := (p.next + i) % len(p.ring)
		if pq := p.ring[idx]; pq.activeQ.len() > 0 {
			pInfo = pq.activeQ.pop()
			p.next = (idx + 1) % len(p.ring)
			break
		}
	}
	if pInfo == nil {
		// activeCount and the heaps disagree: a bug, but never spin on it.
		logger.Error(nil, "Active pod count is positive but every active queue is empty", "activeCount", p.activeCount)
		p.activeCount = 0
		return nil, fmt.Errorf("scheduling queue is inconsistent")
	}
	p.activeCount--
	pInfo.Attempts++
	p.schedulingCycle++
	p.inFlightPods[pInfo.Pod.UID] = p.inFlightEvents.PushBack(pInfo.Pod)
	p.updateMetrics()
	return pInfo, nil
}
