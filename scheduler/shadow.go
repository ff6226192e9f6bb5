package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	internalcache "github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Sampling of a shadow's placements, unless WithShadowSampling sets it.
const (
	// DefaultShadowSampleRate is how many placements a shadow evaluates
	// per second at most.
	DefaultShadowSampleRate = 20
	// DefaultShadowQueueLength bounds the placements waiting for a shadow.
	DefaultShadowQueueLength = 100
)

// maxShadowNodes is how many of its equally best nodes a disagreement
// names.
const maxShadowNodes = 5

// WithShadowSampling sets how many placements per second each shadow
// evaluates at most (a token bucket with a burst of as many), and how many
// sampled placements may wait for it; beyond either the placement is
// skipped and counted.
func WithShadowSampling(perSecond float64, queueLength int) Option {
	return func(o *options) { o.shadowSampleRate, o.shadowQueueLength = perSecond, queueLength }
}

// Shadow is a profile instance that serves no pods: for a sample of the
// pods of schedulerName Of that some scheduler places (a profile of this
// loop or another scheduler), it computes where it would have placed each
// and counts how often it agrees. The counts are all its status shows:
// whoever reads SchedulingProfiles may not read every namespace's pods. A
// pod it disagrees about gets an event in its own namespace, and a log
// line at V(2). It runs PreFilter, Filter, the
// extenders' filters, PreScore, Score and NormalizeScore on its own
// goroutine and its own snapshot, and never PostFilter (preemption makes
// API calls), Reserve, Permit, PreBind or Bind: it reserves, holds and
// binds nothing.
//
// The informer handler that sees a placement only takes a token and tries
// a channel send; it never waits for the shadow, so the shadow never slows
// the loop or the informers.
type Shadow struct {
	name, of string
	sched    *Scheduler
	// picker and its snapshot belong to the shadow's goroutine.
	picker  nodePicker
	limiter *rate.Limiter
	pods    chan *v1.Pod

	// fwk and the metrics are set by Start, before the shadow is
	// registered and its goroutine starts; read-only afterwards.
	fwk framework.Framework
	// recorder records disagreements on the pods, as the shadow's
	// SchedulingProfile.
	recorder events.EventRecorder
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once

	// sampledOut and dropped are counted by the informer's goroutine.
	sampledOut, dropped atomic.Int64
	sampledOutMetric    prometheus.Counter
	droppedMetric       prometheus.Counter
	outcomeMetrics      map[string]prometheus.Counter

	// mu guards stats, written by the shadow's goroutine and read by Stats.
	mu    sync.Mutex
	stats ShadowStats
}

// ShadowStats is what a shadow counted since it started.
type ShadowStats struct {
	// Of is the schedulerName whose placements the shadow evaluates.
	Of string
	// Since is when the shadow started.
	Since time.Time
	// Evaluated is SameNode + OtherNode + NoNode + Errors.
	Evaluated, SameNode, OtherNode, NoNode, Errors int64
	// SampledOut and Dropped are the placements skipped beyond the
	// sampling rate and because the queue was full.
	SampledOut, Dropped int64
}

// NewShadow prepares a shadow, named after its SchedulingProfile, of the
// pods of schedulerName of. Build its instance with the options from
// FrameworkOptions, then Start it.
func (s *Scheduler) NewShadow(name, of string) *Shadow {
	return &Shadow{
		name:    name,
		of:      of,
		sched:   s,
		picker:  nodePicker{snapshot: internalcache.NewEmptySnapshot(), wantsAllBest: true},
		limiter: rate.NewLimiter(rate.Limit(s.shadowSampleRate), max(1, int(s.shadowSampleRate))),
		pods:    make(chan *v1.Pod, s.shadowQueueLength),
		done:    make(chan struct{}),
		stats:   ShadowStats{Of: of},
	}
}

// FrameworkOptions are the options the shadow's instance is built with,
// after the scheduler's own (NewFramework applies them last): the
// shadow's snapshot instead of the loop's, no event recorder (its plugins
// say nothing on pods; the shadow's own events are its disagreements), no activator (it moves no pod in the queue),
// metrics exported nowhere (the loop's series stay the serving
// profiles'), and no opportunistic batching: a shadow evaluates a sample
// of placements, not consecutive cycles of the queue, so it never asks
// for a hint nor keeps results, and its instance has no batch to keep
// them in.
func (sh *Shadow) FrameworkOptions() []runtime.Option {
	return []runtime.Option{
		runtime.WithSnapshotSharedLister(sh.picker.snapshot),
		runtime.WithEventRecorder(nil),
		runtime.WithPodActivator(nil),
		runtime.WithMetrics(metrics.NewUnregistered()),
		runtime.WithOpportunisticBatching(false),
	}
}

// Start makes the shadow evaluate placements with fwk, built with
// FrameworkOptions, until Stop. The shadow owns fwk from here on.
func (sh *Shadow) Start(fwk framework.Framework) {
	sh.fwk = fwk
	// Resolved here, not in NewShadow: a shadow whose instance does not
	// build never starts, and must leave no series behind.
	m := sh.sched.metrics
	sh.sampledOutMetric = m.ShadowSkippedPods.WithLabelValues(sh.name, metrics.ShadowSampledOut)
	sh.droppedMetric = m.ShadowSkippedPods.WithLabelValues(sh.name, metrics.ShadowQueueFull)
	sh.outcomeMetrics = map[string]prometheus.Counter{}
	for _, result := range []string{metrics.ShadowSameNode, metrics.ShadowOtherNode, metrics.ShadowNoNode, metrics.ShadowError} {
		sh.outcomeMetrics[result] = m.ShadowEvaluations.WithLabelValues(sh.name, result)
	}
	sh.recorder = sh.sched.broadcaster.NewRecorder(scheme.Scheme, sh.name)
	sh.stats.Since = time.Now()
	logger := sh.sched.logger.WithValues("shadow", sh.name, "shadowOf", sh.of)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	sh.cancel = cancel
	go sh.run(ctx)
	sh.sched.registerShadow(sh)
	logger.V(2).Info("Shadow started")
}

// Stop stops the shadow, closes its instance and deletes its series. It
// may be called more than once, and on a shadow never started.
func (sh *Shadow) Stop() {
	sh.once.Do(func() {
		if sh.cancel == nil {
			return
		}
		sh.sched.unregisterShadow(sh)
		sh.cancel()
		<-sh.done
		if err := sh.fwk.Close(); err != nil {
			sh.sched.logger.Error(err, "Closing a shadow's instance", "shadow", sh.name)
		}
		sh.sched.metrics.DeleteShadow(sh.name)
	})
}

// Stats returns what the shadow counted so far.
func (sh *Shadow) Stats() ShadowStats {
	sh.mu.Lock()
	st := sh.stats
	sh.mu.Unlock()
	st.SampledOut, st.Dropped = sh.sampledOut.Load(), sh.dropped.Load()
	return st
}

// offer hands a placement to the shadow if the sampling rate allows it and
// its queue has room; it never blocks. It runs on the pod informer's
// goroutine.
func (sh *Shadow) offer(pod *v1.Pod) {
	if !sh.limiter.Allow() {
		sh.sampledOut.Add(1)
		sh.sampledOutMetric.Inc()
		return
	}
	select {
	case sh.pods <- pod:
	default:
		sh.dropped.Add(1)
		sh.droppedMetric.Inc()
	}
}

func (sh *Shadow) run(ctx context.Context) {
	defer close(sh.done)
	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-sh.pods:
			sh.evaluate(ctx, pod)
		}
	}
}

// evaluate computes where the shadow would have placed pod, which the
// serving scheduler placed on pod.Spec.NodeName, and records the outcome.
func (sh *Shadow) evaluate(ctx context.Context, placed *v1.Pod) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(placed))
	ctx = klog.NewContext(ctx, logger)
	outcome := sh.place(ctx, placed)
	sh.outcomeMetrics[outcome.result].Inc()
	sh.mu.Lock()
	sh.stats.record(outcome)
	sh.mu.Unlock()
	if outcome.result == metrics.ShadowSameNode {
		logger.V(4).Info("Shadow agrees with a placement", "servingNode", placed.Spec.NodeName)
		return
	}
	logger.V(2).Info("Shadow disagrees with a placement", "podUID", placed.UID, "servingNode", placed.Spec.NodeName, "result", outcome.result, "shadowNodes", outcome.nodes, "reason", outcome.reason)
	// In the pod's namespace, so that only who may read that namespace's
	// events learns of the pod.
	sh.recorder.Eventf(placed, nil, v1.EventTypeNormal, shadowDisagreementReason, "ShadowEvaluate", "%s", outcome.note(sh.of, placed.Spec.NodeName))
}

// shadowDisagreementReason is the API's ReasonShadowDisagreement: the
// scheduler does not import the API's types.
const shadowDisagreementReason = "ShadowDisagreement"

// note words a disagreement for the pod's event.
func (o shadowOutcome) note(of, servingNode string) string {
	var note string
	switch o.result {
	case metrics.ShadowOtherNode:
		note = fmt.Sprintf("A shadow of schedulerName %s would have placed the pod on %s, not on %s", of, strings.Join(o.nodes, " or "), servingNode)
	case metrics.ShadowNoNode:
		note = fmt.Sprintf("A shadow of schedulerName %s would have found no node for the pod, which is on %s: %s", of, servingNode, o.reason)
	default:
		note = fmt.Sprintf("A shadow of schedulerName %s could not evaluate the pod's placement on %s: %s", of, servingNode, o.reason)
	}
	return truncateMessage(note)
}

// place runs the node selection of a cycle for placed, as if it were not
// placed yet: on a snapshot without it, for a copy without its nodeName
// (the NodeName filter would otherwise allow its node alone).
func (sh *Shadow) place(ctx context.Context, placed *v1.Pod) shadowOutcome {
	logger := klog.FromContext(ctx)
	if err := sh.sched.cache.UpdateSnapshot(logger, sh.picker.snapshot); err != nil {
		return shadowOutcome{result: metrics.ShadowError, reason: err.Error()}
	}
	restore, _ := sh.picker.snapshot.TakeOutPod(logger, placed)
	defer restore()
	pod := placed.DeepCopy()
	pod.Spec.NodeName = ""
	state := framework.NewCycleState()
	// Plugins may expect it; the pods it collects are never activated.
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	// No cycleBatch: the batch is the loop's, for the queue's consecutive
	// cycles, and a shadow's evaluation is neither.
	c, err := sh.picker.findCandidates(ctx, sh.fwk, state, pod, nil)
	return compareWithServing(placed.Spec.NodeName, c, err)
}

// shadowOutcome is the comparison of one shadow evaluation with the
// serving scheduler's placement.
type shadowOutcome struct {
	// result is a metrics.Shadow* outcome.
	result string
	// nodes are the shadow's equally best nodes, sorted, at most
	// maxShadowNodes.
	nodes  []string
	reason string
}

// compareWithServing compares the shadow's candidates (or its error) with
// servingNode. Among the nodes of the highest score upstream takes the
// one its heap yields first, which depends on the order its search found
// them in (or on a random tie-breaker when extenders scored), so the
// shadow agrees when servingNode is among them: comparing with its own
// pick would count as disagreement what is only chance.
func compareWithServing(servingNode string, c candidates, err error) shadowOutcome {
	var fitErr *framework.FitError
	switch {
	case errors.As(err, &fitErr), errors.Is(err, ErrNoNodesAvailable):
		return shadowOutcome{result: metrics.ShadowNoNode, reason: err.Error()}
	case err != nil:
		return shadowOutcome{result: metrics.ShadowError, reason: err.Error()}
	}
	best := c.bestNodes()
	if slices.Contains(best, servingNode) {
		return shadowOutcome{result: metrics.ShadowSameNode}
	}
	slices.Sort(best)
	if len(best) > maxShadowNodes {
		best = best[:maxShadowNodes]
	}
	return shadowOutcome{result: metrics.ShadowOtherNode, nodes: best}
}

// bestNodes are the nodes selectHost may choose: those of the highest
// total score (every feasible node when nothing scores them, since each
// then scores 1), or the single feasible node.
func (c candidates) bestNodes() []string {
	var best []string
	if c.scores == nil {
		for _, ni := range c.feasible {
			best = append(best, ni.Node().Name)
		}
		return best
	}
	top := c.scores[0].TotalScore
	for _, ns := range c.scores {
		switch {
		case ns.TotalScore > top:
			top, best = ns.TotalScore, append(best[:0], ns.Name)
		case ns.TotalScore == top:
			best = append(best, ns.Name)
		}
	}
	return best
}

// record counts outcome.
func (st *ShadowStats) record(outcome shadowOutcome) {
	st.Evaluated++
	switch outcome.result {
	case metrics.ShadowSameNode:
		st.SameNode++
	case metrics.ShadowOtherNode:
		st.OtherNode++
	case metrics.ShadowNoNode:
		st.NoNode++
	default:
		st.Errors++
	}
}

// registerShadow adds sh to the shadows the pod handler offers placements
// to. The map is replaced, never changed, so that the handler reads it
// without a lock.
func (s *Scheduler) registerShadow(sh *Shadow) {
	s.shadowsMu.Lock()
	defer s.shadowsMu.Unlock()
	next := map[string][]*Shadow{}
	if cur := s.shadows.Load(); cur != nil {
		next = maps.Clone(*cur)
	}
	next[sh.of] = append(slices.Clone(next[sh.of]), sh)
	s.shadows.Store(&next)
}

func (s *Scheduler) unregisterShadow(sh *Shadow) {
	s.shadowsMu.Lock()
	defer s.shadowsMu.Unlock()
	cur := s.shadows.Load()
	if cur == nil {
		return
	}
	next := maps.Clone(*cur)
	rest := slices.DeleteFunc(slices.Clone(next[sh.of]), func(o *Shadow) bool { return o == sh })
	if len(rest) == 0 {
		delete(next, sh.of)
	} else {
		next[sh.of] = rest
	}
	s.shadows.Store(&next)
}

// observePlacement offers a pod that was just placed to the shadows of
// its schedulerName. It runs on the pod informer's goroutine.
func (s *Scheduler) observePlacement(pod *v1.Pod) {
	m := s.shadows.Load()
	if m == nil {
		return
	}
	for _, sh := range (*m)[pod.Spec.SchedulerName] {
		sh.offer(pod)
	}
}
