package queue

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// nominator tracks the node each pod was nominated to by preemption, so
// that filters count the room promised to it.
type nominator struct {
	// podLister, when set, keeps pods that were deleted or bound meanwhile
	// from being nominated.
	podLister listersv1.PodLister

	// mu guards the maps. Filter workers read under the read lock in
	// parallel; the queue writes while holding its own lock (the queue's
	// lock is always taken first).
	mu sync.RWMutex
	// nominatedPods maps a node name to the pods nominated to it. The
	// PodInfos are never modified: an update stores a new one.
	nominatedPods map[string][]*framework.PodInfo
	// nominatedPodToNode maps a pod's UID to its nominated node.
	nominatedPodToNode map[types.UID]string
	// count mirrors len(nominatedPodToNode) so that the common case, no
	// nominated pod at all, costs Filter workers no lock.
	count atomic.Int64
}

func newNominator(podLister listersv1.PodLister) *nominator {
	return &nominator{
		podLister:          podLister,
		nominatedPods:      make(map[string][]*framework.PodInfo),
		nominatedPodToNode: make(map[types.UID]string),
	}
}

func (n *nominator) add(logger klog.Logger, pi *framework.PodInfo, ni *framework.NominatingInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addLocked(logger, pi, ni)
}

func (n *nominator) addLocked(logger klog.Logger, pi *framework.PodInfo, ni *framework.NominatingInfo) {
	// Never keep two entries for one pod.
	n.deleteLocked(pi.Pod)

	var nodeName string
	if ni.Mode() == framework.ModeOverride {
		nodeName = ni.NominatedNodeName
	} else {
		nodeName = pi.Pod.Status.NominatedNodeName
	}
	if nodeName == "" {
		return
	}
	if n.podLister != nil {
		current, err := n.podLister.Pods(pi.Pod.Namespace).Get(pi.Pod.Name)
		if err != nil {
			logger.V(4).Info("Pod doesn't exist in podLister, aborted adding it to the nominator", "pod", klog.KObj(pi.Pod))
			return
		}
		if current.Spec.NodeName != "" {
			logger.V(4).Info("Pod is already scheduled to a node, aborted adding it to the nominator", "pod", klog.KObj(pi.Pod), "node", current.Spec.NodeName)
			return
		}
	}
	n.nominatedPodToNode[pi.Pod.UID] = nodeName
	n.nominatedPods[nodeName] = append(n.nominatedPods[nodeName], pi)
	n.count.Store(int64(len(n.nominatedPodToNode)))
}

func (n *nominator) delete(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod)
}

func (n *nominator) deleteLocked(pod *v1.Pod) {
	nodeName, ok := n.nominatedPodToNode[pod.UID]
	if !ok {
		return
	}
	pods := n.nominatedPods[nodeName]
	for i, pi := range pods {
		if pi.Pod.UID == pod.UID {
			pods = append(pods[:i:i], pods[i+1:]...)
			break
		}
	}
	if len(pods) == 0 {
		delete(n.nominatedPods, nodeName)
	} else {
		n.nominatedPods[nodeName] = pods
	}
	delete(n.nominatedPodToNode, pod.UID)
	n.count.Store(int64(len(n.nominatedPodToNode)))
}

// update replaces the pod's entry with newPodInfo. An update that neither
// sets nor clears status.nominatedNodeName keeps a nomination made in
// memory: the status patch that records it may still be on its way.
func (n *nominator) update(logger klog.Logger, oldPod *v1.Pod, newPodInfo *framework.PodInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ni *framework.NominatingInfo
	if oldPod.Status.NominatedNodeName == "" && newPodInfo.Pod.Status.NominatedNodeName == "" {
		if nnn, ok := n.nominatedPodToNode[oldPod.UID]; ok {
			ni = &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: nnn}
		}
	}
	n.deleteLocked(oldPod)
	n.addLocked(logger, newPodInfo, ni)
}

// forNode returns the pods nominated to nodeName. The slice is the
// caller's; the PodInfos are shared and read-only.
func (n *nominator) forNode(nodeName string) []*framework.PodInfo {
	if n.count.Load() == 0 {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	pods := n.nominatedPods[nodeName]
	if len(pods) == 0 {
		return nil
	}
	return append([]*framework.PodInfo(nil), pods...)
}

// nodeOf returns the node pod is nominated to, if any.
func (n *nominator) nodeOf(uid types.UID) (string, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	name, ok := n.nominatedPodToNode[uid]
	return name, ok
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
