package scheduler

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Result label values of the attempt metrics, as upstream.
const (
	scheduledResult     = "scheduled"
	unschedulableResult = "unschedulable"
	errorResult         = "error"
)

// Metrics with upstream's names, help texts and buckets; the per-attempt
// ones also carry the profile.
var (
	scheduleAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "scheduler",
		Name:      "schedule_attempts_total",
		Help:      "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
	}, []string{"result", "profile"})

	schedulingAttemptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "scheduling_attempt_duration_seconds",
		Help:      "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
		Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result", "profile"})

	podSchedulingSLIDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "pod_scheduling_sli_duration_seconds",
		Help:      "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
		Buckets:   prometheus.ExponentialBuckets(0.01, 2, 20),
	}, []string{"attempts", "profile"})

	podSchedulingAttempts = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "pod_scheduling_attempts",
		Help:      "Number of attempts to successfully schedule a pod.",
		Buckets:   prometheus.ExponentialBuckets(1, 2, 5),
	})
)

var registerOnce sync.Once

// registerMetrics registers the scheduler's, the queue's and the
// framework's metrics on controller-runtime's registry, which the manager
// serves on /metrics.
func registerMetrics() error {
	var err error
	registerOnce.Do(func() { err = RegisterMetrics(ctrlmetrics.Registry) })
	return err
}

// RegisterMetrics registers every metric of the scheduling loop on reg.
// Registering twice on one registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	errs := []error{runtime.Register(reg)}
	for _, c := range []prometheus.Collector{scheduleAttempts, schedulingAttemptDuration, podSchedulingSLIDuration, podSchedulingAttempts, queue.PendingPods} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func observeAttempt(result, profile string, seconds float64) {
	scheduleAttempts.WithLabelValues(result, profile).Inc()
	schedulingAttemptDuration.WithLabelValues(result, profile).Observe(seconds)
}

// attemptsLabel buckets the attempt count as upstream ("15+" beyond 15).
func attemptsLabel(attempts int) string {
	if attempts >= 15 {
		return "15+"
	}
	return strconv.Itoa(attempts)
}
