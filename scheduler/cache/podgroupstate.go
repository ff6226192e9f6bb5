package cache

import (
	"container/list"
	"fmt"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// podGroupStateData is what the cache knows about one pod group, shared by
// the live podGroupState and its podGroupStateSnapshot. podGroup comes from
// the PodGroup object, the rest from the pods that name the group: a group
// has data as soon as one of them does, before its PodGroup is seen.
type podGroupStateData struct {
	// generation is the cache's pod-group generation when the data last
	// changed; an unchanged group is not copied into a snapshot again.
	generation int64
	// allPods are the group's pods the scheduler knows.
	allPods map[types.UID]*v1.Pod
	// unscheduledPods are neither assumed nor assigned.
	unscheduledPods sets.Set[types.UID]
	// assumedPods passed Reserve and are not bound yet (they may wait at
	// Permit for the rest of their gang).
	assumedPods map[types.UID]*v1.Pod
	// assignedPods are bound.
	assignedPods sets.Set[types.UID]
	// podGroup is the cached PodGroup object, nil until it is seen.
	podGroup *schedulingv1beta1.PodGroup
}

func newPodGroupStateData() podGroupStateData {
	return podGroupStateData{
		allPods:         make(map[types.UID]*v1.Pod),
		unscheduledPods: sets.New[types.UID](),
		assumedPods:     make(map[types.UID]*v1.Pod),
		assignedPods:    sets.New[types.UID](),
	}
}

// addPod adds pod as assigned when it names a node, else as unscheduled.
func (d *podGroupStateData) addPod(pod *v1.Pod) {
	d.allPods[pod.UID] = pod
	if pod.Spec.NodeName != "" {
		d.assignedPods.Insert(pod.UID)
		// The pod may have been known in another state, e.g. a queued
		// member bound by someone else.
		d.unscheduledPods.Delete(pod.UID)
		delete(d.assumedPods, pod.UID)
	} else {
		d.unscheduledPods.Insert(pod.UID)
	}
}

// updatePod replaces the pod and moves it to assigned when it was bound.
func (d *podGroupStateData) updatePod(oldPod, newPod *v1.Pod) {
	d.allPods[newPod.UID] = newPod
	if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
		d.assignedPods.Insert(newPod.UID)
		d.unscheduledPods.Delete(newPod.UID)
		delete(d.assumedPods, newPod.UID)
	}
}

// deletePod forgets the pod.
func (d *podGroupStateData) deletePod(podUID types.UID) {
	delete(d.allPods, podUID)
	d.unscheduledPods.Delete(podUID)
	delete(d.assumedPods, podUID)
	d.assignedPods.Delete(podUID)
}

// assumePod marks a known pod assumed (assigned if the stored pod is already
// bound). A pod it does not know, deleted while it was being scheduled, is
// ignored.
func (d *podGroupStateData) assumePod(pod *v1.Pod) {
	storedPod, ok := d.allPods[pod.UID]
	if !ok {
		return
	}
	if storedPod.Spec.NodeName != "" {
		d.assignedPods.Insert(pod.UID)
	} else {
		d.assumedPods[pod.UID] = pod
	}
	d.unscheduledPods.Delete(pod.UID)
}

// forgetPod moves an assumed pod back to unscheduled (assigned if the stored
// pod is bound). A pod it does not know is ignored.
func (d *podGroupStateData) forgetPod(podUID types.UID) {
	pod := d.allPods[podUID]
	if pod == nil {
		return
	}
	delete(d.assumedPods, podUID)
	if pod.Spec.NodeName != "" {
		d.assignedPods.Insert(podUID)
	} else {
		d.unscheduledPods.Insert(podUID)
	}
}

func (d *podGroupStateData) scheduledPods() []*v1.Pod {
	out := make([]*v1.Pod, 0, len(d.assignedPods)+len(d.assumedPods))
	for uid := range d.assignedPods {
		out = append(out, d.allPods[uid])
	}
	for _, pod := range d.assumedPods {
		out = append(out, pod)
	}
	return out
}

// empty reports whether nothing is left to know: no pod and no PodGroup.
func (d *podGroupStateData) empty() bool {
	return len(d.allPods) == 0 && d.podGroup == nil
}

func (d *podGroupStateData) scheduledPodsCount() int {
	return len(d.assumedPods) + len(d.assignedPods)
}

// clone copies the sets and maps; the pods and the PodGroup are shared, as
// the scheduler never mutates them.
func (d *podGroupStateData) clone() podGroupStateData {
	return podGroupStateData{
		generation:      d.generation,
		allPods:         maps.Clone(d.allPods),
		unscheduledPods: d.unscheduledPods.Clone(),
		assumedPods:     maps.Clone(d.assumedPods),
		assignedPods:    d.assignedPods.Clone(),
		podGroup:        d.podGroup,
	}
}

func (d *podGroupStateData) unscheduledPodsMap() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod, len(d.unscheduledPods))
	for uid := range d.unscheduledPods {
		pod := d.allPods[uid]
		out[pod.Name] = pod
	}
	return out
}

// podGroupState is the cache's live state of a pod group. The cache changes
// it holding its own lock for writing and lock; readers that got it from
// Cache.PodGroupStates, outside the cache's lock (plugins), read it
// under lock.
type podGroupState struct {
	lock sync.RWMutex
	podGroupStateData
	// key is the group's key.
	key framework.EntityKey
	// elem is the state's place in the cache's generation-ordered list.
	elem *list.Element
}

var _ framework.PodGroupState = (*podGroupState)(nil)

// change applies fn to the data under the state's lock, stamping it with generation.
func (pgs *podGroupState) change(generation int64, fn func(d *podGroupStateData)) {
	pgs.lock.Lock()
	defer pgs.lock.Unlock()
	fn(&pgs.podGroupStateData)
	pgs.generation = generation
}

func (pgs *podGroupState) snapshot() *podGroupStateSnapshot {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return &podGroupStateSnapshot{podGroupStateData: pgs.clone()}
}

func (pgs *podGroupState) empty() bool {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.podGroupStateData.empty()
}

// AllPods returns the UIDs of all pods known to the scheduler for this group.
func (pgs *podGroupState) AllPods() sets.Set[types.UID] {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return sets.KeySet(pgs.allPods)
}

// AllPodsCount returns the number of all pods known to the scheduler for this group.
func (pgs *podGroupState) AllPodsCount() int {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return len(pgs.allPods)
}

// UnscheduledPods returns the pods neither assumed nor assigned, by name.
func (pgs *podGroupState) UnscheduledPods() map[string]*v1.Pod {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.unscheduledPodsMap()
}

// AssumedPods returns the UIDs of the assumed pods.
func (pgs *podGroupState) AssumedPods() sets.Set[types.UID] {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return sets.KeySet(pgs.assumedPods)
}

// AssignedPods returns the UIDs of the bound pods.
func (pgs *podGroupState) AssignedPods() sets.Set[types.UID] {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.assignedPods.Clone()
}

// ScheduledPods returns the assumed and assigned pods.
func (pgs *podGroupState) ScheduledPods() []*v1.Pod {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.scheduledPods()
}

// ScheduledPodsCount returns the number of assumed and assigned pods.
func (pgs *podGroupState) ScheduledPodsCount() int {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.scheduledPodsCount()
}

func (pgs *podGroupState) podGroupObject() *schedulingv1beta1.PodGroup {
	pgs.lock.RLock()
	defer pgs.lock.RUnlock()
	return pgs.podGroup
}

// podGroupStateSnapshot is a pod group's state as of a Snapshot: what a
// scheduling cycle reads, with no lock, as the rest of the snapshot.
type podGroupStateSnapshot struct {
	podGroupStateData
}

var _ framework.PodGroupState = (*podGroupStateSnapshot)(nil)

// AllPods returns the UIDs of all pods known to the scheduler for this group.
func (s *podGroupStateSnapshot) AllPods() sets.Set[types.UID] { return sets.KeySet(s.allPods) }

// AllPodsCount returns the number of all pods known to the scheduler for this group.
func (s *podGroupStateSnapshot) AllPodsCount() int { return len(s.allPods) }

// UnscheduledPods returns the pods neither assumed nor assigned, by name.
func (s *podGroupStateSnapshot) UnscheduledPods() map[string]*v1.Pod {
	return s.unscheduledPodsMap()
}

// AssumedPods returns the UIDs of the assumed pods.
func (s *podGroupStateSnapshot) AssumedPods() sets.Set[types.UID] {
	return sets.KeySet(s.assumedPods)
}

// AssignedPods returns the UIDs of the bound pods; callers must not modify it.
func (s *podGroupStateSnapshot) AssignedPods() sets.Set[types.UID] { return s.assignedPods }

// ScheduledPods returns the assumed and assigned pods.
func (s *podGroupStateSnapshot) ScheduledPods() []*v1.Pod { return s.scheduledPods() }

// ScheduledPodsCount returns the number of assumed and assigned pods.
func (s *podGroupStateSnapshot) ScheduledPodsCount() int { return s.scheduledPodsCount() }

// podGroupStatesLister gets pod group states and PodGroups out of a
// snapshot's map.
type podGroupStatesLister map[framework.EntityKey]*podGroupStateSnapshot

var (
	_ framework.PodGroupStateLister = podGroupStatesLister(nil)
	_ framework.PodGroupLister      = podGroupObjectsLister(nil)
)

// Get returns the state of the pod group namespace/podGroupName.
func (l podGroupStatesLister) Get(namespace, podGroupName string) (framework.PodGroupState, error) {
	state, ok := l[framework.PodGroupKey(namespace, podGroupName)]
	if !ok {
		return nil, fmt.Errorf("pod group state not found for pod group %s/%s", namespace, podGroupName)
	}
	return state, nil
}

// podGroupObjectsLister gets the PodGroups out of a snapshot's map.
type podGroupObjectsLister map[framework.EntityKey]*podGroupStateSnapshot

// Get returns the PodGroup namespace/name.
func (l podGroupObjectsLister) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	key := framework.PodGroupKey(namespace, name)
	state, ok := l[key]
	if !ok {
		return nil, fmt.Errorf("pod group state not found for pod group %s", key)
	}
	if state.podGroup == nil {
		return nil, fmt.Errorf("pod group object not found for pod group %s", key)
	}
	return state.podGroup, nil
}
