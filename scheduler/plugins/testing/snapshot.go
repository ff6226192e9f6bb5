package testing

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Snapshot is an immutable in-memory framework.SharedLister made of nodes
// and the pods bound to them, and pod groups (WithPodGroups), for tests
// that need no scheduler cache.
type Snapshot struct {
	nodeInfos           []*framework.NodeInfo
	byName              map[string]*framework.NodeInfo
	withAffinity        []*framework.NodeInfo
	withRequiredAntiAff []*framework.NodeInfo
	usedPVCs            sets.Set[string]
	podGroups           *PodGroups
}

var (
	_ framework.SharedLister      = (*Snapshot)(nil)
	_ framework.NodeInfoLister    = (*Snapshot)(nil)
	_ framework.StorageInfoLister = (*Snapshot)(nil)
)

// NewSnapshot returns a snapshot of nodes, in the given order, holding the
// pods whose spec.nodeName names one of them. Image states are summarized
// the way the scheduler cache does: one entry per image name with the
// image's size and the number of nodes that have it.
func NewSnapshot(pods []*v1.Pod, nodes []*v1.Node) *Snapshot {
	s := &Snapshot{byName: make(map[string]*framework.NodeInfo, len(nodes)), usedPVCs: sets.New[string](), podGroups: NewPodGroups(nil, nil)}
	numNodes := map[string]int{}
	for _, n := range nodes {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				numNodes[name]++
			}
		}
	}
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				ni.ImageStates[name] = &framework.ImageStateSummary{Size: img.SizeBytes, NumNodes: numNodes[name]}
			}
		}
		s.nodeInfos = append(s.nodeInfos, ni)
		s.byName[n.Name] = ni
	}
	for _, p := range pods {
		ni, ok := s.byName[p.Spec.NodeName]
		if !ok {
			continue
		}
		ni.AddPod(p)
	}
	for _, ni := range s.nodeInfos {
		if len(ni.PodsWithAffinity) > 0 {
			s.withAffinity = append(s.withAffinity, ni)
		}
		if len(ni.PodsWithRequiredAntiAffinity) > 0 {
			s.withRequiredAntiAff = append(s.withRequiredAntiAff, ni)
		}
		for key := range ni.PVCRefCounts {
			s.usedPVCs.Insert(key)
		}
	}
	return s
}

// NodeInfos returns the snapshot itself.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// StorageInfos returns the snapshot itself.
func (s *Snapshot) StorageInfos() framework.StorageInfoLister { return s }

// WithPodGroups makes the snapshot hold podGroups, as the scheduler's
// snapshot holds the pod groups' states as of the cycle's start.
func (s *Snapshot) WithPodGroups(podGroups *PodGroups) *Snapshot {
	s.podGroups = podGroups
	return s
}

// PodGroupStates returns the pod groups' states; none unless WithPodGroups gave some.
func (s *Snapshot) PodGroupStates() framework.PodGroupStateLister {
	return s.podGroups.PodGroupStates()
}

// PodGroups returns the PodGroup objects; none unless WithPodGroups gave some.
func (s *Snapshot) PodGroups() framework.PodGroupLister { return s.podGroups.PodGroups() }

// List returns every NodeInfo in node order.
func (s *Snapshot) List() ([]*framework.NodeInfo, error) { return s.nodeInfos, nil }

// HavePodsWithAffinityList returns the NodeInfos with pods that have (anti-)affinity.
func (s *Snapshot) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) {
	return s.withAffinity, nil
}

// HavePodsWithRequiredAntiAffinityList returns the NodeInfos with pods that have required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return s.withRequiredAntiAff, nil
}

// Get returns the NodeInfo of nodeName.
func (s *Snapshot) Get(nodeName string) (*framework.NodeInfo, error) {
	if ni, ok := s.byName[nodeName]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", nodeName)
}

// IsPVCUsedByPods reports whether a pod in the snapshot uses the PVC "namespace/name".
func (s *Snapshot) IsPVCUsedByPods(key string) bool { return s.usedPVCs.Has(key) }
