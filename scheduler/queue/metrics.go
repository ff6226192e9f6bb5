package queue

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// Queue label values of scheduler_pending_pods, as upstream.
const (
	activeQ        = "active"
	backoffQ       = "backoff"
	unschedulableQ = "unschedulable"
	gatedQ         = "gated"
)

// pendingGauges are the series of scheduler_pending_pods, resolved once:
// the queue sets them on every change.
type pendingGauges struct {
	active, backoff, unschedulable, gated prometheus.Gauge
}

func newPendingGauges(m *metrics.Metrics) pendingGauges {
	return pendingGauges{
		active:        m.PendingPods.WithLabelValues(activeQ),
		backoff:       m.PendingPods.WithLabelValues(backoffQ),
		unschedulable: m.PendingPods.WithLabelValues(unschedulableQ),
		gated:         m.PendingPods.WithLabelValues(gatedQ),
	}
}

// updateMetrics sets the pending-pods gauges; the caller holds the lock.
func (p *PriorityQueue) updateMetrics() {
	p.pending.active.Set(float64(p.activePods()))
	p.pending.backoff.Set(float64(p.backoffQ.pods))
	p.pending.unschedulable.Set(float64(p.unschedulablePods))
	p.pending.gated.Set(float64(p.gatedPods))
}
