package framework

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
