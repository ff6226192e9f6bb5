package queue

import "github.com/prometheus/client_golang/prometheus"

// Queue label values of PendingPods, as upstream.
const (
	activeQ        = "active"
	backoffQ       = "backoff"
	unschedulableQ = "unschedulable"
	gatedQ         = "gated"
)

// PendingPods is upstream's scheduler_pending_pods. The queue sets it
// whether or not it is registered; the scheduler registers it.
var PendingPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Subsystem: "scheduler",
	Name:      "pending_pods",
	Help: "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; " +
		"'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods " +
		"that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods " +
		"that the scheduler never attempted to schedule because they are gated.",
}, []string{"queue"})
