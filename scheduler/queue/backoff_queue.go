package queue

import (
	"math"
	"time"

	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// moveToBackoffQ puts e in the backoff queue. The caller holds the lock.
func (p *PriorityQueue) moveToBackoffQ(logger klog.Logger, e framework.QueuedEntityInfo, event string) {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		// The heap orders by the expiration it is given.
		p.podGroupBackoffTime(g)
	}
	p.deleteUnschedulable(keyOf(e))
	p.backoffQ.addOrUpdate(e)
	logger.V(5).Info("Entity moved to an internal scheduling queue", "type", e.Type(), "entity", klog.KObj(e), "event", event, "queue", backoffQ)
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

// podGroupBackoffTime returns when g's backoff ends, computing and caching
// it in g.BackoffExpiration on first use as upstream does: from the
// group's own counts (the errors in a row while there are any, else its
// unschedulable attempts), with a maximum grown by the square root of its
// size. A group never rejected, or a queue with backoff disabled, has none.
func (p *PriorityQueue) podGroupBackoffTime(g *framework.QueuedPodGroupInfo) time.Time {
	if p.podMaxBackoff == 0 {
		return time.Time{}
	}
	count := g.UnschedulableCount
	if g.ConsecutiveErrorsCount > 0 {
		count = g.ConsecutiveErrorsCount
	}
	if count == 0 {
		return time.Time{}
	}
	if g.BackoffExpiration.IsZero() {
		g.BackoffExpiration = g.Timestamp.Add(p.calculateBackoffDuration(count, g.Size()))
	}
	return g.BackoffExpiration
}

// calculateBackoffDuration is upstream's backoff for count attempts of an
// entity of entitySize pods: the initial backoff doubled per attempt, up to
// the maximum times the square root of the size (longer for a big group,
// but not by much).
func (p *PriorityQueue) calculateBackoffDuration(count, entitySize int) time.Duration {
	if count == 0 {
		return 0
	}
	maxBackoff := p.podMaxBackoff
	if entitySize > 1 {
		maxBackoff = time.Duration(float64(maxBackoff) * math.Sqrt(float64(entitySize)))
	}
	shift := count - 1
	if p.podInitialBackoff > maxBackoff>>shift {
		return maxBackoff
	}
	return p.podInitialBackoff << shift
}

// isBackingOff reports whether e's backoff has not ended yet.
func (p *PriorityQueue) isBackingOff(e framework.QueuedEntityInfo) bool {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		// As upstream: a group whose backoff ends now still backs off.
		return !p.podGroupBackoffTime(g).Before(p.clock.Now())
	}
	return e.(*framework.QueuedPodInfo).BackoffExpiration.After(p.clock.Now())
}

// flushBackoffQCompleted moves the entities whose backoff ended to the active queue.
func (p *PriorityQueue) flushBackoffQCompleted(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	activated := false
	for {
		e := p.backoffQ.peek()
		if e == nil || p.isBackingOff(e) {
			break
		}
		p.backoffQ.pop()
		if p.moveToActiveQ(logger, e, BackoffComplete) {
			activated = true
		}
	}
	if activated {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}
