package cache

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Snapshot is the state of the cluster one scheduling cycle works on. The
// scheduling loop owns it: UpdateSnapshot writes it at the start of a cycle
// and plugins read it during the cycle, never concurrently with an update.
// It is not safe for any other concurrent use.
type Snapshot struct {
	// nodeInfoMap maps a node name to its NodeInfo. The NodeInfo values are
	// stable pointers: an update overwrites them in place so the lists below
	// stay valid without being rebuilt.
	nodeInfoMap map[string]*framework.NodeInfo
	// nodeInfoList holds every node, interleaved across zones.
	nodeInfoList []*framework.NodeInfo
	// havePodsWithAffinityNodeInfoList holds the nodes with at least one pod
	// that has pod affinity or anti-affinity.
	havePodsWithAffinityNodeInfoList []*framework.NodeInfo
	// havePodsWithRequiredAntiAffinityNodeInfoList holds the nodes with at
	// least one pod that has required pod anti-affinity.
	havePodsWithRequiredAntiAffinityNodeInfoList []*framework.NodeInfo
	// usedPVCs counts, per "namespace/name" of a PVC, the nodes with a pod
	// using it. It is maintained per changed node, so a cycle never walks
	// all nodes to rebuild it.
	usedPVCs map[string]int
	// generation is the generation of the most recently changed NodeInfo
	// copied into the snapshot.
	generation int64
	// podGroupStates holds the pod groups' states as of the update.
	podGroupStates map[framework.EntityKey]*podGroupStateSnapshot
	// podGroupGeneration is the cache's pod-group generation the states
	// are up to date with.
	podGroupGeneration int64
	// copied is how many NodeInfos the last UpdateSnapshot copied; it lets
	// tests check that an update costs the changed nodes only.
	copied int
	// assumptions are a pod-group cycle's changes (see AssumePod).
	assumptions snapshotAssumptions
	// backup is what a mutation session changed (see StartMutations),
	// nil outside one.
	backup *snapshotBackup
}

var (
	_ framework.SharedLister      = (*Snapshot)(nil)
	_ framework.NodeInfoLister    = (*Snapshot)(nil)
	_ framework.StorageInfoLister = (*Snapshot)(nil)
)

// NewEmptySnapshot returns a snapshot with no nodes, ready for UpdateSnapshot.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{
		nodeInfoMap:    make(map[string]*framework.NodeInfo),
		usedPVCs:       make(map[string]int),
		podGroupStates: make(map[framework.EntityKey]*podGroupStateSnapshot),
	}
}

// NewSnapshot returns a snapshot of nodes (in the order given) with pods
// placed on the node named by their spec.nodeName. It is for tests and
// benchmarks that need a snapshot without a cache.
func NewSnapshot(pods []*v1.Pod, nodes []*v1.Node) *Snapshot {
	s := NewEmptySnapshot()
	byNode := make(map[string][]*v1.Pod)
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	for _, n := range nodes {
		ni := framework.NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		s.nodeInfoMap[n.Name] = ni
		s.nodeInfoList = append(s.nodeInfoList, ni)
		if len(ni.PodsWithAffinity) > 0 {
			s.havePodsWithAffinityNodeInfoList = append(s.havePodsWithAffinityNodeInfoList, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.havePodsWithRequiredAntiAffinityNodeInfoList = append(s.havePodsWithRequiredAntiAffinityNodeInfoList, ni)
		}
		s.countPVCs(ni, 1)
	}
	return s
}

// countPVCs adds (sign 1) or removes (sign -1) the PVCs used on ni.
func (s *Snapshot) countPVCs(ni *framework.NodeInfo, sign int) {
	for key := range ni.PVCRefCounts {
		if s.usedPVCs[key] += sign; s.usedPVCs[key] <= 0 {
			delete(s.usedPVCs, key)
		}
	}
}

// NodeInfos returns the snapshot as a NodeInfoLister.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// StorageInfos returns the snapshot as a StorageInfoLister.
func (s *Snapshot) StorageInfos() framework.StorageInfoLister { return s }

// PodGroupStates returns the snapshot's pod group states.
func (s *Snapshot) PodGroupStates() framework.PodGroupStateLister {
	return podGroupStatesLister(s.podGroupStates)
}

// PodGroups returns the snapshot's PodGroup objects.
func (s *Snapshot) PodGroups() framework.PodGroupLister {
	return podGroupObjectsLister(s.podGroupStates)
}

// NumNodes returns the number of nodes.
func (s *Snapshot) NumNodes() int { return len(s.nodeInfoList) }

// List returns every node, interleaved across zones. Callers must not modify the slice.
func (s *Snapshot) List() ([]*framework.NodeInfo, error) { return s.nodeInfoList, nil }

// HavePodsWithAffinityList returns the nodes with pods that have pod (anti-)affinity.
func (s *Snapshot) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) {
	return s.havePodsWithAffinityNodeInfoList, nil
}

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods that have required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return s.havePodsWithRequiredAntiAffinityNodeInfoList, nil
}

// Get returns the NodeInfo of nodeName.
func (s *Snapshot) Get(nodeName string) (*framework.NodeInfo, error) {
	if ni, ok := s.nodeInfoMap[nodeName]; ok && ni.Node() != nil {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", nodeName)
}

// IsPVCUsedByPods reports whether a pod on some node uses the PVC "namespace/name".
func (s *Snapshot) IsPVCUsedByPods(key string) bool {
	return s.usedPVCs[key] > 0
}

// TakeOutPod removes pod from the node its spec.nodeName names, for a
// shadow that evaluates where it would have placed a pod already placed;
// restore puts the node back as it was. The node's NodeInfo is replaced by
// a copy in place, so the lists keep their pointers and no NodeInfo of the
// cache or of another snapshot changes. ok is false, and restore does
// nothing, when the pod is not counted there. Call restore before the
// next UpdateSnapshot.
func (s *Snapshot) TakeOutPod(logger klog.Logger, pod *v1.Pod) (restore func(), ok bool) {
	ni, found := s.nodeInfoMap[pod.Spec.NodeName]
	if !found || ni.Node() == nil {
		return func() {}, false
	}
	without := ni.Snapshot()
	if err := without.RemovePod(logger, pod); err != nil {
		return func() {}, false
	}
	saved := *ni
	s.countPVCs(ni, -1)
	*ni = *without
	s.countPVCs(ni, 1)
	return func() {
		s.countPVCs(ni, -1)
		*ni = saved
		s.countPVCs(ni, 1)
	}, true
}
