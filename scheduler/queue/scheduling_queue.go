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

// WithWorkloadAwareProfiles says which profiles queue the members of a
// PodGroup (pods whose spec.schedulingGroup.podGroupName names one) as one
// entity, as kube-scheduler does with GenericWorkload on. It is asked about
// each instance SetProfile receives; without it no profile is, and every
// pod is queued on its own.
func WithWorkloadAwareProfiles(isWorkloadAware func(framework.Framework) bool) Option {
	return func(p *PriorityQueue) { p.isWorkloadAware = isWorkloadAware }
}

// PriorityQueue is the scheduling queue. All methods are safe for
// concurrent use.
type PriorityQueue struct {
	clock                 clock.WithTicker
	podInitialBackoff     time.Duration
	podMaxBackoff         time.Duration
	podMaxInUnschedulable time.Duration
	podLister             listersv1.PodLister
	isWorkloadAware       func(framework.Framework) bool
	metrics               *metrics.Metrics
	pending               pendingGauges

	// nominator has its own lock so Filter workers never wait for the
	// queue's; the queue takes it while holding lock, never the reverse.
	nominator *nominator

	// lock guards every field below. cond is signalled, under lock,
	// whenever an entity enters an active queue or the queue closes; Pop
	// waits on it.
	lock   sync.Mutex
	cond   sync.Cond
	closed bool

	// profiles maps a schedulerName to its queue; ring holds the same
	// profiles in the order Pop serves them, next is where the next Pop
	// starts looking.
	profiles map[string]*profileQueue
	ring     []*profileQueue
	next     int

	// The queue holds entities: single pods, and, for workload-aware
	// profiles, pod groups with their queued pods. A member of a pod group
	// is, exactly as upstream keeps it: in incompletePodGroupPods while its
	// PodGroup is not in workloadForest; otherwise in its group's entity
	// (active, backoff or the pool), unless that group is being scheduled
	// (lastPopped), in which case it waits in pendingPodGroupPods until the
	// attempt ends (AddAttemptedPodGroupIfNeeded).

	// backoffQ orders entities by the end of their backoff.
	backoffQ *entityHeap
	// unschedulable is the pool of entities waiting for an event, gated
	// ones included; unschedulablePods and gatedPods count their pods.
	unschedulable     map[entityKey]unschedulableEntry
	unschedulablePods int
	gatedPods         int
	// workloadForest is the PodGroup objects the queue was told about.
	workloadForest *workloadForest
	// incompletePodGroupPods are members whose PodGroup is not observed yet.
	incompletePodGroupPods *podGroupMemberPods
	// pendingPodGroupPods are members that arrived, or came back, while
	// their group was being scheduled.
	pendingPodGroupPods *podGroupMemberPods
	// lastPopped is the entity Pop returned last, until it is handed back;
	// members of a group being scheduled wait for it in pendingPodGroupPods.
	lastPopped entityKey

	// inFlightPods maps the UID of each pod being scheduled to its marker
	// in inFlightEvents. inFlightEvents interleaves those markers (*v1.Pod)
	// with the events (*inFlightEvent) received since; a pod that fails is
	// checked against the events after its marker. Events before the
	// oldest marker concern nobody and are dropped.
	inFlightPods   map[types.UID]*list.Element
	inFlightEvents *list.List
	// schedulingCycle counts the entities popped.
	schedulingCycle int64
}

var (
	_ framework.PodNominator = (*PriorityQueue)(nil)
	_ framework.PodActivator = (*PriorityQueue)(nil)
)

// New returns an empty queue that knows no profile yet.
func New(opts ...Option) *PriorityQueue {
	p := &PriorityQueue{
		clock:                  clock.RealClock{},
		podInitialBackoff:      DefaultPodInitialBackoffDuration,
		podMaxBackoff:          DefaultPodMaxBackoffDuration,
		podMaxInUnschedulable:  DefaultPodMaxInUnschedulablePodsDuration,
		profiles:               make(map[string]*profileQueue),
		unschedulable:          make(map[entityKey]unschedulableEntry),
		workloadForest:         newWorkloadForest(),
		incompletePodGroupPods: newPodGroupMemberPods(),
		pendingPodGroupPods:    newPodGroupMemberPods(),
		inFlightPods:           make(map[types.UID]*list.Element),
		inFlightEvents:         list.New(),
	}
	for _, o := range opts {
		o(p)
	}
	if p.metrics == nil {
		p.metrics = metrics.NewUnregistered()
	}
	p.pending = newPendingGauges(p.metrics)
	p.cond.L = &p.lock
	p.backoffQ = newEntityHeap(func(a, b *framework.QueuedPodInfo) bool {
		return a.BackoffExpiration.Before(b.BackoffExpiration)
	})
	p.nominator = newNominator(p.podLister)
	return p
}

// Run moves entities whose backoff ended and flushes entities left too long
// in the unschedulable pool, until ctx ends; then it closes the queue.
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
	p.addPod(logger, p.newQueuedPodInfo(logger, pod), EventUnscheduledPodAdd.Label())
	p.updateMetrics()
}

// addPod queues a pod the queue does not hold: a pod group member joins its
// group, any other pod goes to its profile's active queue (or to the pool
// if gated). event labels the move of a single pod.
func (p *PriorityQueue) addPod(logger klog.Logger, pInfo *framework.QueuedPodInfo, event string) {
	if p.isPodGroupMember(pInfo.Pod) {
		// As upstream, a member's nomination is recorded whether or not
		// it enters the active queue.
		p.nominator.add(logger, pInfo.PodInfo, nil)
		p.addPodGroupMember(logger, pInfo)
		return
	}
	if p.moveToActiveQ(logger, pInfo, event) {
		p.cond.Broadcast()
	}
}

// known reports whether pod is in a queue or being scheduled.
func (p *PriorityQueue) known(pod *v1.Pod) bool {
	uid := pod.UID
	if _, ok := p.inFlightPods[uid]; ok {
		return true
	}
	if p.isPodGroupMember(pod) {
		return p.knownPodGroupMember(pod)
	}
	key := podEntityKey(uid)
	if _, ok := p.unschedulable[key]; ok {
		return true
	}
	if p.backoffQ.has(key) {
		return true
	}
	pq := p.profiles[pod.Spec.SchedulerName]
	return pq != nil && pq.activeQ.has(key)
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
	if p.isPodGroupMember(newPod) {
		p.updatePodGroupMember(logger, oldPod, newPod, events)
		return
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
	key := podEntityKey(newPod.UID)
	pq := p.profiles[newPod.Spec.SchedulerName]
	if e := pq.activeQ.get(key); e != nil {
		pInfo := e.(*framework.QueuedPodInfo)
		p.replacePod(logger, pInfo, oldPod, newPod)
		pq.activeQ.addOrUpdate(pInfo)
		return
	}
	if e := p.backoffQ.get(key); e != nil {
		p.replacePod(logger, e.(*framework.QueuedPodInfo), oldPod, newPod)
		return
	}
	if e, ok := p.unschedulable[key]; ok {
		pInfo := e.entity.(*framework.QueuedPodInfo)
		p.replacePod(logger, pInfo, oldPod, newPod)
		for _, evt := range events {
			strategy := p.isPodWorthRequeuing(logger, pInfo, evt, oldPod, newPod)
			if strategy == queueSkip {
				continue
			}
			p.deleteUnschedulable(key)
			queue := p.requeueEntityWithQueueingStrategy(logger, pInfo, strategy, evt.Label())
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

// Delete removes a pod from the queue; a pod group left with no queued pod
// leaves the queue too. A pod in flight finishes its attempt and is dropped
// when it comes back (the scheduler checks the informer).
func (p *PriorityQueue) Delete(logger klog.Logger, pod *v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.nominator.delete(pod)
	if p.isPodGroupMember(pod) {
		p.deletePodGroupMember(logger, pod)
		p.updateMetrics()
		return
	}
	key := podEntityKey(pod.UID)
	if pq := p.profiles[pod.Spec.SchedulerName]; pq != nil {
		pq.activeQ.delete(key)
	}
	p.backoffQ.delete(key)
	p.deleteUnschedulable(key)
	p.updateMetrics()
}

// Activate moves pods from the backoff queue or the unschedulable pool to
// the active queue (framework.PodActivator); activating a pod group member
// activates its whole group. A pod in flight is marked so that it is
// retried at once if its attempt fails; unknown pods are ignored, as are
// members whose PodGroup is not observed.
func (p *PriorityQueue) Activate(logger klog.Logger, pods map[string]*v1.Pod) {
	p.lock.Lock()
	defer p.lock.Unlock()
	activated := false
	for _, pod := range pods {
		key := podEntityKey(pod.UID)
		if p.isPodGroupMember(pod) {
			root, ok := p.workloadForest.getRootKeyForPod(pod)
			if !ok {
				continue
			}
			key = entityKey{group: root}
		}
		if p.activate(logger, key) {
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

func (p *PriorityQueue) activate(logger klog.Logger, key entityKey) bool {
	var e framework.QueuedEntityInfo
	if u, ok := p.unschedulable[key]; ok {
		e = u.entity
	} else if e = p.backoffQ.get(key); e == nil {
		return false
	}
	return p.moveToActiveQ(logger, e, ForceActivate)
}

// SchedulingCycle returns the number of entities popped so far.
func (p *PriorityQueue) SchedulingCycle() int64 {
	p.lock.Lock()
	defer p.lock.Unlock()
	return p.schedulingCycle
}

// AddUnschedulableIfNotPresent hands back a pod that failed its attempt.
// The scheduler has set pInfo's UnschedulablePlugins and PendingPlugins
// from the failure (empty for an error). If an event seen while the pod
// was in flight may help it, it goes to the backoff or active queue;
// otherwise to the unschedulable pool. A pod group member rejoins its group
// instead (or waits for it, if the group is being scheduled), whose own
// state decides where it goes. It ends the pod's flight.
func (p *PriorityQueue) AddUnschedulableIfNotPresent(logger klog.Logger, pInfo *framework.QueuedPodInfo, podSchedulingCycle int64) error {
	p.lock.Lock()
	defer p.lock.Unlock()
	defer p.done(pInfo.Pod.UID)
	pod := pInfo.Pod
	if p.closed || p.profiles[pod.Spec.SchedulerName] == nil {
		return nil
	}
	key := podEntityKey(pod.UID)
	if _, ok := p.unschedulable[key]; ok {
		return fmt.Errorf("pod %v is already present in unschedulable queue", klog.KObj(pod))
	}
	if p.profiles[pod.Spec.SchedulerName].activeQ.has(key) {
		return fmt.Errorf("pod %v is already present in the active queue", klog.KObj(pod))
	}
	if p.backoffQ.has(key) {
		return fmt.Errorf("pod %v is already present in the backoff queue", klog.KObj(pod))
	}
	if p.isPodGroupMember(pod) {
		p.addUnschedulablePodGroupMember(logger, pInfo)
		p.updateMetrics()
		return nil
	}
	p.lastPopped = entityKey{}
	// A retried pod goes behind pods of equal priority, and its backoff
	// starts now.
	pInfo.Timestamp = p.clock.Now()
	pInfo.BackoffExpiration = pInfo.Timestamp.Add(p.backoffDuration(pInfo))

	strategy := p.determineSchedulingHintForInFlightPod(logger, pInfo)
	queue := p.requeueEntityWithQueueingStrategy(logger, pInfo, strategy, ScheduleAttemptFailure)
	logger.V(3).Info("Pod moved to an internal scheduling queue", "pod", klog.KObj(pod), "event", ScheduleAttemptFailure,
		"queue", queue, "schedulingCycle", podSchedulingCycle, "unschedulablePlugins", sets.List(pInfo.UnschedulablePlugins.Union(pInfo.PendingPlugins)))
	if queue == activeQ {
		p.cond.Broadcast()
	}
	p.updateMetrics()
	return nil
}

// Summary counts the pods in each part of the queue; the pods of a pod
// group count where their group is.
type Summary struct {
	Active, Backoff, Unschedulable, Gated, InFlight int
	// PendingPodGroupPods are pod group members waiting for their group's
	// attempt to end; IncompletePodGroupPods, for their PodGroup object.
	PendingPodGroupPods, IncompletePodGroupPods int
}

// Summary returns the current counts.
func (p *PriorityQueue) Summary() Summary {
	p.lock.Lock()
	defer p.lock.Unlock()
	return Summary{
		Active:                 p.activePods(),
		Backoff:                p.backoffQ.pods,
		Unschedulable:          p.unschedulablePods,
		Gated:                  p.gatedPods,
		InFlight:               len(p.inFlightPods),
		PendingPodGroupPods:    p.pendingPodGroupPods.len(),
		IncompletePodGroupPods: p.incompletePodGroupPods.len(),
	}
}

// activePods counts the pods over all active queues.
func (p *PriorityQueue) activePods() int {
	n := 0
	for _, pq := range p.ring {
		n += pq.activeQ.pods
	}
	return n
}
