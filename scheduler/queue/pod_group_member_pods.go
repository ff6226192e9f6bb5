package queue

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// podGroupMemberPods holds pod group members outside any queued group:
// those waiting for their PodGroup object to be observed, or those that
// arrived while their group was being scheduled. Not safe for concurrent
// use; the PriorityQueue's lock guards it.
type podGroupMemberPods struct {
	// podGroupToPodInfos maps a pod group's key to its pods, by pod key.
	podGroupToPodInfos map[framework.EntityKey]map[framework.EntityKey]*framework.QueuedPodInfo
	// count is the number of pods held.
	count int
}

func newPodGroupMemberPods() *podGroupMemberPods {
	return &podGroupMemberPods{podGroupToPodInfos: make(map[framework.EntityKey]map[framework.EntityKey]*framework.QueuedPodInfo)}
}

func podKey(pod *v1.Pod) framework.EntityKey {
	return framework.PodKey(pod.Namespace, pod.Name)
}

func (p *podGroupMemberPods) add(pInfo *framework.QueuedPodInfo) {
	pgKey, pKey := podGroupKeyForPod(pInfo.Pod), podKey(pInfo.Pod)
	if p.podGroupToPodInfos[pgKey] == nil {
		p.podGroupToPodInfos[pgKey] = make(map[framework.EntityKey]*framework.QueuedPodInfo)
	}
	if _, ok := p.podGroupToPodInfos[pgKey][pKey]; !ok {
		p.count++
	}
	p.podGroupToPodInfos[pgKey][pKey] = pInfo
}

func (p *podGroupMemberPods) len() int { return p.count }

// get returns the held info of the pod named as pod, or nil.
func (p *podGroupMemberPods) get(pod *v1.Pod) *framework.QueuedPodInfo {
	return p.podGroupToPodInfos[podGroupKeyForPod(pod)][podKey(pod)]
}

// delete removes the pod named as pod and returns its info, or nil.
func (p *podGroupMemberPods) delete(pod *v1.Pod) *framework.QueuedPodInfo {
	pgKey, pKey := podGroupKeyForPod(pod), podKey(pod)
	pInfo, ok := p.podGroupToPodInfos[pgKey][pKey]
	if !ok {
		return nil
	}
	delete(p.podGroupToPodInfos[pgKey], pKey)
	if len(p.podGroupToPodInfos[pgKey]) == 0 {
		delete(p.podGroupToPodInfos, pgKey)
	}
	p.count--
	return pInfo
}

// clear removes and returns the pods of the pod group namespace/name.
func (p *podGroupMemberPods) clear(namespace, name string) []*framework.QueuedPodInfo {
	pgKey := framework.PodGroupKey(namespace, name)
	pInfos, ok := p.podGroupToPodInfos[pgKey]
	if !ok {
		return nil
	}
	delete(p.podGroupToPodInfos, pgKey)
	out := make([]*framework.QueuedPodInfo, 0, len(pInfos))
	for _, pInfo := range pInfos {
		out = append(out, pInfo)
	}
	p.count -= len(out)
	return out
}

// takeProfile removes and returns the pods of the profile schedulerName.
func (p *podGroupMemberPods) takeProfile(schedulerName string) []*framework.QueuedPodInfo {
	var out []*framework.QueuedPodInfo
	for _, pInfos := range p.podGroupToPodInfos {
		for _, pInfo := range pInfos {
			if pInfo.Pod.Spec.SchedulerName == schedulerName {
				out = append(out, pInfo)
			}
		}
	}
	for _, pInfo := range out {
		p.delete(pInfo.Pod)
	}
	return out
}
