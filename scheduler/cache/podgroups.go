package cache

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// WithPodGroups makes the cache track pod groups (the GenericWorkload gate):
// the PodGroup objects and, per group, which of the pods naming it in
// spec.schedulingGroup are unscheduled, assumed or bound. Without it the
// pod-group methods do nothing and the listers find no group.
func WithPodGroups(enabled bool) Option {
	return func(c *Cache) { c.podGroups = enabled }
}

var _ framework.PodGroupManager = (*Cache)(nil)

// podGroupKeyOf returns the key of the group pod belongs to, and false when
// the cache does not track pod groups or the pod has none.
func (c *Cache) podGroupKeyOf(pod *v1.Pod) (framework.EntityKey, bool) {
	if !c.podGroups {
		return framework.EntityKey{}, false
	}
	name, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return framework.EntityKey{}, false
	}
	return framework.PodGroupKey(pod.Namespace, name), true
}

// changePodGroup applies fn to the state of key, creating it when create is
// set, stamps it with a new generation, moves it to the front of the
// generation-ordered list, and forgets it once it holds nothing. It reports
// false when there is no state and create is unset. The caller holds c.mu.
func (c *Cache) changePodGroup(key framework.EntityKey, create bool, fn func(d *podGroupStateData)) bool {
	pgs, ok := c.podGroupStates[key]
	if !ok {
		if !create {
			return false
		}
		pgs = &podGroupState{key: key, podGroupStateData: newPodGroupStateData()}
		pgs.elem = c.podGroupList.PushFront(pgs)
		c.podGroupStates[key] = pgs
	}
	c.podGroupGeneration++
	pgs.change(c.podGroupGeneration, fn)
	c.podGroupList.MoveToFront(pgs.elem)
	if pgs.empty() {
		// A state lives while a pod names the group or its PodGroup exists.
		c.podGroupList.Remove(pgs.elem)
		delete(c.podGroupStates, key)
	}
	return true
}

// AddPodGroupMember records an unscheduled pod (neither assumed nor bound)
// of a pod group, as the informer reports it.
func (c *Cache) AddPodGroupMember(pod *v1.Pod) {
	key, ok := c.podGroupKeyOf(pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changePodGroup(key, true, func(d *podGroupStateData) { d.addPod(pod) })
}

// UpdatePodGroupMember records a change of an unscheduled pod of a pod group.
func (c *Cache) UpdatePodGroupMember(logger klog.Logger, oldPod, newPod *v1.Pod) {
	key, ok := c.podGroupKeyOf(newPod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.changePodGroup(key, false, func(d *podGroupStateData) { d.updatePod(oldPod, newPod) }) {
		logger.Error(nil, "Pod group state not found for update, this indicates a missed add event", "pod", klog.KObj(newPod), "podGroup", key)
	}
}

// RemovePodGroupMember forgets an unscheduled pod of a pod group that was deleted.
func (c *Cache) RemovePodGroupMember(pod *v1.Pod) {
	key, ok := c.podGroupKeyOf(pod)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changePodGroup(key, false, func(d *podGroupStateData) { d.deletePod(pod.UID) })
}

// addPodGroupMember records pod, bound or not, in its group. The caller holds c.mu.
func (c *Cache) addPodGroupMember(pod *v1.Pod) {
	if key, ok := c.podGroupKeyOf(pod); ok {
		c.changePodGroup(key, true, func(d *podGroupStateData) { d.addPod(pod) })
	}
}

// removePodGroupMember forgets pod in its group. The caller holds c.mu.
func (c *Cache) removePodGroupMember(pod *v1.Pod) {
	if key, ok := c.podGroupKeyOf(pod); ok {
		c.changePodGroup(key, false, func(d *podGroupStateData) { d.deletePod(pod.UID) })
	}
}

// assumePodGroupMember marks pod assumed in its group. When the cache knew
// no pod of the group, the pod is recorded first, as upstream does; a pod
// unknown to a known group was deleted meanwhile and is left out. The
// caller holds c.mu.
func (c *Cache) assumePodGroupMember(pod *v1.Pod) {
	key, ok := c.podGroupKeyOf(pod)
	if !ok {
		return
	}
	_, known := c.podGroupStates[key]
	c.changePodGroup(key, true, func(d *podGroupStateData) {
		if !known {
			d.allPods[pod.UID] = pod
		}
		d.assumePod(pod)
	})
}

// forgetPodGroupMember moves an assumed pod back to unscheduled in its
// group. The caller holds c.mu.
func (c *Cache) forgetPodGroupMember(logger klog.Logger, pod *v1.Pod) {
	key, ok := c.podGroupKeyOf(pod)
	if !ok {
		return
	}
	if !c.changePodGroup(key, false, func(d *podGroupStateData) { d.forgetPod(pod.UID) }) {
		// Also the case of a pod deleted while it waited at Permit: it
		// left its group when its deletion was seen.
		logger.V(4).Info("Pod group state not found for forget", "pod", klog.KObj(pod), "podGroup", key)
	}
}

// AddPodGroup records a PodGroup object.
func (c *Cache) AddPodGroup(podGroup *schedulingv1beta1.PodGroup) {
	if !c.podGroups {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changePodGroup(framework.PodGroupKey(podGroup.Namespace, podGroup.Name), true, func(d *podGroupStateData) { d.podGroup = podGroup })
}

// UpdatePodGroup records a change of a PodGroup object.
func (c *Cache) UpdatePodGroup(logger klog.Logger, _, newPodGroup *schedulingv1beta1.PodGroup) {
	if !c.podGroups {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := framework.PodGroupKey(newPodGroup.Namespace, newPodGroup.Name)
	if !c.changePodGroup(key, false, func(d *podGroupStateData) { d.podGroup = newPodGroup }) {
		logger.Error(nil, "Pod group state not found for update, this indicates a missed add event", "podGroup", klog.KObj(newPodGroup))
	}
}

// RemovePodGroup forgets a deleted PodGroup object; the state of its pods
// stays while any of them is known.
func (c *Cache) RemovePodGroup(logger klog.Logger, podGroup *schedulingv1beta1.PodGroup) {
	if !c.podGroups {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := framework.PodGroupKey(podGroup.Namespace, podGroup.Name)
	if !c.changePodGroup(key, false, func(d *podGroupStateData) { d.podGroup = nil }) {
		logger.Error(nil, "Pod group state not found for removal", "podGroup", klog.KObj(podGroup))
	}
}

// PodGroupStates returns the live pod group states: each state read through
// it reflects the cache as it changes.
func (c *Cache) PodGroupStates() framework.PodGroupStateLister { return cachePodGroupStates{c} }

// PodGroups returns the cached PodGroup objects.
func (c *Cache) PodGroups() framework.PodGroupLister { return cachePodGroups{c} }

// PodGroupCount returns the number of pod groups the cache knows.
func (c *Cache) PodGroupCount() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.podGroupStates)
}

type cachePodGroupStates struct{ c *Cache }

// Get returns the live state of the pod group namespace/podGroupName.
func (l cachePodGroupStates) Get(namespace, podGroupName string) (framework.PodGroupState, error) {
	if !l.c.podGroups {
		return nil, fmt.Errorf("generic workload feature gate is disabled")
	}
	l.c.mu.RLock()
	defer l.c.mu.RUnlock()
	pgs, ok := l.c.podGroupStates[framework.PodGroupKey(namespace, podGroupName)]
	if !ok {
		return nil, fmt.Errorf("pod group state not found for pod group %s/%s", namespace, podGroupName)
	}
	return pgs, nil
}

type cachePodGroups struct{ c *Cache }

// Get returns the PodGroup namespace/name.
func (l cachePodGroups) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	if !l.c.podGroups {
		return nil, fmt.Errorf("generic workload feature gate is disabled")
	}
	l.c.mu.RLock()
	defer l.c.mu.RUnlock()
	key := framework.PodGroupKey(namespace, name)
	pgs, ok := l.c.podGroupStates[key]
	if !ok {
		return nil, fmt.Errorf("pod group state not found for pod group %s", key)
	}
	pg := pgs.podGroupObject()
	if pg == nil {
		return nil, fmt.Errorf("pod group object not found for pod group %s", key)
	}
	return pg, nil
}

// updatePodGroupSnapshot copies into s the pod group states that changed
// since s was last updated, and drops those the cache forgot. The caller
// holds c.mu for reading.
func (c *Cache) updatePodGroupSnapshot(s *Snapshot) {
	// States change only under c.mu held for writing, so their
	// generations can be read here without their own locks.
	front := c.podGroupList.Front()
	for e := front; e != nil; e = e.Next() {
		pgs := e.Value.(*podGroupState)
		if pgs.generation <= s.podGroupGeneration {
			break
		}
		s.podGroupStates[pgs.key] = pgs.snapshot()
	}
	if front != nil {
		// The front may be older than what s saw when newer states were
		// forgotten since.
		s.podGroupGeneration = max(s.podGroupGeneration, front.Value.(*podGroupState).generation)
	}
	// Every state the cache holds is now in s, so s holds more only when
	// some were forgotten: find them only then.
	if len(s.podGroupStates) > len(c.podGroupStates) {
		for key := range s.podGroupStates {
			if _, ok := c.podGroupStates[key]; !ok {
				delete(s.podGroupStates, key)
			}
		}
	}
}
