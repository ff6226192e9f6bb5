package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultStalledCycleTimeout is how long one scheduling cycle may run before
// the liveness check reports the loop stuck. Upstream's cycles take
// milliseconds, seconds with preemption on large clusters; minutes means a
// plugin that never returns.
const DefaultStalledCycleTimeout = 2 * time.Minute

// Informers returns a Runnable that starts the loop's informers and keeps
// them running on every replica, leader or not, so that a standby's cache
// of nodes and pods is current the moment it wins the Lease (upstream
// kube-scheduler also starts its informers before leader election). Add it
// to the manager next to the Scheduler; without it Start starts them.
func (s *Scheduler) Informers() manager.Runnable { return informersRunnable{s} }

type informersRunnable struct{ s *Scheduler }

var _ manager.LeaderElectionRunnable = informersRunnable{}

func (r informersRunnable) Start(ctx context.Context) error {
	r.s.startInformers(ctx)
	r.s.waitForInformers(ctx)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: standbys keep their informers warm.
func (informersRunnable) NeedLeaderElection() bool { return false }

// startInformers starts the informer factory under ctx, once: whichever of
// Start and the Informers runnable comes first owns the informers. ctx is
// also the one informers that new instances ask for later run under.
func (s *Scheduler) startInformers(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.informerCtx != nil {
		return
	}
	s.informerCtx = ctx
	s.informerFactory.Start(ctx.Done())
}

// waitForInformers waits until the informers and the loop's handlers have
// seen every existing object, and reports whether they did before ctx ended.
func (s *Scheduler) waitForInformers(ctx context.Context) bool {
	synced := []cache.InformerSynced{s.podInformer.HasSynced, s.nodeInformer.HasSynced}
	for _, ri := range s.eventSources {
		synced = append(synced, ri.informer.HasSynced)
	}
	for _, h := range s.handlers {
		synced = append(synced, h.HasSynced)
	}
	// The PodGroup and Workload handlers count only once the API server serves PodGroups
	// (StartPodGroupInformer): until then nothing waits for it.
	s.mu.Lock()
	if s.podGroupHandler != nil {
		synced = append(synced, s.podGroupHandler.HasSynced, s.workloadHandler.HasSynced)
	}
	s.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return false
	}
	if s.informersSynced.CompareAndSwap(false, true) {
		klog.FromContext(ctx).V(1).Info("Scheduler informers synced")
	}
	return true
}

// CheckInformersSynced is a readiness check (a healthz.Checker): it fails
// until the informers and the loop's handlers have synced, on leaders and
// standbys alike.
func (s *Scheduler) CheckInformersSynced(*http.Request) error {
	if !s.informersSynced.Load() {
		return errors.New("the scheduling loop's informers have not synced yet")
	}
	return nil
}

// CheckLoopProgress is a liveness check (a healthz.Checker): it fails while
// one scheduling cycle has been running for longer than the stalled-cycle
// timeout. A loop waiting for pods, a standby's loop that does not run and
// a loop still waiting for its informers all pass.
func (s *Scheduler) CheckLoopProgress(*http.Request) error {
	return s.progress.check(time.Now())
}

// cycleProgress records the scheduling cycle in progress, for the liveness
// check. The loop's goroutine writes it; probes read it.
type cycleProgress struct {
	timeout time.Duration
	// start is the cycle's start in Unix nanoseconds, 0 between cycles.
	start atomic.Int64
	pod   atomic.Pointer[v1.Pod]
}

func (p *cycleProgress) begin(pod *v1.Pod) {
	p.pod.Store(pod)
	p.start.Store(time.Now().UnixNano())
}

func (p *cycleProgress) end() { p.start.Store(0) }

func (p *cycleProgress) check(now time.Time) error {
	start := p.start.Load()
	if start == 0 {
		return nil
	}
	if running := now.Sub(time.Unix(0, start)); running > p.timeout {
		return fmt.Errorf("the scheduling cycle of pod %s has run for %v, longer than %v: the scheduling loop is stuck",
			klog.KObj(p.pod.Load()), running.Round(time.Second), p.timeout)
	}
	return nil
}
