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
