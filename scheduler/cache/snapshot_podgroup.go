package cache

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// snapshotAssumptions is what a pod-group scheduling cycle changed in a
// Snapshot: the pods it assumed there, so that the group's later pods see
// them, and the placement it tries. The cycle reverts every assumption
// before the snapshot is updated again.
type snapshotAssumptions struct {
	// assumedPodStates maps an assumed pod's UID to what AssumePod added,
	// so that ForgetPod undoes exactly that.
	assumedPodStates map[string]*assumedPodState
	// assumedPodKeys are the assumed pods' UIDs in assume order, for
	// forgetAllAssumedPods to revert them last first.
	assumedPodKeys []string
	// placement is the placement assumed, nil for all nodes.
	placement *framework.Placement
	// placementNodeNames are the names of placement's nodes.
	placementNodeNames sets.Set[string]
}

// assumedPodState is what AssumePod added to the snapshot-wide affinity
// lists. Reverting it relies on upstream's contract: ForgetPod is called
// only for an assumed pod, pods are forgotten in the reverse order they
// were assumed, and nothing else changes the snapshot in between.
type assumedPodState struct {
	pod                     *v1.Pod
	addedToAffinityList     bool
	addedToAntiAffinityList bool
}

// AssumePod counts pod on the node its spec.nodeName names in the snapshot
// only, not in the cache: a pod-group cycle places the group's pods one
// after another, each seeing those before it, and binds none unless the
// whole group fits. The node's generation is kept, so that the next
// UpdateSnapshot, which the cycle must precede with ForgetPod for every
// assumed pod, copies it only if the cache changed it.
func (s *Snapshot) AssumePod(podInfo *framework.PodInfo) error {
	pod := podInfo.Pod
	if pod.UID == "" {
		return errors.New("cannot get cache key for pod with empty UID")
	}
	key := string(pod.UID)
	if _, ok := s.assumptions.assumedPodStates[key]; ok {
		return fmt.Errorf("pod %s/%s is already assumed in the snapshot", pod.Namespace, pod.Name)
	}
	ni, ok := s.nodeInfoMap[pod.Spec.NodeName]
	if !ok || ni.Node() == nil {
		return fmt.Errorf("node %q of assumed pod %s/%s is not in the snapshot", pod.Spec.NodeName, pod.Namespace, pod.Name)
	}
	generation := ni.Generation
	hadAffinity := len(ni.PodsWithAffinity) > 0
	hadAntiAffinity := len(ni.PodsWithRequiredAntiAffinity) > 0
	s.countPVCs(ni, -1)
	ni.AddPodInfo(podInfo)
	s.countPVCs(ni, 1)
	ni.Generation = generation
	state := &assumedPodState{pod: pod}
	if !hadAffinity && len(ni.PodsWithAffinity) > 0 {
		s.havePodsWithAffinityNodeInfoList = append(s.havePodsWithAffinityNodeInfoList, ni)
		state.addedToAffinityList = true
	}
	if !hadAntiAffinity && len(ni.PodsWithRequiredAntiAffinity) > 0 {
		s.havePodsWithRequiredAntiAffinityNodeInfoList = append(s.havePodsWithRequiredAntiAffinityNodeInfoList, ni)
		state.addedToAntiAffinityList = true
	}
	if s.assumptions.assumedPodStates == nil {
		s.assumptions.assumedPodStates = make(map[string]*assumedPodState)
	}
	s.assumptions.assumedPodStates[key] = state
	s.assumptions.assumedPodKeys = append(s.assumptions.assumedPodKeys, key)
	if name, ok := framework.PodGroupNameOf(pod); ok {
		if pgs, ok := s.podGroupStates[framework.PodGroupKey(pod.Namespace, name)]; ok {
			pgs.assumePod(pod)
		}
	}
	return nil
}

// ForgetPod reverts AssumePod of pod.
func (s *Snapshot) ForgetPod(logger klog.Logger, pod *v1.Pod) error {
	key := string(pod.UID)
	state, ok := s.assumptions.assumedPodStates[key]
	if !ok {
		return fmt.Errorf("assumed pod %q not found in the snapshot", key)
	}
	delete(s.assumptions.assumedPodStates, key)
	if n := len(s.assumptions.assumedPodKeys); n > 0 && s.assumptions.assumedPodKeys[n-1] == key {
		s.assumptions.assumedPodKeys = s.assumptions.assumedPodKeys[:n-1]
	} else {
		logger.Error(nil, "Cannot remove assumed pod key on ForgetPod: the pod is not the last assumed one", "pod", klog.KObj(pod))
		s.assumptions.assumedPodKeys = slices.DeleteFunc(s.assumptions.assumedPodKeys, func(k string) bool { return k == key })
	}
	assumed := state.pod
	if ni, ok := s.nodeInfoMap[assumed.Spec.NodeName]; ok {
		generation := ni.Generation
		s.countPVCs(ni, -1)
		err := ni.RemovePod(logger, assumed)
		s.countPVCs(ni, 1)
		if err != nil {
			return err
		}
		ni.Generation = generation
		if state.addedToAffinityList {
			s.havePodsWithAffinityNodeInfoList = removeAssumedNodeInfo(logger, s.havePodsWithAffinityNodeInfoList, ni, "havePodsWithAffinityNodeInfoList", assumed)
		}
		if state.addedToAntiAffinityList {
			s.havePodsWithRequiredAntiAffinityNodeInfoList = removeAssumedNodeInfo(logger, s.havePodsWithRequiredAntiAffinityNodeInfoList, ni, "havePodsWithRequiredAntiAffinityNodeInfoList", assumed)
		}
	}
	if name, ok := framework.PodGroupNameOf(assumed); ok {
		if pgs, ok := s.podGroupStates[framework.PodGroupKey(assumed.Namespace, name)]; ok {
			pgs.forgetPod(assumed.UID)
		}
	}
	return nil
}

// forgetAllAssumedPods reverts the assumptions a pod-group cycle left
// behind, last first; there should be none.
func (s *Snapshot) forgetAllAssumedPods(logger klog.Logger) {
	if len(s.assumptions.assumedPodStates) == 0 {
		return
	}
	logger.Error(nil, "Found assumed pods in the snapshot that were not forgotten", "assumedPodsCount", len(s.assumptions.assumedPodStates))
	keys := slices.Clone(s.assumptions.assumedPodKeys)
	for i := len(keys) - 1; i >= 0; i-- {
		state, ok := s.assumptions.assumedPodStates[keys[i]]
		if !ok {
			continue
		}
		if err := s.ForgetPod(logger, state.pod); err != nil {
			logger.Error(err, "Failed to forget assumed pod")
		}
	}
}

// removeAssumedNodeInfo removes ni from the end of list, where AssumePod
// appended it; anything else breaks the contract, which is reported, and
// list is returned unchanged.
func removeAssumedNodeInfo(logger klog.Logger, list []*framework.NodeInfo, ni *framework.NodeInfo, listName string, pod *v1.Pod) []*framework.NodeInfo {
	if len(list) == 0 || list[len(list)-1] != ni {
		logger.Error(nil, "Cannot revert snapshot index on ForgetPod: list does not end with the assumed pod's node", "list", listName, "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		return list
	}
	list[len(list)-1] = nil
	return list[:len(list)-1]
}

// GetPlacement returns the assumed placement, nil when none is.
func (s *Snapshot) GetPlacement() *framework.Placement { return s.assumptions.placement }

// AssumePlacement limits the nodes a pod-group cycle tries to placement's,
// whose NodeInfos must be the snapshot's own; nil, or a placement of every
// node, removes the limit. It replaces any placement assumed before; undo
// it with ForgetPlacement before the snapshot is updated again.
func (s *Snapshot) AssumePlacement(placement *framework.Placement) error {
	if placement == nil || len(placement.Nodes) == len(s.nodeInfoList) {
		s.ForgetPlacement()
		return nil
	}
	names := sets.New[string]()
	for _, ni := range placement.Nodes {
		name := ni.Node().Name
		own, ok := s.nodeInfoMap[name]
		if !ok {
			s.ForgetPlacement()
			return fmt.Errorf("node %s in placement is not present in snapshot", name)
		}
		if own != ni {
			s.ForgetPlacement()
			return fmt.Errorf("node %s in placement is not the same instance as in the snapshot", name)
		}
		names.Insert(name)
	}
	s.assumptions.placement = placement
	s.assumptions.placementNodeNames = names
	return nil
}

// ForgetPlacement removes the placement's limit.
func (s *Snapshot) ForgetPlacement() {
	s.assumptions.placement = nil
	s.assumptions.placementNodeNames = nil
}

// NumNodesInPlacement returns the number of nodes of the assumed
// placement, of the snapshot when none is.
func (s *Snapshot) NumNodesInPlacement() int {
	if s.assumptions.placement != nil {
		return len(s.assumptions.placement.Nodes)
	}
	return len(s.nodeInfoList)
}

// ListNodesInPlacement returns the nodes of the assumed placement, every
// node when none is. Callers must not modify the slice.
func (s *Snapshot) ListNodesInPlacement() ([]*framework.NodeInfo, error) {
	if s.assumptions.placement != nil {
		return s.assumptions.placement.Nodes, nil
	}
	return s.List()
}

// GetNodeInPlacement returns the NodeInfo of nodeName if the assumed
// placement, if any, holds it.
func (s *Snapshot) GetNodeInPlacement(nodeName string) (*framework.NodeInfo, error) {
	if s.assumptions.placement == nil || s.assumptions.placementNodeNames.Has(nodeName) {
		return s.Get(nodeName)
	}
	return nil, fmt.Errorf("node %q not found in placement", nodeName)
}
