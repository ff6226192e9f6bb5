package framework

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// NodeInfoLister lists and gets NodeInfos of a snapshot.
type NodeInfoLister interface {
	// List returns all NodeInfos.
	List() ([]*NodeInfo, error)
	// HavePodsWithAffinityList returns the NodeInfos of nodes with pods that have (anti-)affinity.
	HavePodsWithAffinityList() ([]*NodeInfo, error)
	// HavePodsWithRequiredAntiAffinityList returns the NodeInfos of nodes with pods that have required anti-affinity.
	HavePodsWithRequiredAntiAffinityList() ([]*NodeInfo, error)
	// Get returns the NodeInfo of nodeName.
	Get(nodeName string) (*NodeInfo, error)
}

// StorageInfoLister answers storage questions about a snapshot.
type StorageInfoLister interface {
	// IsPVCUsedByPods reports whether a scheduled pod uses the PVC "namespace/name".
	IsPVCUsedByPods(key string) bool
}

// SharedLister is the snapshot plugins read during a scheduling cycle.
type SharedLister interface {
	NodeInfos() NodeInfoLister
	StorageInfos() StorageInfoLister
	// PodGroupStates returns the pod groups' pod states as of the snapshot.
	PodGroupStates() PodGroupStateLister
	// PodGroups returns the PodGroup objects as of the snapshot.
	PodGroups() PodGroupLister
}

// MutableSnapshotSharedLister is a snapshot that can be changed and put
// back: only PodGroupPostFilter uses it, to try the cluster without the
// victims of a pod-group preemption. It is not safe for concurrent use.
type MutableSnapshotSharedLister interface {
	SharedLister
	// StartMutations starts the one mutation session; EndMutations must
	// end it in the same scheduling cycle.
	StartMutations() error
	// EndMutations ends the session and restores the snapshot as it was
	// when StartMutations was called.
	EndMutations() error
	// AddPod adds podInfo to nodeName, in the NodeInfo and in every
	// aggregate of the snapshot, within a session.
	AddPod(podInfo *PodInfo, nodeName string) error
	// RemovePod removes pod from nodeName, in the NodeInfo and in every
	// aggregate of the snapshot, within a session.
	RemovePod(logger klog.Logger, pod *v1.Pod, nodeName string) error
}
