package runtime

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Extension point label values, as upstream.
const (
	PreEnqueue                  = "PreEnqueue"
	QueueSort                   = "QueueSort"
	PreFilter                   = "PreFilter"
	Filter                      = "Filter"
	PreFilterExtensionAddPod    = "PreFilterExtensionAddPod"
	PreFilterExtensionRemovePod = "PreFilterExtensionRemovePod"
	PostFilter                  = "PostFilter"
	PreScore                    = "PreScore"
	Score                       = "Score"
	ScoreExtensionNormalize     = "ScoreExtensionNormalize"
	PreBind                     = "PreBind"
	PreBindPreFlight            = "PreBindPreFlight"
	Bind                        = "Bind"
	PostBind                    = "PostBind"
	Reserve                     = "Reserve"
	Unreserve                   = "Unreserve"
	Permit                      = "Permit"
)

// PluginMetricsSamplePercent is the share of scheduling cycles whose plugin
// durations are observed (upstream samples 10%). The scheduler decides per
// cycle with CycleState.SetRecordPluginMetrics; see ShouldSamplePluginMetrics.
const PluginMetricsSamplePercent = 10

// Metrics with upstream's names, buckets and labels. They are created at
// package load and observed whether or not they are registered, so
// instances never need to know about registries.
var (
	FrameworkExtensionPointDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "framework_extension_point_duration_seconds",
		Help:      "Latency for running all plugins of a specific extension point.",
		// 0.1ms up to [~200ms, Inf).
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 12),
	}, []string{"extension_point", "status", "profile"})

	PluginExecutionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "plugin_execution_duration_seconds",
		Help:      "Duration for running a plugin at a specific extension point.",
		// 0.01ms up to [~22ms, Inf); factor 1.5 because plugin latency is small and sensitive.
		Buckets: prometheus.ExponentialBuckets(0.00001, 1.5, 20),
	}, []string{"plugin", "extension_point", "status"})

	PermitWaitDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "scheduler",
		Name:      "permit_wait_duration_seconds",
		Help:      "Duration of waiting on permit.",
		Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result"})
)

// Register registers the framework metrics on reg. Calling it again with
// the same registry is a no-op, so every component may call it.
func Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{FrameworkExtensionPointDuration, PluginExecutionDuration, PermitWaitDuration} {
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

// observer is one histogram series, resolved once.
type observer struct{ prometheus.Observer }

// statusObserver observes one histogram for a fixed label set whose status
// label varies. Series are created on first use (not up front) so /metrics
// shows only codes that happened, and are cached per code so the hot path
// does no label hashing, locking or allocation.
type statusObserver struct {
	vec       *prometheus.HistogramVec
	labels    []string
	statusIdx int
	// byCode is written at most once per code (a racing duplicate resolves
	// to the same series, so the race is benign) and read lock-free.
	byCode [framework.NumCodes]atomic.Pointer[observer]
}

func newStatusObserver(vec *prometheus.HistogramVec, labels []string, statusIdx int) *statusObserver {
	return &statusObserver{vec: vec, labels: labels, statusIdx: statusIdx}
}

func (o *statusObserver) observe(code framework.Code, d time.Duration) {
	if code < 0 || int(code) >= framework.NumCodes {
		o.series(code).Observe(d.Seconds())
		return
	}
	obs := o.byCode[code].Load()
	if obs == nil {
		obs = &observer{o.series(code)}
		o.byCode[code].Store(obs)
	}
	obs.Observe(d.Seconds())
}

func (o *statusObserver) series(code framework.Code) prometheus.Observer {
	lv := slices.Clone(o.labels)
	lv[o.statusIdx] = code.String()
	return o.vec.WithLabelValues(lv...)
}

func newExtensionPointObserver(point, profile string) *statusObserver {
	return newStatusObserver(FrameworkExtensionPointDuration, []string{point, "", profile}, 1)
}

func newPluginObserver(plugin, point string) *statusObserver {
	return newStatusObserver(PluginExecutionDuration, []string{plugin, point, ""}, 2)
}
