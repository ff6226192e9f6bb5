package queue

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// workloadForest is the queue's own view of the PodGroup objects it was
// told about, so the queue's invariants hold whatever the scheduler cache
// does meanwhile; outside the queue the cache is the source of truth. It is
// upstream's forest of pod groups with only its leaves: a PodGroup is the
// root of its own tree (CompositePodGroup, which nests them, is not
// supported). Not safe for concurrent use; the PriorityQueue's lock guards it.
type workloadForest struct {
	podGroups map[framework.EntityKey]*schedulingv1beta1.PodGroup
}

func newWorkloadForest() *workloadForest {
	return &workloadForest{podGroups: make(map[framework.EntityKey]*schedulingv1beta1.PodGroup)}
}

func podGroupKey(pg *schedulingv1beta1.PodGroup) framework.EntityKey {
	return framework.PodGroupKey(pg.Namespace, pg.Name)
}

// podGroupKeyForPod returns the key of pod's PodGroup; pod must be a member.
func podGroupKeyForPod(pod *v1.Pod) framework.EntityKey {
	name, _ := framework.PodGroupNameOf(pod)
	return framework.PodGroupKey(pod.Namespace, name)
}

func (wf *workloadForest) addPodGroup(pg *schedulingv1beta1.PodGroup) {
	wf.podGroups[podGroupKey(pg)] = pg
}

func (wf *workloadForest) updatePodGroup(pg *schedulingv1beta1.PodGroup) {
	wf.podGroups[podGroupKey(pg)] = pg
}

func (wf *workloadForest) deletePodGroup(pg *schedulingv1beta1.PodGroup) {
	delete(wf.podGroups, podGroupKey(pg))
}

// getRootKeyForPod returns the key of the root group of pod's PodGroup, and
// false while that PodGroup has not been observed.
func (wf *workloadForest) getRootKeyForPod(pod *v1.Pod) (framework.EntityKey, bool) {
	key := podGroupKeyForPod(pod)
	_, ok := wf.podGroups[key]
	return key, ok
}

// getRootKeyForPodGroup returns the key of pg's root group, and false when
// pg has not been observed.
func (wf *workloadForest) getRootKeyForPodGroup(pg *schedulingv1beta1.PodGroup) (framework.EntityKey, bool) {
	key := podGroupKey(pg)
	_, ok := wf.podGroups[key]
	return key, ok
}

// getLeafPodGroups returns the PodGroups of the tree rooted at root.
func (wf *workloadForest) getLeafPodGroups(root framework.EntityKey) []*schedulingv1beta1.PodGroup {
	if pg, ok := wf.podGroups[root]; ok {
		return []*schedulingv1beta1.PodGroup{pg}
	}
	return nil
}

// buildQueuedPodGroupInfo returns an empty QueuedPodGroupInfo for the tree
// rooted at root, with the PodGroup objects last observed, or nil when root
// is not observed.
func (wf *workloadForest) buildQueuedPodGroupInfo(root framework.EntityKey) *framework.QueuedPodGroupInfo {
	pg, ok := wf.podGroups[root]
	if !ok {
		return nil
	}
	return &framework.QueuedPodGroupInfo{
		PodGroupInfo: &framework.PodGroupInfo{
			Namespace: pg.Namespace,
			Name:      pg.Name,
			Type:      framework.PodGroupKeyType,
			PodGroup:  pg,
		},
		QueuedPodInfos: make(map[framework.EntityKey][]*framework.QueuedPodInfo),
	}
}
