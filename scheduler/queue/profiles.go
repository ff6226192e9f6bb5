package queue

import (
	"context"
	"slices"

	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// profileQueue is what the queue keeps per profile. It is replaced as a
// whole when the profile gets a new instance.
type profileQueue struct {
	name    string
	activeQ *entityHeap
	// podGroups says the profile is workload-aware: its pods that name a
	// PodGroup are queued as members of that group.
	podGroups bool
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

// SetProfile starts serving the pods of fwk's profile, or switches an
// existing profile to the new instance: its active queue is re-sorted with
// the new QueueSort, and the entities the old instance left in the pool
// are retried, since the new plugins may judge them differently. If the
// profile became, or stopped being, workload-aware, its pods are queued
// again the new way. ctx is passed to EnqueueExtensions.
func (p *PriorityQueue) SetProfile(ctx context.Context, fwk framework.Framework) {
	logger := klog.FromContext(ctx)
	pq := newProfileQueue(ctx, fwk)
	pq.podGroups = p.isWorkloadAware != nil && p.isWorkloadAware(fwk)

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

	var retry []framework.QueuedEntityInfo
	for _, u := range p.unschedulable {
		if profileOf(u.entity) == pq.name {
			retry = append(retry, u.entity)
		}
	}
	moved := false
	for _, e := range retry {
		if e.Gated() {
			// The new instance may gate differently: ask its PreEnqueue
			// plugins again (moveToActiveQ keeps it in the pool if gated).
			clearGatingPlugin(e)
			p.deleteUnschedulable(keyOf(e))
			if p.moveToActiveQ(logger, e, ProfileUpdated) {
				moved = true
			}
			continue
		}
		if p.requeueEntityWithQueueingStrategy(logger, e, queueAfterBackoff, ProfileUpdated) == activeQ {
			moved = true
		}
	}
	if old.podGroups != pq.podGroups && p.requeueProfilePods(logger, pq.name) {
		moved = true
	}
	if moved {
		p.cond.Broadcast()
	}
	p.updateMetrics()
}

// requeueProfilePods takes every queued pod of the profile name out of the
// queue and queues it again, as a pod group member or on its own as the
// profile now says. Each keeps its queueing history; pods in flight follow
// when they come back. It reports whether a pod became active.
func (p *PriorityQueue) requeueProfilePods(logger klog.Logger, name string) bool {
	pInfos := append(p.incompletePodGroupPods.takeProfile(name), p.pendingPodGroupPods.takeProfile(name)...)
	for _, e := range p.takeEntities(func(e framework.QueuedEntityInfo) bool { return profileOf(e) == name }) {
		e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
			pInfos = append(pInfos, pInfo)
			return true
		})
	}
	activeBefore := p.activeEntities()
	for _, pInfo := range pInfos {
		p.addPod(logger, pInfo, ProfileUpdated)
	}
	return p.activeEntities() > activeBefore
}

// takeEntities removes from the active queues, the backoff queue and the
// pool the entities match selects, and returns them.
func (p *PriorityQueue) takeEntities(match func(framework.QueuedEntityInfo) bool) []framework.QueuedEntityInfo {
	var taken []framework.QueuedEntityInfo
	for _, pq := range p.ring {
		for _, e := range pq.activeQ.list() {
			if match(e) {
				taken = append(taken, pq.activeQ.delete(keyOf(e)))
			}
		}
	}
	for _, e := range p.backoffQ.list() {
		if match(e) {
			taken = append(taken, p.backoffQ.delete(keyOf(e)))
		}
	}
	for key, u := range p.unschedulable {
		if match(u.entity) {
			taken = append(taken, p.deleteUnschedulable(key))
		}
	}
	return taken
}

// RemoveProfile stops serving a profile: its pods leave the queue (they
// come back through Add if the profile returns). Pods of the profile being
// scheduled finish their cycle; if they fail they are dropped. A pod group
// queued under the profile leaves with it, except for pods of other
// profiles in it, which are queued again.
func (p *PriorityQueue) RemoveProfile(logger klog.Logger, name string) {
	p.lock.Lock()
	defer p.lock.Unlock()
	pq := p.profiles[name]
	if pq == nil {
		return
	}
	taken := p.takeEntities(func(e framework.QueuedEntityInfo) bool { return profileOf(e) == name })
	delete(p.profiles, name)
	i := slices.Index(p.ring, pq)
	p.ring = slices.Delete(p.ring, i, i+1)
	if p.next > i {
		p.next--
	}
	var others []*framework.QueuedPodInfo
	for _, e := range taken {
		e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
			if pInfo.Pod.Spec.SchedulerName == name {
				p.nominator.delete(pInfo.Pod)
			} else {
				others = append(others, pInfo)
			}
			return true
		})
	}
	for _, pInfo := range append(p.incompletePodGroupPods.takeProfile(name), p.pendingPodGroupPods.takeProfile(name)...) {
		p.nominator.delete(pInfo.Pod)
	}
	for _, pInfo := range others {
		p.addPod(logger, pInfo, ProfileUpdated)
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
	pq.activeQ = newEntityHeap(pq.lessFunc(fwk))
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
