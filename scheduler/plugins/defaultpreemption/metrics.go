package defaultpreemption

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Preemption metrics with upstream's names, buckets and labels. They are
// observed whether or not they are registered.
var (
	preemptionAttempts = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: "scheduler",
		Name:      "preemption_attempts_total",
		Help:      "Total preemption attempts in the cluster till now",
	})

	preemptionVictims = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "preemption_victims",
		Help:      "Number of selected preemption victims",
		// More than 64 victims is rare enough for one [64, +Inf) bucket.
		Buckets: prometheus.ExponentialBuckets(1, 2, 7),
	})

	preemptionGoroutinesDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "preemption_goroutines_duration_seconds",
		Help:      "Duration in seconds for running goroutines for the preemption.",
		Buckets:   prometheus.ExponentialBuckets(0.01, 2, 20),
	}, []string{"result"})

	preemptionGoroutinesExecutionTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "scheduler",
		Name:      "preemption_goroutines_execution_total",
		Help:      "Number of preemption goroutines executed.",
	}, []string{"result"})
)

// RegisterMetrics registers the preemption metrics on reg. Calling it again
// with the same registry is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{preemptionAttempts, preemptionVictims, preemptionGoroutinesDuration, preemptionGoroutinesExecutionTotal} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
