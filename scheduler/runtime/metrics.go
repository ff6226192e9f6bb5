package runtime

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// Extension point names, which are also the extension_point label values
// of the metrics.
const (
	PreEnqueue                  = metrics.PreEnqueue
	QueueSort                   = metrics.QueueSort
	PreFilter                   = metrics.PreFilter
	Filter                      = metrics.Filter
	PreFilterExtensionAddPod    = metrics.PreFilterExtensionAddPod
	PreFilterExtensionRemovePod = metrics.PreFilterExtensionRemovePod
	PostFilter                  = metrics.PostFilter
	PreScore                    = metrics.PreScore
	Score                       = metrics.Score
	ScoreExtensionNormalize     = metrics.ScoreExtensionNormalize
	PreBind                     = metrics.PreBind
	PreBindPreFlight            = metrics.PreBindPreFlight
	Bind                        = metrics.Bind
	PostBind                    = metrics.PostBind
	Reserve                     = metrics.Reserve
	Unreserve                   = metrics.Unreserve
	Permit                      = metrics.Permit
	Sign                        = metrics.Sign

	PlacementGenerate                = metrics.PlacementGenerate
	PlacementFeasible                = metrics.PlacementFeasible
	PlacementScore                   = metrics.PlacementScore
	PlacementScoreExtensionNormalize = metrics.PlacementScoreExtensionNormalize
	PodGroupPostFilter               = metrics.PodGroupPostFilter
)

// PluginMetricsSamplePercent is the share of scheduling cycles whose plugin
// durations are observed (upstream samples 10%). The scheduler decides per
// cycle with CycleState.SetRecordPluginMetrics; see ShouldSamplePluginMetrics.
const PluginMetricsSamplePercent = 10

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

func newExtensionPointObserver(m *metrics.Metrics, point, profile string) *statusObserver {
	return newStatusObserver(m.FrameworkExtensionPointDuration, []string{point, "", profile}, 1)
}

func newPluginObserver(m *metrics.Metrics, plugin, point string) *statusObserver {
	return newStatusObserver(m.PluginExecutionDuration, []string{plugin, point, ""}, 2)
}
