package cache

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.MutableSnapshotSharedLister = (*Snapshot)(nil)

// snapshotBackup is what a mutation session (StartMutations to
// EndMutations) changed in a Snapshot, kept to put it back. Upstream
// copies every NodeInfo when the session starts; here a node and a pod
// group are copied when first changed, so that a session costs the nodes
// its victims and preemptors touch, not the cluster.
type snapshotBackup struct {
	// nodes holds the content of each node changed, as it was. The
	// changed node's content is a copy written over it in place: the node
	// list, the affinity lists and an assumed placement hold its pointer.
	nodes map[string]framework.NodeInfo
	// podGroupStates holds each pod group state changed, as it was; the
	// snapshot's map holds a copy of it meanwhile.
	podGroupStates map[framework.EntityKey]*podGroupStateSnapshot
	// The snapshot-wide aggregates as they were. The session works on
	// copies, so that a slice handed out before never changes under its
	// holder.
	havePodsWithAffinityNodeInfoList             []*framework.NodeInfo
	havePodsWithRequiredAntiAffinityNodeInfoList []*framework.NodeInfo
	usedPVCs                                     map[string]int
}

// StartMutations starts a session in which AddPod and RemovePod change
// the snapshot, for PodGroupPostFilter to try the cluster without its
// victims; EndMutations puts the snapshot back as it was. Sessions do not
// stack, and no pod may be assumed (AssumePod) when one starts: the
// session would keep it when it ends.
func (s *Snapshot) StartMutations() error {
	if s.backup != nil {
		return errors.New("cannot stack mutations")
	}
	if len(s.assumptions.assumedPodStates) > 0 {
		return fmt.Errorf("cannot start mutations with %d pods assumed in the snapshot", len(s.assumptions.assumedPodStates))
	}
	s.backup = &snapshotBackup{
		nodes:                            make(map[string]framework.NodeInfo),
		podGroupStates:                   make(map[framework.EntityKey]*podGroupStateSnapshot),
		havePodsWithAffinityNodeInfoList: s.havePodsWithAffinityNodeInfoList,
		havePodsWithRequiredAntiAffinityNodeInfoList: s.havePodsWithRequiredAntiAffinityNodeInfoList,
		usedPVCs: s.usedPVCs,
	}
	s.havePodsWithAffinityNodeInfoList = slices.Clone(s.havePodsWithAffinityNodeInfoList)
	s.havePodsWithRequiredAntiAffinityNodeInfoList = slices.Clone(s.havePodsWithRequiredAntiAffinityNodeInfoList)
	s.usedPVCs = maps.Clone(s.usedPVCs)
	return nil
}

// EndMutations ends the session StartMutations started and restores the
// snapshot as it was then.
func (s *Snapshot) EndMutations() error {
	b := s.backup
	if b == nil {
		return errors.New("no mutation session started")
	}
	for name, saved := range b.nodes {
		*s.nodeInfoMap[name] = saved
	}
	maps.Copy(s.podGroupStates, b.podGroupStates)
	s.havePodsWithAffinityNodeInfoList = b.havePodsWithAffinityNodeInfoList
	s.havePodsWithRequiredAntiAffinityNodeInfoList = b.havePodsWithRequiredAntiAffinityNodeInfoList
	s.usedPVCs = b.usedPVCs
	s.backup = nil
	return nil
}

// endLeftoverMutations ends a session its caller left open; there should
// be none.
func (s *Snapshot) endLeftoverMutations(logger klog.Logger) {
	if s.backup == nil {
		return
	}
	logger.Error(nil, "Found a snapshot mutation session that was not ended")
	_ = s.EndMutations()
}

// mutableNode returns the NodeInfo of nodeName for the session to change,
// its content copied on first use.
func (s *Snapshot) mutableNode(nodeName string) (*framework.NodeInfo, error) {
	ni, ok := s.nodeInfoMap[nodeName]
	if !ok || ni.Node() == nil {
		return nil, fmt.Errorf("node %q not found in the snapshot", nodeName)
	}
	if _, ok := s.backup.nodes[nodeName]; !ok {
		s.backup.nodes[nodeName] = *ni
		*ni = *ni.Snapshot()
	}
	return ni, nil
}

// mutablePodGroupState returns the state of pod's pod group for the
// session to change, copied on first use; nil when pod has no group or
// the snapshot does not know it.
func (s *Snapshot) mutablePodGroupState(pod *v1.Pod) *podGroupStateSnapshot {
	name, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return nil
	}
	key := framework.PodGroupKey(pod.Namespace, name)
	pgs, ok := s.podGroupStates[key]
	if !ok {
		return nil
	}
	if _, ok := s.backup.podGroupStates[key]; !ok {
		s.backup.podGroupStates[key] = pgs
		pgs = &podGroupStateSnapshot{podGroupStateData: pgs.clone()}
		s.podGroupStates[key] = pgs
	}
	return pgs
}

// AddPod adds podInfo to nodeName within a mutation session, in the node
// and in every aggregate of the snapshot: the affinity lists, the PVCs in
// use and the pod's group. EndMutations undoes it.
func (s *Snapshot) AddPod(podInfo *framework.PodInfo, nodeName string) error {
	if s.backup == nil {
		return errors.New("AddPod() called outside of mutation session")
	}
	ni, err := s.mutableNode(nodeName)
	if err != nil {
		return err
	}
	hadAffinity := len(ni.PodsWithAffinity) > 0
	hadAntiAffinity := len(ni.PodsWithRequiredAntiAffinity) > 0
	s.countPVCs(ni, -1)
	ni.AddPodInfo(podInfo)
	s.countPVCs(ni, 1)
	if !hadAffinity && len(ni.PodsWithAffinity) > 0 {
		s.havePodsWithAffinityNodeInfoList = append(s.havePodsWithAffinityNodeInfoList, ni)
	}
	if !hadAntiAffinity && len(ni.PodsWithRequiredAntiAffinity) > 0 {
		s.havePodsWithRequiredAntiAffinityNodeInfoList = append(s.havePodsWithRequiredAntiAffinityNodeInfoList, ni)
	}
	if pgs := s.mutablePodGroupState(podInfo.Pod); pgs != nil {
		pgs.addPod(podInfo.Pod)
	}
	return nil
}

// RemovePod removes pod from nodeName within a mutation session, in the
// node and in every aggregate of the snapshot, as AddPod adds it.
// EndMutations undoes it.
func (s *Snapshot) RemovePod(logger klog.Logger, pod *v1.Pod, nodeName string) error {
	if s.backup == nil {
		return errors.New("RemovePod() called outside of mutation session")
	}
	ni, err := s.mutableNode(nodeName)
	if err != nil {
		return err
	}
	hadAffinity := len(ni.PodsWithAffinity) > 0
	hadAntiAffinity := len(ni.PodsWithRequiredAntiAffinity) > 0
	s.countPVCs(ni, -1)
	err = ni.RemovePod(logger, pod)
	s.countPVCs(ni, 1)
	if err != nil {
		return err
	}
	// The lists keep their order: a pod assumed in the session (AssumePod)
	// expects its node at the end of a list until it is forgotten.
	if hadAffinity && len(ni.PodsWithAffinity) == 0 {
		s.havePodsWithAffinityNodeInfoList = removeNodeInfo(logger, s.havePodsWithAffinityNodeInfoList, ni)
	}
	if hadAntiAffinity && len(ni.PodsWithRequiredAntiAffinity) == 0 {
		s.havePodsWithRequiredAntiAffinityNodeInfoList = removeNodeInfo(logger, s.havePodsWithRequiredAntiAffinityNodeInfoList, ni)
	}
	if pgs := s.mutablePodGroupState(pod); pgs != nil {
		pgs.deletePod(pod.UID)
	}
	return nil
}

// removeNodeInfo removes ni from list, keeping the order of the others.
func removeNodeInfo(logger klog.Logger, list []*framework.NodeInfo, ni *framework.NodeInfo) []*framework.NodeInfo {
	i := slices.Index(list, ni)
	if i < 0 {
		logger.Error(nil, "NodeInfo not found in the list", "node", klog.KObj(ni.Node()))
		return list
	}
	return slices.Delete(list, i, i+1)
}
