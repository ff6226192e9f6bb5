package queue

import (
	"time"

	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// moveToBackoffQ puts pInfo in the backoff queue. The caller holds the lock.
func (p *PriorityQueue) moveToBackoffQ(logger klog.Logger, pInfo *framework.QueuedPodInfo, event string) {
	p.deleteUnschedulable(pInfo.Pod.UID)
	p.backoffQ.addOrUpdate(pInfo)
	logger.V(5).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", backoffQ)
}

// backoffDuration is 1 s after the first attempt, doubling per attempt up
// to the maximum; a pod never tried has none.
func (p *PriorityQueue) backoffDuration(pInfo *framework.QueuedPodInfo) time.Duration {
	if pInfo.Attempts == 0 {
		return 0
	}
	d := p.podInitialBackoff
	for i := 1; i < pInfo.Attempts; i++ {
		// Compare before doubling so a large attempt count cannot overflow.
		if d > p.podMaxBackoff-d {
			return p.podMaxBackoff
		}
		d += d
	}
	return min(d, p.podMaxBackoff)
}

func (p *PriorityQueue) isPodBackingOff(pInfo *framework.QueuedPodInfo) bool {
	return pInfo.BackoffExpiration.After(p.clock.Now())
}

// flushBackoffQCompleted moves the pods whose backoff ended to the active queue.
func (p *PriorityQueue) flushBackoffQCompleted(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	activated := false
	for {
		pInfo := p.backoffQ.peek()
		if pInfo == nil || p.isPodBackingOff(pInfo) {
			break
		}
		p.backoffQ.pop()
		if p.moveToActiveQ(logger, pInfo, BackoffComplete) {
			activated = true
		}
	}
	if activated {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}
