package queue

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// The queue's pod groups, ported from kube-scheduler 1.37 with
// GenericWorkload on, for the profiles that are workload-aware. All of
// these run with the lock held.

// isPodGroupMember reports whether pod is queued as a member of its
// PodGroup: it names one and its profile is workload-aware.
func (p *PriorityQueue) isPodGroupMember(pod *v1.Pod) bool {
	pq := p.profiles[pod.Spec.SchedulerName]
	if pq == nil || !pq.podGroups {
		return false
	}
	_, ok := framework.PodGroupNameOf(pod)
	return ok
}

// addPodGroupMember queues pInfo as a member of its pod group: in the
// group's entity wherever it is queued; in pendingPodGroupPods if the group
// is being scheduled; in a new entity in the active queue if it is the
// group's first queued pod; in incompletePodGroupPods while its PodGroup
// is not observed.
func (p *PriorityQueue) addPodGroupMember(logger klog.Logger, pInfo *framework.QueuedPodInfo) {
	root, ok := p.workloadForest.getRootKeyForPod(pInfo.Pod)
	if !ok {
		p.incompletePodGroupPods.add(pInfo)
		logger.V(5).Info("Pod with pod group added to incompletePodGroupPods, waiting for one or more parent pod group objects to be observed", "podGroup", root.Name, "pod", klog.KObj(pInfo.Pod))
		return
	}
	if p.addToPodGroupIfExists(logger, pInfo, root) {
		return
	}
	if p.lastPopped == (entityKey{group: root}) {
		p.pendingPodGroupPods.add(pInfo)
		logger.V(5).Info("Pod added to pending pod group pods, waiting for its root group to be requeued", "rootType", root.Type, "root", klog.KRef(root.Namespace, root.Name), "pod", klog.KObj(pInfo.Pod))
		return
	}
	g := p.workloadForest.buildQueuedPodGroupInfo(root)
	g.AddPod(pInfo)
	g.Timestamp = pInfo.Timestamp
	g.InitialAttemptTimestamp = pInfo.InitialAttemptTimestamp
	if p.moveToActiveQ(logger, g, EventUnscheduledPodAdd.Label()) {
		p.cond.Broadcast()
	}
	logger.V(5).Info("Pod was added to root group as the first member pod", "rootType", g.Type(), "root", klog.KObj(g), "pod", klog.KObj(pInfo.Pod))
}

// addToPodGroupIfExists adds pInfo to the queued entity of the group root
// and requeues the group where it was. It reports whether that entity
// exists.
func (p *PriorityQueue) addToPodGroupIfExists(logger klog.Logger, pInfo *framework.QueuedPodInfo, root framework.EntityKey) bool {
	e, strategy := p.deleteFromAnyQueue(entityKey{group: root})
	if e == nil {
		return false
	}
	g := e.(*framework.QueuedPodGroupInfo)
	g.AddPod(pInfo)
	queue := p.requeueEntityWithQueueingStrategy(logger, g, strategy, EventUnscheduledPodAdd.Label())
	if queue == activeQ {
		p.cond.Broadcast()
	}
	logger.V(5).Info("Pod added to existing root group info", "rootType", g.Type(), "root", klog.KObj(g), "pod", klog.KObj(pInfo.Pod), "queue", queue)
	return true
}

// getEntity returns the entity with key from any active queue, the backoff
// queue or the pool, or nil.
func (p *PriorityQueue) getEntity(key entityKey) framework.QueuedEntityInfo {
	for _, pq := range p.ring {
		if e := pq.activeQ.get(key); e != nil {
			return e
		}
	}
	if e := p.backoffQ.get(key); e != nil {
		return e
	}
	if u, ok := p.unschedulable[key]; ok {
		return u.entity
	}
	return nil
}

// deleteFromAnyQueue removes the entity with key from wherever it is
// queued and returns it with the strategy that queues it back there, or
// nil.
func (p *PriorityQueue) deleteFromAnyQueue(key entityKey) (framework.QueuedEntityInfo, queueingStrategy) {
	for _, pq := range p.ring {
		if e := pq.activeQ.delete(key); e != nil {
			return e, queueImmediately
		}
	}
	if e := p.backoffQ.delete(key); e != nil {
		return e, queueAfterBackoff
	}
	if e := p.deleteUnschedulable(key); e != nil {
		return e, queueSkip
	}
	return nil, queueSkip
}

// addUnschedulablePodGroupMember hands back a member that failed its
// attempt: its own backoff is not used (its group's is), and it rejoins its
// group, whatever state the group is in. It ends the pod's flight first, so
// that a group it joins in the active queue is never popped with it still
// in flight.
func (p *PriorityQueue) addUnschedulablePodGroupMember(logger klog.Logger, pInfo *framework.QueuedPodInfo) {
	pInfo.Timestamp = p.clock.Now()
	pInfo.BackoffExpiration = time.Time{}
	p.done(pInfo.Pod.UID)
	p.addPodGroupMember(logger, pInfo)
}

// knownPodGroupMember reports whether member pod is queued, in its group or
// waiting for it.
func (p *PriorityQueue) knownPodGroupMember(pod *v1.Pod) bool {
	root, ok := p.workloadForest.getRootKeyForPod(pod)
	if !ok {
		return p.incompletePodGroupPods.get(pod) != nil
	}
	if e := p.getEntity(entityKey{group: root}); e != nil && hasPod(e, pod.UID) {
		return true
	}
	return p.pendingPodGroupPods.get(pod) != nil
}

// updatePodGroupMember records a change of member newPod as upstream: in
// flight, the change becomes events replayed when it comes back; in its
// queued group, the pod is replaced, and in the pool the change is offered
// to the group's hints; waiting for its group or its PodGroup, it is
// replaced; unknown, it is added.
func (p *PriorityQueue) updatePodGroupMember(logger klog.Logger, oldPod, newPod *v1.Pod, events []framework.ClusterEvent) {
	if oldPod == nil {
		oldPod = newPod
	}
	root, ok := p.workloadForest.getRootKeyForPod(newPod)
	if !ok {
		if pInfo := p.incompletePodGroupPods.get(newPod); pInfo != nil {
			p.replacePod(logger, pInfo, oldPod, newPod)
		}
		return
	}
	if _, ok := p.inFlightPods[newPod.UID]; ok {
		for _, e := range events {
			p.inFlightEvents.PushBack(&inFlightEvent{event: e, oldObj: oldPod, newObj: newPod})
		}
		return
	}
	key := entityKey{group: root}
	for _, pq := range p.ring {
		if e := pq.activeQ.get(key); e != nil {
			if pInfo, err := e.(*framework.QueuedPodGroupInfo).Update(newPod); pInfo != nil {
				p.logUpdateErr(logger, err, e, newPod)
				p.nominator.update(logger, oldPod, pInfo.PodInfo)
				pq.activeQ.addOrUpdate(e)
				return
			}
		}
	}
	if e := p.backoffQ.get(key); e != nil {
		if pInfo, err := e.(*framework.QueuedPodGroupInfo).Update(newPod); pInfo != nil {
			p.logUpdateErr(logger, err, e, newPod)
			p.nominator.update(logger, oldPod, pInfo.PodInfo)
			return
		}
	}
	if u, ok := p.unschedulable[key]; ok {
		pInfo, err := u.entity.(*framework.QueuedPodGroupInfo).Update(newPod)
		if pInfo == nil {
			logger.Error(err, "Failed to update pod in an entity", "type", u.entity.Type(), "entity", klog.KObj(u.entity), "pod", klog.KObj(newPod))
			p.addPod(logger, p.newQueuedPodInfo(logger, newPod), EventUnscheduledPodUpdate.Label())
			return
		}
		p.logUpdateErr(logger, err, u.entity, newPod)
		p.nominator.update(logger, oldPod, pInfo.PodInfo)
		for _, evt := range events {
			strategy := p.isEntityWorthRequeuing(logger, u.entity, evt, oldPod, newPod)
			if strategy == queueSkip {
				continue
			}
			p.deleteUnschedulable(key)
			queue := p.requeueEntityWithQueueingStrategy(logger, u.entity, strategy, evt.Label())
			logger.V(5).Info("Entity moved to an internal scheduling queue because the Pod is updated", "type", u.entity.Type(), "entity", klog.KObj(u.entity), "pod", klog.KObj(newPod), "event", evt.Label(), "queue", queue)
			if queue == activeQ {
				p.cond.Broadcast()
			}
			if queue != unschedulableQ {
				break
			}
		}
		return
	}
	if pInfo := p.pendingPodGroupPods.get(newPod); pInfo != nil {
		p.replacePod(logger, pInfo, oldPod, newPod)
		return
	}
	p.addPod(logger, p.newQueuedPodInfo(logger, newPod), EventUnscheduledPodUpdate.Label())
}

// logUpdateErr logs affinity terms of an updated member that could not be
// parsed; the update is applied regardless, as for a single pod.
func (p *PriorityQueue) logUpdateErr(logger klog.Logger, err error, e framework.QueuedEntityInfo, pod *v1.Pod) {
	if err != nil {
		logger.V(4).Info("Parsing the pod's affinity terms", "type", e.Type(), "entity", klog.KObj(e), "pod", klog.KObj(pod), "err", err)
	}
}

// deletePodGroupMember removes member pod from its group, or from where it
// waits for it. A group left with no queued pod leaves the queue; any
// other is queued back where it was.
func (p *PriorityQueue) deletePodGroupMember(logger klog.Logger, pod *v1.Pod) {
	root, ok := p.workloadForest.getRootKeyForPod(pod)
	if !ok {
		if p.incompletePodGroupPods.delete(pod) != nil {
			logger.V(5).Info("Pod deleted from incompletePodGroupPods", "pod", klog.KObj(pod), "podGroup", root.Name)
		}
		return
	}
	e, strategy := p.deleteFromAnyQueue(entityKey{group: root})
	if e == nil {
		if p.pendingPodGroupPods.delete(pod) != nil {
			logger.V(5).Info("Pod belonging to a root group got deleted from pending pod group info", "rootType", root.Type, "root", klog.KRef(root.Namespace, root.Name), "pod", klog.KObj(pod))
		}
		return
	}
	g := e.(*framework.QueuedPodGroupInfo)
	if g.RemovePod(pod) != nil {
		logger.V(5).Info("Pod deleted from existing root group info", "rootType", g.Type(), "root", klog.KObj(g), "pod", klog.KObj(pod))
	}
	if !g.HasQueuedPodInfos() {
		return
	}
	// As upstream, the group's move is labelled as a pod add.
	if p.requeueEntityWithQueueingStrategy(logger, g, strategy, EventUnscheduledPodAdd.Label()) == activeQ {
		p.cond.Broadcast()
	}
}

// AddAttemptedPodGroupIfNeeded hands back a pod group after its scheduling
// attempt, with the attempt's status. The pods that came back meanwhile
// (failed ones through AddUnschedulableIfNotPresent, new members through
// Add) waited in pendingPodGroupPods; they form the group again, which
// keeps pgInfo's queueing state. With none, there is nothing to requeue.
// After a successful attempt the group goes straight to the active queue,
// its counts reset, and, if some of its pods failed, its timestamp kept so
// that they are retried (and may preempt) before others of equal priority;
// after a rejection or an error, its count of those goes up, its timestamp
// is renewed and it backs off. It must be called once per popped group, in
// the scheduling loop, after the attempt's pods were handed back.
func (p *PriorityQueue) AddAttemptedPodGroupIfNeeded(logger klog.Logger, pgInfo *framework.QueuedPodGroupInfo, schedulingCycle int64, status *framework.Status) error {
	p.lock.Lock()
	defer p.lock.Unlock()
	key := keyOf(pgInfo)
	if _, ok := p.unschedulable[key]; ok {
		return fmt.Errorf("pod group %v is already present in unschedulable queue", klog.KObj(pgInfo))
	}
	for _, pq := range p.ring {
		if pq.activeQ.has(key) {
			return fmt.Errorf("pod group %v is already present in the active queue", klog.KObj(pgInfo))
		}
	}
	if p.backoffQ.has(key) {
		return fmt.Errorf("pod group %v is already present in the backoff queue", klog.KObj(pgInfo))
	}
	p.lastPopped = entityKey{}
	defer p.updateMetrics()

	var pendingPods []*framework.QueuedPodInfo
	for _, leaf := range p.workloadForest.getLeafPodGroups(key.group) {
		pendingPods = append(pendingPods, p.pendingPodGroupPods.clear(leaf.Namespace, leaf.Name)...)
	}
	if len(pendingPods) == 0 {
		return nil
	}
	hadUnschedulableOrErrorPods := hasIntersection(pgInfo.QueuedPodInfos, pendingPods)

	g := p.workloadForest.buildQueuedPodGroupInfo(key.group)
	if g == nil {
		// Cannot happen: deleting the PodGroup moves the pending pods to
		// incompletePodGroupPods.
		for _, pInfo := range pendingPods {
			p.incompletePodGroupPods.add(pInfo)
		}
		logger.Error(nil, "Root group no longer exists on requeue attempt, decomposed and moved pods to incompletePodGroupPods", "rootType", pgInfo.Type(), "root", klog.KObj(pgInfo))
		return nil
	}
	for _, pInfo := range pendingPods {
		g.AddPod(pInfo)
	}
	g.QueueingParams = pgInfo.QueueingParams

	requeueWithoutBackoff := false
	preserveTimestamp := false
	switch {
	case status.IsSuccess():
		requeueWithoutBackoff = true
		preserveTimestamp = hadUnschedulableOrErrorPods
		g.ConsecutiveErrorsCount = 0
		g.UnschedulableCount = 0
	case status.IsRejected():
		g.UnschedulableCount++
		g.ConsecutiveErrorsCount = 0
		g.BackoffExpiration = time.Time{}
	default:
		g.ConsecutiveErrorsCount++
		g.BackoffExpiration = time.Time{}
	}
	if !preserveTimestamp {
		g.Timestamp = p.clock.Now()
	}

	queue := unschedulableQ
	if !requeueWithoutBackoff && p.isBackingOff(g) {
		p.moveToBackoffQ(logger, g, ScheduleAttemptFailure)
		queue = backoffQ
	} else if p.moveToActiveQ(logger, g, ScheduleAttemptFailure) {
		queue = activeQ
	}
	logger.V(3).Info("Pod group moved to an internal scheduling queue", "podGroup", klog.KObj(g), "event", ScheduleAttemptFailure, "queue", queue, "schedulingCycle", schedulingCycle, "unschedulablePlugins", sets.List(g.UnschedulablePlugins.Union(g.PendingPlugins)))
	if queue == activeQ {
		p.cond.Broadcast()
	}
	return nil
}

// hasIntersection reports whether a pod of pInfos is in m.
func hasIntersection(m map[framework.EntityKey][]*framework.QueuedPodInfo, pInfos []*framework.QueuedPodInfo) bool {
	uids := sets.New[types.UID]()
	for _, l := range m {
		for _, pInfo := range l {
			uids.Insert(pInfo.Pod.UID)
		}
	}
	for _, pInfo := range pInfos {
		if uids.Has(pInfo.Pod.UID) {
			return true
		}
	}
	return false
}

// AddPodGroup records a new PodGroup; its members waiting for it in
// incompletePodGroupPods are queued.
func (p *PriorityQueue) AddPodGroup(logger klog.Logger, pg *schedulingv1beta1.PodGroup) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.workloadForest.addPodGroup(pg)
	root, ok := p.workloadForest.getRootKeyForPodGroup(pg)
	if !ok {
		return
	}
	var pInfos []*framework.QueuedPodInfo
	for _, leaf := range p.workloadForest.getLeafPodGroups(root) {
		pInfos = append(pInfos, p.incompletePodGroupPods.clear(leaf.Namespace, leaf.Name)...)
	}
	for _, pInfo := range pInfos {
		p.addPodGroupMember(logger, pInfo)
	}
	logger.V(5).Info("Pod Group was added to the root group and its pods were attempted to be moved from incompletePodGroupPods to the queue", "rootType", root.Type, "root", klog.KRef(root.Namespace, root.Name), "podGroup", klog.KObj(pg), "podsLen", len(pInfos))
	p.updateMetrics()
}

// UpdatePodGroup records a new version of a PodGroup, also in its queued
// group. Unlike upstream, a queued group is re-sorted in its queue: its
// priority may have changed.
func (p *PriorityQueue) UpdatePodGroup(logger klog.Logger, pg *schedulingv1beta1.PodGroup) {
	p.lock.Lock()
	defer p.lock.Unlock()
	p.workloadForest.updatePodGroup(pg)
	root, ok := p.workloadForest.getRootKeyForPodGroup(pg)
	if !ok {
		return
	}
	key := entityKey{group: root}
	e := p.getEntity(key)
	if e == nil {
		return
	}
	e.(*framework.QueuedPodGroupInfo).UpdatePodGroup(pg)
	for _, pq := range p.ring {
		if pq.activeQ.has(key) {
			pq.activeQ.addOrUpdate(e)
		}
	}
	logger.V(5).Info("Pod Group in the scheduling queue was updated for the root group", "rootType", e.Type(), "root", klog.KObj(e), "podGroup", klog.KObj(pg))
}

// DeletePodGroup forgets a PodGroup: its queued members (and those waiting
// for its attempt to end) wait in incompletePodGroupPods for it to come
// back.
func (p *PriorityQueue) DeletePodGroup(logger klog.Logger, pg *schedulingv1beta1.PodGroup) {
	p.lock.Lock()
	defer p.lock.Unlock()
	defer p.updateMetrics()
	root, hadRoot := p.workloadForest.getRootKeyForPodGroup(pg)
	p.workloadForest.deletePodGroup(pg)
	if !hadRoot {
		return
	}
	e, strategy := p.deleteFromAnyQueue(entityKey{group: root})
	if e == nil {
		if p.lastPopped != (entityKey{group: root}) {
			// Not queued and not being scheduled: no pod of it is held.
			return
		}
		pending := p.pendingPodGroupPods.clear(pg.Namespace, pg.Name)
		for _, pInfo := range pending {
			p.incompletePodGroupPods.add(pInfo)
		}
		if len(pending) > 0 {
			logger.V(5).Info("Pod group deleted, decomposed and enqueued pending pods for the pod group to incompletePodGroupPods", "podGroup", klog.KObj(pg), "pods", len(pending))
		}
		return
	}
	g := e.(*framework.QueuedPodGroupInfo)
	removed := g.RemovePodGroup(pg)
	for _, pInfo := range removed {
		p.incompletePodGroupPods.add(pInfo)
	}
	logger.V(5).Info("Pod group deleted from root group, decomposed and enqueued pods to incompletePodGroupPods", "rootType", g.Type(), "root", klog.KObj(g), "podGroup", klog.KObj(pg), "pods", len(removed))
	if !g.HasQueuedPodInfos() {
		return
	}
	if p.requeueEntityWithQueueingStrategy(logger, g, strategy, EventUnscheduledPodUpdate.Label()) == activeQ {
		p.cond.Broadcast()
	}
}
