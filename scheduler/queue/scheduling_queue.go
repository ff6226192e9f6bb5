package queue

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
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

// queueingStrategy is where an event sends a pod.
type queueingStrategy int

const (
	// queueSkip leaves the pod where it is.
	queueSkip queueingStrategy = iota
	// queueAfterBackoff sends it to the backoff queue, or straight to the
	// active queue if its backoff already ended.
	queueAfterBackoff
	// queueImmediately sends it to the active queue (a plugin that returned
	// Pending says the wait is over).
	queueImmediately
)

// PreEnqueueCheck filters the pods an event may move.
type PreEnqueueCheck func(pod *v1.Pod) bool

type pluginHint struct {
	plugin string
	fn     framework.QueueingHintFn
}

// eventHints are the plugins that registered one event, with their hints.
type eventHints struct {
	event framework.ClusterEvent
	hints []pluginHint
}

// profileQueue is what the queue keeps per profile. It is replaced as a
// whole when the profile gets a new instance.
type profileQueue struct {
	name    string
	activeQ *podHeap
	// preEnqueue holds the PreEnqueue plugins in order, also by name so the
	// plugin that gated a pod can be asked first.
	preEnqueue       []framework.PreEnqueuePlugin
	preEnqueueByName map[string]framework.PreEnqueuePlugin
	// hints holds, per registered event, the plugins and hints to consult.
	hints []eventHints
	// pluginEvents holds the events each plugin registered; a gated pod is
	// only worth retrying on an event of its gating plugin.
	pluginEvents map[string][]framework.ClusterEvent
}

// unschedulableEntry is a pod in the pool; gated records how it was
// counted so the gauges stay right if its gate changes while it is there.
type unschedulableEntry struct {
	pInfo *framework.QueuedPodInfo
	gated bool
}

// inFlightEvent is an event seen while pods were being scheduled.
type inFlightEvent struct {
	event          framework.ClusterEvent
	oldObj, newObj any
}

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

// SetProfile starts serving the pods of fwk's profile, or switches an
// existing profile to the new instance: its active queue is re-sorted with
// the new QueueSort, and the pods the old instance left in the pool are
// retried, since the new plugins may judge them differently. ctx is passed
// to EnqueueExtensions.
func (p *PriorityQueue) SetProfile(ctx context.Context, fwk framework.Framework) {
	logger := klog.FromContext(ctx)
	pq := newProfileQueue(ctx, fwk)

	p.lock.Lock()
	defer p.lock.Unlock()
	old := p.profiles[pq.name]
	p.profiles[pq.name] = pq
	if old == nil {
		p.ring = append(p.ring, pq)
		p.updateMetrics()
		return
	}
	i := slices.Index(p.ring, old)
	p.ring[i] = pq
	pq.activeQ = old.activeQ
	pq.activeQ.reorder(pq.lessFunc(fwk))

	var retry []*framework.QueuedPodInfo
	for _, e := range p.unschedulable {
		if e.pInfo.Pod.Spec.SchedulerName == pq.name {
			retry = append(retry, e.pInfo)
		}
	}
	moved := false
	for _, pInfo := range retry {
		if pInfo.Gated() {
			// The new instance may gate differently: ask its PreEnqueue
			// plugins again (moveToActiveQ keeps it in the pool if gated).
			pInfo.GatingPlugin = ""
			p.deleteUnschedulable(pInfo.Pod.UID)
			if p.moveToActiveQ(logger, pInfo, ProfileUpdated) {
				moved = true
			}
			continue
		}
		if p.requeuePodWithQueueingStrategy(logger, pInfo, queueAfterBackoff, ProfileUpdated) == activeQ {
			moved = true
		}
	}
	if moved {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}

// RemoveProfile stops serving a profile: its pods leave the queue (they
// come back through Add if the profile returns). Pods of the profile being
// scheduled finish their cycle; if they fail they are dropped.
func (p *PriorityQueue) RemoveProfile(name string) {
	p.lock.Lock()
	defer p.lock.Unlock()
	pq := p.profiles[name]
	if pq == nil {
		return
	}
	delete(p.profiles, name)
	i := slices.Index(p.ring, pq)
	p.ring = slices.Delete(p.ring, i, i+1)
	if p.next > i {
		p.next--
	}
	for _, pInfo := range pq.activeQ.list() {
		p.nominator.delete(pInfo.Pod)
	}
	p.activeCount -= pq.activeQ.len()
	for _, pInfo := range p.backoffQ.list() {
		if pInfo.Pod.Spec.SchedulerName == name {
			p.backoffQ.delete(pInfo.Pod.UID)
			p.nominator.delete(pInfo.Pod)
		}
	}
	for uid, e := range p.unschedulable {
		if e.pInfo.Pod.Spec.SchedulerName == name {
			p.deleteUnschedulable(uid)
			p.nominator.delete(e.pInfo.Pod)
		}
	}
	p.updateMetrics()
}

// HasProfile reports whether pods of the profile name are served.
func (p *PriorityQueue) HasProfile(name string) bool {
	p.lock.Lock()
	defer p.lock.Unlock()
	return p.profiles[name] != nil
}

func newProfileQueue(ctx context.Context, fwk framework.Framework) *profileQueue {
	logger := klog.FromContext(ctx)
	pq := &profileQueue{
		name:             fwk.ProfileName(),
		preEnqueue:       fwk.PreEnqueuePlugins(),
		preEnqueueByName: make(map[string]framework.PreEnqueuePlugin),
		pluginEvents:     make(map[string][]framework.ClusterEvent),
	}
	pq.activeQ = newPodHeap(pq.lessFunc(fwk))
	for _, pl := range pq.preEnqueue {
		pq.preEnqueueByName[pl.Name()] = pl
	}
	byEvent := make(map[framework.ClusterEvent]int)
	for _, ext := range fwk.EnqueueExtensions() {
		events, err := ext.EventsToRegister(ctx)
		if err != nil {
			// Never leave the plugin's pods stranded: let every event requeue them.
			logger.Error(err, "Getting the events of a plugin; it is registered for all events", "plugin", ext.Name())
			events = framework.UnrollWildCardResource()
		}
		for _, e := range events {
			fn := e.QueueingHintFn
			if fn == nil {
				fn = queueAlways
			}
			i, ok := byEvent[e.Event]
			if !ok {
				i = len(pq.hints)
				byEvent[e.Event] = i
				pq.hints = append(pq.hints, eventHints{event: e.Event})
			}
			pq.hints[i].hints = append(pq.hints[i].hints, pluginHint{plugin: ext.Name(), fn: fn})
			pq.pluginEvents[ext.Name()] = append(pq.pluginEvents[ext.Name()], e.Event)
		}
	}
	return pq
}

func queueAlways(klog.Logger, *v1.Pod, any, any) (framework.QueueingHint, error) {
	return framework.Queue, nil
}

// lessFunc is the profile's QueueSort, falling back to FIFO for an instance
// without one (the runtime refuses those, but tests may build fakes).
func (pq *profileQueue) lessFunc(fwk framework.Framework) framework.LessFunc {
	if less := fwk.QueueSortFunc(); less != nil {
		return less
	}
	return func(a, b *framework.QueuedPodInfo) bool { return a.Timestamp.Before(b.Timestamp) }
}

// interestedIn reports whether any plugin of the profile registered an event matching e.
func (pq *profileQueue) interestedIn(e framework.ClusterEvent) bool {
	for _, eh := range pq.hints {
		if eh.event.Match(e) {
			return true
		}
	}
	return false
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

// runPreEnqueuePlugins sets pInfo.GatingPlugin to the first PreEnqueue
// plugin that holds the pod, or clears it. The plugin that gated the pod
// last time is asked first: it is the likeliest to still say no.
func (p *PriorityQueue) runPreEnqueuePlugins(logger klog.Logger, pq *profileQueue, pInfo *framework.QueuedPodInfo) {
	if len(pq.preEnqueue) == 0 {
		pInfo.GatingPlugin = ""
		return
	}
	start := time.Now()
	code := framework.Success
	defer func() {
		p.metrics.FrameworkExtensionPointDuration.WithLabelValues(metrics.PreEnqueue, code.String(), pq.name).Observe(time.Since(start).Seconds())
	}()
	ctx := klog.NewContext(context.Background(), logger)
	if first := pq.preEnqueueByName[pInfo.GatingPlugin]; first != nil {
		if s := p.runPreEnqueuePlugin(ctx, logger, pq, first, pInfo); !s.IsSuccess() {
			code = s.Code()
			return
		}
	}
	for _, pl := range pq.preEnqueue {
		if pl.Name() == pInfo.GatingPlugin {
			continue
		}
		if s := p.runPreEnqueuePlugin(ctx, logger, pq, pl, pInfo); !s.IsSuccess() {
			code = s.Code()
			return
		}
	}
	pInfo.GatingPlugin = ""
	pInfo.GatingPluginEvents = nil
}

func (p *PriorityQueue) runPreEnqueuePlugin(ctx context.Context, logger klog.Logger, pq *profileQueue, pl framework.PreEnqueuePlugin, pInfo *framework.QueuedPodInfo) *framework.Status {
	s := pl.PreEnqueue(ctx, pInfo.Pod)
	if s.IsSuccess() {
		return s
	}
	if pInfo.UnschedulablePlugins == nil {
		pInfo.UnschedulablePlugins = sets.New[string]()
	}
	pInfo.UnschedulablePlugins.Insert(pl.Name())
	pInfo.GatingPlugin = pl.Name()
	pInfo.GatingPluginEvents = pq.pluginEvents[pl.Name()]
	if s.Code() == framework.Error {
		logger.Error(s.AsError(), "Unexpected error running PreEnqueue plugin", "pod", klog.KObj(pInfo.Pod), "plugin", pl.Name())
	} else {
		logger.V(4).Info("Status after running PreEnqueue plugin", "pod", klog.KObj(pInfo.Pod), "plugin", pl.Name(), "status", s.Message())
	}
	return s
}

// moveToActiveQ puts pInfo in its profile's active queue if no PreEnqueue
// plugin holds it, and in the unschedulable pool otherwise. It reports
// whether the pod became active. The caller holds the lock.
func (p *PriorityQueue) moveToActiveQ(logger klog.Logger, pInfo *framework.QueuedPodInfo, event string) bool {
	pq := p.profiles[pInfo.Pod.Spec.SchedulerName]
	if pq == nil {
		// The profile went away; the pod returns with it.
		p.deleteUnschedulable(pInfo.Pod.UID)
		p.backoffQ.delete(pInfo.Pod.UID)
		return false
	}
	p.runPreEnqueuePlugins(logger, pq, pInfo)
	if pInfo.Gated() {
		if pq.activeQ.has(pInfo.Pod.UID) || p.backoffQ.has(pInfo.Pod.UID) {
			return false
		}
		if _, ok := p.unschedulable[pInfo.Pod.UID]; !ok {
			p.addUnschedulable(pInfo)
			logger.V(5).Info("Pod moved to an internal scheduling queue, because the pod is gated", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", unschedulableQ)
		}
		return false
	}
	if pInfo.InitialAttemptTimestamp == nil {
		// Time spent gated does not count towards the scheduling latency.
		now := p.clock.Now()
		pInfo.InitialAttemptTimestamp = &now
	}
	p.deleteUnschedulable(pInfo.Pod.UID)
	p.backoffQ.delete(pInfo.Pod.UID)
	if !pq.activeQ.has(pInfo.Pod.UID) {
		p.activeCount++
	}
	pq.activeQ.addOrUpdate(pInfo)
	logger.V(5).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", activeQ)
	if event == EventUnscheduledPodAdd.Label() || event == EventUnscheduledPodUpdate.Label() {
		p.nominator.add(logger, pInfo.PodInfo, nil)
	}
	return true
}

// moveToBackoffQ puts pInfo in the backoff queue. The caller holds the lock.
func (p *PriorityQueue) moveToBackoffQ(logger klog.Logger, pInfo *framework.QueuedPodInfo, event string) {
	p.deleteUnschedulable(pInfo.Pod.UID)
	p.backoffQ.addOrUpdate(pInfo)
	logger.V(5).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pInfo.Pod), "event", event, "queue", backoffQ)
}

func (p *PriorityQueue) addUnschedulable(pInfo *framework.QueuedPodInfo) {
	p.deleteUnschedulable(pInfo.Pod.UID)
	gated := pInfo.Gated()
	p.unschedulable[pInfo.Pod.UID] = unschedulableEntry{pInfo: pInfo, gated: gated}
	if gated {
		p.gatedCount++
	}
}

func (p *PriorityQueue) deleteUnschedulable(uid types.UID) {
	if e, ok := p.unschedulable[uid]; ok {
		if e.gated {
			p.gatedCount--
		}
		delete(p.unschedulable, uid)
	}
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

func (p *PriorityQueue) isPodBackingOff(pInfo *framework.QueuedPodInfo) bool {
	return pInfo.BackoffExpiration.After(p.clock.Now())
}

// requeuePodWithQueueingStrategy moves pInfo where strategy says and
// returns the name of the queue it ended in. The caller holds the lock.
func (p *PriorityQueue) requeuePodWithQueueingStrategy(logger klog.Logger, pInfo *framework.QueuedPodInfo, strategy queueingStrategy, event string) string {
	if strategy == queueSkip {
		p.addUnschedulable(pInfo)
		return unschedulableQ
	}
	if strategy == queueAfterBackoff && p.isPodBackingOff(pInfo) {
		p.moveToBackoffQ(logger, pInfo, event)
		return backoffQ
	}
	if p.moveToActiveQ(logger, pInfo, event) {
		return activeQ
	}
	return unschedulableQ
}

// Pop blocks until a pod is active in some profile and returns it, serving
// the profiles round-robin. The pod is in flight until Done or
// AddUnschedulableIfNotPresent. It returns ErrClosed once the queue is closed.
func (p *PriorityQueue) Pop(logger klog.Logger) (*framework.QueuedPodInfo, error) {
	p.lock.Lock()
	defer p.lock.Unlock()
	for p.activeCount == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return nil, ErrClosed
	}
	var pInfo *framework.QueuedPodInfo
	for i := range p.ring {
		idx := (p.next + i) % len(p.ring)
		if pq := p.ring[idx]; pq.activeQ.len() > 0 {
			pInfo = pq.activeQ.pop()
			p.next = (idx + 1) % len(p.ring)
			break
		}
	}
	if pInfo == nil {
		// activeCount and the heaps disagree: a bug, but never spin on it.
		logger.Error(nil, "Active pod count is positive but every active queue is empty", "activeCount", p.activeCount)
		p.activeCount = 0
		return nil, fmt.Errorf("scheduling queue is inconsistent")
	}
	p.activeCount--
	pInfo.Attempts++
	p.schedulingCycle++
	p.inFlightPods[pInfo.Pod.UID] = p.inFlightEvents.PushBack(pInfo.Pod)
	p.updateMetrics()
	return pInfo, nil
}

// Done ends the flight of the pod with uid: events after this no longer
// concern it. Calling it for a pod not in flight is a no-op.
func (p *PriorityQueue) Done(uid types.UID) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.done(uid)
}

func (p *PriorityQueue) done(uid types.UID) {
	e, ok := p.inFlightPods[uid]
	if !ok {
		return
	}
	delete(p.inFlightPods, uid)
	p.inFlightEvents.Remove(e)
	// Events older than the oldest pod still in flight concern nobody.
	for front := p.inFlightEvents.Front(); front != nil; front = p.inFlightEvents.Front() {
		if _, isPod := front.Value.(*v1.Pod); isPod {
			break
		}
		p.inFlightEvents.Remove(front)
	}
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

// determineSchedulingHintForInFlightPod replays the events seen while the
// pod was in flight against its rejecting plugins.
func (p *PriorityQueue) determineSchedulingHintForInFlightPod(logger klog.Logger, pInfo *framework.QueuedPodInfo) queueingStrategy {
	if pInfo.UnschedulablePlugins.Len() == 0 && pInfo.PendingPlugins.Len() == 0 {
		// No plugin rejected it: an error (an API call failed, ...). Retry
		// after backoff rather than wait for an event that may never come.
		return queueAfterBackoff
	}
	e, ok := p.inFlightPods[pInfo.Pod.UID]
	if !ok {
		logger.Error(nil, "Pod handed back to the queue was not in flight", "pod", klog.KObj(pInfo.Pod))
		return queueAfterBackoff
	}
	strategy := queueSkip
	for e = e.Next(); e != nil; e = e.Next() {
		ev, ok := e.Value.(*inFlightEvent)
		if !ok {
			continue
		}
		switch p.isPodWorthRequeuing(logger, pInfo, ev.event, ev.oldObj, ev.newObj) {
		case queueImmediately:
			return queueImmediately
		case queueAfterBackoff:
			strategy = queueAfterBackoff
			if pInfo.PendingPlugins.Len() == 0 {
				// Only a Pending plugin could make it queueImmediately.
				return queueAfterBackoff
			}
		}
	}
	return strategy
}

// isPodWorthRequeuing asks the queueing hints of the plugins that rejected
// the pod whether event may make it schedulable. The caller holds the lock.
func (p *PriorityQueue) isPodWorthRequeuing(logger klog.Logger, pInfo *framework.QueuedPodInfo, event framework.ClusterEvent, oldObj, newObj any) queueingStrategy {
	// Every event is offered to every pod in the pool: avoid building a
	// union when, as usual, no plugin returned Pending.
	rejectors := pInfo.UnschedulablePlugins
	if pInfo.PendingPlugins.Len() > 0 {
		rejectors = rejectors.Union(pInfo.PendingPlugins)
	}
	if rejectors.Len() == 0 {
		logger.V(6).Info("Worth requeuing because no failed plugins", "pod", klog.KObj(pInfo.Pod))
		return queueAfterBackoff
	}
	if event.IsWildCard() {
		// A wildcard event carrying a pod targets that pod only.
		if newObj != nil {
			if pod, ok := newObj.(*v1.Pod); !ok || pod.UID != pInfo.Pod.UID {
				return queueSkip
			}
		}
		return queueAfterBackoff
	}
	pq := p.profiles[pInfo.Pod.Spec.SchedulerName]
	if pq == nil {
		return queueSkip
	}
	strategy := queueSkip
	for _, eh := range pq.hints {
		if !eh.event.Match(event) {
			continue
		}
		for _, h := range eh.hints {
			if !rejectors.Has(h.plugin) {
				continue
			}
			hint, err := h.fn(logger, pInfo.Pod, oldObj, newObj)
			if err != nil {
				// A failing hint must not strand the pod.
				logger.Error(err, "QueueingHintFn returned an error", "event", event.Label(), "plugin", h.plugin, "pod", klog.KObj(pInfo.Pod))
				hint = framework.Queue
			}
			if hint == framework.QueueSkip {
				continue
			}
			if pInfo.PendingPlugins.Has(h.plugin) {
				return queueImmediately
			}
			if pInfo.PendingPlugins.Len() == 0 {
				return queueAfterBackoff
			}
			strategy = queueAfterBackoff
		}
	}
	return strategy
}

// isEventOfInterest reports whether any served profile registered an event
// matching event; others cannot move any pod and are dropped early.
func (p *PriorityQueue) isEventOfInterest(event framework.ClusterEvent) bool {
	if event.IsWildCard() {
		return true
	}
	for _, pq := range p.ring {
		if pq.interestedIn(event) {
			return true
		}
	}
	return false
}

// MoveAllToActiveOrBackoffQueue offers event to every pod in the
// unschedulable pool that passes preCheck (nil: all). Pods whose rejecting
// plugins' hints say the event may help move to the backoff or active
// queue. The event is also recorded for pods in flight.
func (p *PriorityQueue) MoveAllToActiveOrBackoffQueue(logger klog.Logger, event framework.ClusterEvent, oldObj, newObj any, preCheck PreEnqueueCheck) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if !p.isEventOfInterest(event) {
		return
	}
	pods := make([]*framework.QueuedPodInfo, 0, len(p.unschedulable))
	for _, e := range p.unschedulable {
		if preCheck == nil || preCheck(e.pInfo.Pod) {
			pods = append(pods, e.pInfo)
		}
	}
	p.movePodsToActiveOrBackoffQueue(logger, pods, event, oldObj, newObj)
	p.updateMetrics()
}

func (p *PriorityQueue) movePodsToActiveOrBackoffQueue(logger klog.Logger, pods []*framework.QueuedPodInfo, event framework.ClusterEvent, oldObj, newObj any) {
	activated := false
	for _, pInfo := range pods {
		// A gated pod is only worth a PreEnqueue run on its gating plugin's events.
		if pInfo.Gated() && !slices.ContainsFunc(pInfo.GatingPluginEvents, func(e framework.ClusterEvent) bool { return e.Match(event) }) {
			continue
		}
		strategy := p.isPodWorthRequeuing(logger, pInfo, event, oldObj, newObj)
		if strategy == queueSkip {
			// Guarded: this runs for every unschedulable pod on every event,
			// and the arguments allocate even when V(5) is off.
			if v := logger.V(5); v.Enabled() {
				v.Info("Event is not making pod schedulable", "pod", klog.KObj(pInfo.Pod), "event", event.Label())
			}
			continue
		}
		p.deleteUnschedulable(pInfo.Pod.UID)
		if p.requeuePodWithQueueingStrategy(logger, pInfo, strategy, event.Label()) == activeQ {
			activated = true
		}
	}
	if len(p.inFlightPods) > 0 {
		p.inFlightEvents.PushBack(&inFlightEvent{event: event, oldObj: oldObj, newObj: newObj})
	}
	if activated {
		p.cond.Broadcast()
	}
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

// flushBackoffQCompleted moves the pods whose backoff ended to the active queue.
func (p *PriorityQueue) flushBackoffQCompleted(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	activated := false
	for {
		pInfo := p.backoffQ.peek()
		if pInfo == nil || p.isPodBackingOff(pInfo) {
			break
		}
		p.backoffQ.pop()
		if p.moveToActiveQ(logger, pInfo, BackoffComplete) {
			activated = true
		}
	}
	if activated {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}

// flushUnschedulablePodsLeftover retries pods that waited in the pool
// longer than podMaxInUnschedulable, whatever their plugins registered.
func (p *PriorityQueue) flushUnschedulablePodsLeftover(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	now := p.clock.Now()
	var pods []*framework.QueuedPodInfo
	for _, e := range p.unschedulable {
		if now.Sub(e.pInfo.Timestamp) > p.podMaxInUnschedulable {
			pods = append(pods, e.pInfo)
		}
	}
	if len(pods) > 0 {
		p.movePodsToActiveOrBackoffQueue(logger, pods, EventUnschedulableTimeout, nil, nil)
	}
	p.updateMetrics()
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
		events = PodSchedulingPropertiesChange(newPod, oldPod)
	}
	if _, ok := p.inFlightPods[newPod.UID]; ok {
		// The attempt in flight uses the old pod; if it fails, these
		// events decide where the (then current) pod goes.
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

// AddNominatedPod records that pod is nominated to a node (framework.PodNominator).
func (p *PriorityQueue) AddNominatedPod(logger klog.Logger, pod *framework.PodInfo, nominatingInfo *framework.NominatingInfo) {
	p.nominator.add(logger, pod, nominatingInfo)
}

// DeleteNominatedPodIfExists forgets pod's nomination (framework.PodNominator).
func (p *PriorityQueue) DeleteNominatedPodIfExists(pod *v1.Pod) {
	p.nominator.delete(pod)
}

// UpdateNominatedPod replaces the nominated pod's PodInfo (framework.PodNominator).
func (p *PriorityQueue) UpdateNominatedPod(logger klog.Logger, oldPod *v1.Pod, newPodInfo *framework.PodInfo) {
	p.nominator.update(logger, oldPod, newPodInfo)
}

// NominatedPodsForNode returns the pods nominated to nodeName
// (framework.PodNominator). It takes no queue lock: Filter workers call it
// once per node.
func (p *PriorityQueue) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	return p.nominator.forNode(nodeName)
}

// NominatedNodeName returns the node pod is nominated to, if any.
func (p *PriorityQueue) NominatedNodeName(pod *v1.Pod) (string, bool) {
	return p.nominator.nodeOf(pod.UID)
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

// PendingPods returns every pod the queue holds (not those in flight).
func (p *PriorityQueue) PendingPods() []*v1.Pod {
	p.lock.Lock()
	defer p.lock.Unlock()
	var out []*v1.Pod
	for _, pq := range p.ring {
		for _, pi := range pq.activeQ.list() {
			out = append(out, pi.Pod)
		}
	}
	for _, pi := range p.backoffQ.list() {
		out = append(out, pi.Pod)
	}
	for _, e := range p.unschedulable {
		out = append(out, e.pInfo.Pod)
	}
	return out
}
