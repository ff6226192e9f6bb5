package queue

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// Upstream's defaults.
const (
	DefaultPodInitialBackoffDuration         = time.Second
	DefaultPodMaxBackoffDuration             = 10 * time.Second
	DefaultPodMaxInUnschedulablePodsDuration = 5 * time.Minute

	// backoffFlushPeriod is how often pods whose backoff ended move to the active queue.
	backoffFlushPeriod = time.Second
	// unschedulableFlushPeriod is how often the pool is checked for pods
	// that stayed longer than podMaxInUnschedulable.
	unschedulableFlushPeriod = 30 * time.Second
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue is closed")

// PreEnqueueCheck filters the pods an event may move.
type PreEnqueueCheck func(pod *v1.Pod) bool

// Option configures New.
type Option func(*PriorityQueue)

// WithClock sets the clock (tests).
func WithClock(clk clock.WithTicker) Option {
	return func(p *PriorityQueue) { p.clock = clk }
}

// WithPodInitialBackoffDuration sets the backoff after the first failed attempt.
func WithPodInitialBackoffDuration(d time.Duration) Option {
	return func(p *PriorityQueue) { p.podInitialBackoff = d }
}

// WithPodMaxBackoffDuration caps the backoff.
func WithPodMaxBackoffDuration(d time.Duration) Option {
	return func(p *PriorityQueue) { p.podMaxBackoff = d }
}

// WithPodMaxInUnschedulablePodsDuration sets how long a pod may stay in the
// unschedulable pool before it is retried regardless of events.
func WithPodMaxInUnschedulablePodsDuration(d time.Duration) Option {
	return func(p *PriorityQueue) { p.podMaxInUnschedulable = d }
}

// WithMetrics sets the metrics the queue keeps up to date (the
// scheduler's); without it they are exported nowhere.
func WithMetrics(m *metrics.Metrics) Option {
	return func(p *PriorityQueue) { p.metrics = m }
}

// WithPodLister lets the nominator skip pods that were deleted or bound.
func WithPodLister(l listersv1.PodLister) Option {
	return func(p *PriorityQueue) { p.podLister = l }
}

// PriorityQueue is the scheduling queue. All methods are safe for
// concurrent use.
type PriorityQueue struct {
	clock                 clock.WithTicker
	podInitialBackoff     time.Duration
	podMaxBackoff         time.Duration
	podMaxInUnschedulable time.Duration
	podLister             listersv1.PodLister
	metrics               *metrics.Metrics
	pending               pendingGauges

	// nominator has its own lock so Filter workers never wait for the
	// queue's; the queue takes it while holding lock, never the reverse.
	nominator *nominator

	// lock guards every field below. cond is signalled, under lock,
	// whenever a pod enters an active queue or the queue closes; Pop waits
	// on it.
	lock   sync.Mutex
	cond   sync.Cond
	closed bool

	// profiles maps a schedulerName to its queue; ring holds the same
	// profiles in the order Pop serves them, next is where the next Pop
	// starts looking.
	profiles map[string]*profileQueue
	ring     []*profileQueue
	next     int
	// activeCount is the number of pods over all active queues.
	activeCount int

	// backoffQ orders pods by the end of their backoff.
	backoffQ *podHeap
	// unschedulable is the pool of pods waiting for an event, gated pods
	// included; gatedCount counts those.
	unschedulable map[types.UID]unschedulableEntry
	gatedCount    int

	// inFlightPods maps the UID of each pod being scheduled to its marker
	// in inFlightEvents. inFlightEvents interleaves those markers (*v1.Pod)
	// with the events (*inFlightEvent) received since; a pod that fails is
	// checked against the events after its marker. Events before the
	// oldest marker concern nobody and are dropped.
	inFlightPods   map[types.UID]*list.Element
	inFlightEvents *list.List
	// schedulingCycle counts Pops.
	schedulingCycle int64
}

var (
	_ framework.PodNominator = (*PriorityQueue)(nil)
	_ framework.PodActivator = (*PriorityQueue)(nil)
)

// New returns an empty queue that knows no profile yet.
func New(opts ...Option) *PriorityQueue {
	p := &PriorityQueue{
		clock:                 clock.RealClock{},
		podInitialBackoff:     DefaultPodInitialBackoffDuration,
		podMaxBackoff:         DefaultPodMaxBackoffDuration,
		podMaxInUnschedulable: DefaultPodMaxInUnschedulablePodsDuration,
		profiles:              make(map[string]*profileQueue),
		unschedulable:         make(map[types.UID]unschedulableEntry),
		inFlightPods:          make(map[types.UID]*list.Element),
		inFlightEvents:        list.New(),
	}
	for _, o := range opts {
		o(p)
	}
	if p.metrics == nil {
		p.metrics = metrics.NewUnregistered()
	}
	p.pending = newPendingGauges(p.metrics)
	p.cond.L = &p.lock
	p.backoffQ = newPodHeap(func(a, b *framework.QueuedPodInfo) bool {
		return a.BackoffExpiration.Before(b.BackoffExpiration)
	})
	p.nominator = newNominator(p.podLister)
	return p
}

// Run moves pods whose backoff ended and flushes pods left too long in the
// unschedulable pool, until ctx ends; then it closes the queue.
func (p *PriorityQueue) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := p.clock.NewTicker(backoffFlushPeriod)
	defer backoff.Stop()
	leftover := p.clock.NewTicker(unschedulableFlushPeriod)
	defer leftover.Stop()
	for {
		select {
		case <-ctx.Done():
			p.Close()
			return
		case <-backoff.C():
			p.flushBackoffQCompleted(logger)
		case <-leftover.C():
			p.flushUnschedulablePodsLeftover(logger)
		}
	}
}

// Close wakes Pop, which then returns ErrClosed. Pods handed back after
// Close are dropped.
func (p *PriorityQueue) Close() {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.closed = true
	p.cond.Broadcast()
}

func (p *PriorityQueue) newQueuedPodInfo(logger klog.Logger, pod *v1.Pod) *framework.QueuedPodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		logger.V(4).Info("Parsing the pod's affinity terms", "pod", klog.KObj(pod), "err", err)
	}
	return &framework.QueuedPodInfo{
		PodInfo:              pi,
		Timestamp:            p.clock.Now(),
		UnschedulablePlugins: sets.New[string](),
		PendingPlugins:       sets.New[string](),
	}
}

// Add queues a new pod of a served profile; pods of other profiles are
// ignored. A pod the queue already holds is updated instead.
func (p *PriorityQueue) Add(logger klog.Logger, pod *v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if p.profiles[pod.Spec.SchedulerName] == nil {
		return
	}
	if p.known(pod) {
		p.update(logger, nil, pod)
		p.updateMetrics()
		return
	}
	if p.moveToActiveQ(logger, p.newQueuedPodInfo(logger, pod), EventUnscheduledPodAdd.Label()) {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}

// known reports whether pod is in a queue or being scheduled.
func (p *PriorityQueue) known(pod *v1.Pod) bool {
	uid := pod.UID
	if _, ok := p.inFlightPods[uid]; ok {
		return true
	}
	if _, ok := p.unschedulable[uid]; ok {
		return true
	}
	if p.backoffQ.has(uid) {
		return true
	}
	pq := p.profiles[pod.Spec.SchedulerName]
	return pq != nil && pq.activeQ.has(uid)
}

// Update records a change of a pod the queue may hold. For a pod in flight
// the change is recorded as events replayed if its attempt fails; a pod in
// the pool is offered the change through its plugins' hints; a pod the
// queue does not hold is added.
func (p *PriorityQueue) Update(logger klog.Logger, oldPod, newPod *v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if p.profiles[newPod.Spec.SchedulerName] == nil {
		return
	}
	p.update(logger, oldPod, newPod)
	p.updateMetrics()
}

func (p *PriorityQueue) update(logger klog.Logger, oldPod, newPod *v1.Pod) {
	var events []framework.ClusterEvent
	if oldPod != nil {
		events = PodSchedulingPropertiesChange(newPod, oldPod, true)
	}
	if _, ok := p.inFlightPods[newPod.UID]; ok {
		// The attempt in flight uses the old pod; if it fails, these
		// events decide where the (then current) pod goes. As upstream,
		// they join the events replayed to every pod in flight, and
		// TargetPod hints do not check whose update it was.
		for _, e := range events {
			p.inFlightEvents.PushBack(&inFlightEvent{event: e, oldObj: oldPod, newObj: newPod})
		}
		return
	}
	uid := newPod.UID
	pq := p.profiles[newPod.Spec.SchedulerName]
	if pInfo := pq.activeQ.get(uid); pInfo != nil {
		p.replacePod(logger, pInfo, oldPod, newPod)
		pq.activeQ.addOrUpdate(pInfo)
		return
	}
	if pInfo := p.backoffQ.get(uid); pInfo != nil {
		p.replacePod(logger, pInfo, oldPod, newPod)
		return
	}
	if e, ok := p.unschedulable[uid]; ok {
		pInfo := e.pInfo
		p.replacePod(logger, pInfo, oldPod, newPod)
		for _, evt := range events {
			strategy := p.isPodWorthRequeuing(logger, pInfo, evt, oldPod, newPod)
			if strategy == queueSkip {
				continue
			}
			p.deleteUnschedulable(uid)
			queue := p.requeuePodWithQueueingStrategy(logger, pInfo, strategy, evt.Label())
			logger.V(5).Info("Pod moved to an internal scheduling queue because the Pod is updated", "pod", klog.KObj(newPod), "event", evt.Label(), "queue", queue)
			if queue == activeQ {
				p.cond.Broadcast()
			}
			if queue != unschedulableQ {
				break
			}
		}
		return
	}
	if p.moveToActiveQ(logger, p.newQueuedPodInfo(logger, newPod), EventUnscheduledPodUpdate.Label()) {
		p.cond.Broadcast()
	}
}

// replacePod points pInfo at a new PodInfo for newPod. PodInfos are never
// modified in place: the nominator hands them to Filter workers running
// concurrently.
func (p *PriorityQueue) replacePod(logger klog.Logger, pInfo *framework.QueuedPodInfo, oldPod, newPod *v1.Pod) {
	pi, err := framework.NewPodInfo(newPod)
	if err != nil {
		logger.V(4).Info("Parsing the pod's affinity terms", "pod", klog.KObj(newPod), "err", err)
	}
	pInfo.PodInfo = pi
	if oldPod == nil {
		oldPod = newPod
	}
	p.nominator.update(logger, oldPod, pi)
}

// Delete removes a pod from the queue. A pod in flight finishes its attempt
// and is dropped when it comes back (the scheduler checks the informer).
func (p *PriorityQueue) Delete(pod *v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.nominator.delete(pod)
	uid := pod.UID
	if pq := p.profiles[pod.Spec.SchedulerName]; pq != nil && pq.activeQ.delete(uid) {
		p.activeCount--
	}
	p.backoffQ.delete(uid)
	p.deleteUnschedulable(uid)
	p.updateMetrics()
}

// Activate moves pods from the backoff queue or the unschedulable pool to
// the active queue (framework.PodActivator). A pod in flight is marked so
// that it is retried at once if its attempt fails; unknown pods are ignored.
func (p *PriorityQueue) Activate(logger klog.Logger, pods map[string]*v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	activated := false
	for _, pod := range pods {
		if p.activate(logger, pod) {
			activated = true
			continue
		}
		if _, ok := p.inFlightPods[pod.UID]; ok {
			p.inFlightEvents.PushBack(&inFlightEvent{event: EventForceActivate, newObj: pod})
		}
	}
	if activated {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}

func (p *PriorityQueue) activate(logger klog.Logger, pod *v1.Pod) bool {
	var pInfo *framework.QueuedPodInfo
	if e, ok := p.unschedulable[pod.UID]; ok {
		pInfo = e.pInfo
	} else if pInfo = p.backoffQ.get(pod.UID); pInfo == nil {
		return false
	}
	return p.moveToActiveQ(logger, pInfo, ForceActivate)
}

// SchedulingCycle returns the number of pods popped so far.
func (p *PriorityQueue) SchedulingCycle() int64 {
	p.lock.Lock()
	defer p.lock.Unlock()
	return p.schedulingCycle
}

// AddUnschedulableIfNotPresent hands back a pod that failed its attempt.
// The scheduler has set pInfo's UnschedulablePlugins and PendingPlugins
// from the failure (empty for an error). If an event seen while the pod
// was in flight may help it, it goes to the backoff or active queue;
// otherwise to the unschedulable pool. It ends the pod's flight.
func (p *PriorityQueue) AddUnschedulableIfNotPresent(logger klog.Logger, pInfo *framework.QueuedPodInfo, podSchedulingCycle int64) error {
	p.lock.Lock()
	defer p.lock.Unlock()
	defer p.done(pInfo.Pod.UID)
	pod := pInfo.Pod
	if p.closed || p.profiles[pod.Spec.SchedulerName] == nil {
		return nil
	}
	if _, ok := p.unschedulable[pod.UID]; ok {
		return fmt.Errorf("pod %v is already present in unschedulable queue", klog.KObj(pod))
	}
	if p.profiles[pod.Spec.SchedulerName].activeQ.has(pod.UID) {
		return fmt.Errorf("pod %v is already present in the active queue", klog.KObj(pod))
	}
	if p.backoffQ.has(pod.UID) {
		return fmt.Errorf("pod %v is already present in the backoff queue", klog.KObj(pod))
	}
	// A retried pod goes behind pods of equal priority, and its backoff
	// starts now.
	pInfo.Timestamp = p.clock.Now()
	pInfo.BackoffExpiration = pInfo.Timestamp.Add(p.backoffDuration(pInfo))

	strategy := p.determineSchedulingHintForInFlightPod(logger, pInfo)
	queue := p.requeuePodWithQueueingStrategy(logger, pInfo, strategy, ScheduleAttemptFailure)
	logger.V(3).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pod), "event", ScheduleAttemptFailure,
		"queue", queue, "schedulingCycle", podSchedulingCycle, "unschedulablePlugins", sets.List(pInfo.UnschedulablePlugins.Union(pInfo.PendingPlugins)))
	if queue == activeQ {
		p.cond.Broadcast()
	}
	p.updateMetrics()
	return nil
}

// Summary counts the pods in each part of the queue.
type Summary struct {
	Active, Backoff, Unschedulable, Gated, InFlight int
}

// Summary returns the current counts.
func (p *PriorityQueue) Summary() Summary {
	p.lock.Lock()
	defer p.lock.Unlock()
	return Summary{
		Active:        p.activeCount,
		Backoff:       p.backoffQ.len(),
		Unschedulable: len(p.unschedulable) - p.gatedCount,
		Gated:         p.gatedCount,
		InFlight:      len(p.inFlightPods),
	}
}
