package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// EntityKeyType is the kind of a schedulable entity: a pod or a pod group.
type EntityKeyType string

const (
	// PodKeyType is the type of a single pod.
	PodKeyType EntityKeyType = "pod"
	// PodGroupKeyType is the type of a (leaf) PodGroup of scheduling.k8s.io/v1beta1.
	PodGroupKeyType EntityKeyType = "podgroup"
)

// EntityKey identifies one schedulable entity. It is comparable, so it keys
// maps of pod groups.
type EntityKey struct {
	Type      EntityKeyType
	Name      string
	Namespace string
}

// GetName returns the entity's name.
func (ek EntityKey) GetName() string { return ek.Name }

// GetNamespace returns the entity's namespace.
func (ek EntityKey) GetNamespace() string { return ek.Namespace }

// GetType returns the entity's type.
func (ek EntityKey) GetType() EntityKeyType { return ek.Type }

// String returns "type/namespace/name", as upstream's keys print.
func (ek EntityKey) String() string {
	return fmt.Sprintf("%s/%s/%s", ek.Type, ek.Namespace, ek.Name)
}

// PodKey returns the key of a pod.
func PodKey(namespace, name string) EntityKey {
	return EntityKey{Type: PodKeyType, Namespace: namespace, Name: name}
}

// PodGroupKey returns the key of a pod group.
func PodGroupKey(namespace, name string) EntityKey {
	return EntityKey{Type: PodGroupKeyType, Namespace: namespace, Name: name}
}

// PodGroupNameOf returns the name of the PodGroup pod belongs to
// (spec.schedulingGroup.podGroupName), and false when it belongs to none.
func PodGroupNameOf(pod *v1.Pod) (string, bool) {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return "", false
	}
	return *pod.Spec.SchedulingGroup.PodGroupName, true
}

// PodGroupInfo is a PodGroup with the pods of it the pod-group scheduling
// cycle places: what placement and pod-group plugins receive. The scheduling
// queue builds it; plugins must treat it as read-only. As PodInfo and
// NodeInfo, it is a concrete struct here where upstream has an interface
// (fwk.PodGroupInfo) in front of the struct; the getters keep upstream's
// names so plugin code ports unchanged.
type PodGroupInfo struct {
	// Namespace is the pod group's namespace.
	Namespace string
	// Name is the pod group's name.
	Name string
	// Type is the kind of group; PodGroupKeyType for a PodGroup.
	Type EntityKeyType
	// UnscheduledPods are the pods considered in this pod-group cycle, in
	// the queue's deterministic order (signature, priority, timestamp).
	// The group's assumed and assigned pods are in PodGroupManager's
	// PodGroupState.
	UnscheduledPods []*v1.Pod
	// PodGroup is the API object.
	PodGroup *schedulingv1beta1.PodGroup
}

// GetName returns the pod group's name.
func (pgi *PodGroupInfo) GetName() string { return pgi.Name }

// GetNamespace returns the pod group's namespace.
func (pgi *PodGroupInfo) GetNamespace() string { return pgi.Namespace }

// GetType returns the kind of the group.
func (pgi *PodGroupInfo) GetType() EntityKeyType { return pgi.Type }

// GetKey returns "type/namespace/name", the string form of the group's EntityKey.
func (pgi *PodGroupInfo) GetKey() string {
	return EntityKey{Type: pgi.Type, Namespace: pgi.Namespace, Name: pgi.Name}.String()
}

// GetEntityKey returns the group's EntityKey.
func (pgi *PodGroupInfo) GetEntityKey() EntityKey {
	return EntityKey{Type: pgi.Type, Namespace: pgi.Namespace, Name: pgi.Name}
}

// GetUnscheduledPods returns the pods considered in this cycle.
func (pgi *PodGroupInfo) GetUnscheduledPods() []*v1.Pod { return pgi.UnscheduledPods }

// GetPodGroup returns the PodGroup API object.
func (pgi *PodGroupInfo) GetPodGroup() *schedulingv1beta1.PodGroup { return pgi.PodGroup }

// PodGroupState is what the scheduler cache knows about one pod group's
// pods. A pod group has a state as soon as one pod names it, even before its
// PodGroup object is seen.
type PodGroupState interface {
	// AllPods returns the UIDs of all pods known to the scheduler for this group.
	AllPods() sets.Set[types.UID]
	// AllPodsCount returns the number of all pods known to the scheduler for this group.
	AllPodsCount() int
	// UnscheduledPods returns the pods that are neither assumed nor
	// assigned, keyed by pod name: the argument PodActivator.Activate takes.
	UnscheduledPods() map[string]*v1.Pod
	// AssumedPods returns the UIDs of the pods that passed Reserve and are not bound yet.
	AssumedPods() sets.Set[types.UID]
	// AssignedPods returns the UIDs of the pods bound to a node.
	AssignedPods() sets.Set[types.UID]
	// ScheduledPods returns the pods that are assumed or assigned.
	ScheduledPods() []*v1.Pod
	// ScheduledPodsCount returns the number of pods that are assumed or assigned.
	ScheduledPodsCount() int
}

// PodGroupStateLister gets pod group states.
type PodGroupStateLister interface {
	// Get returns the state of the pod group namespace/podGroupName, or an
	// error when no pod of it and no PodGroup object is known.
	Get(namespace string, podGroupName string) (PodGroupState, error)
}

// PodGroupLister gets cached PodGroup objects.
type PodGroupLister interface {
	// Get returns the PodGroup namespace/name, or an error when it is not cached.
	Get(namespace, name string) (*schedulingv1beta1.PodGroup, error)
}

// PodGroupManager is the scheduler cache's live view of pod groups
// (Handle.PodGroupManager): unlike SnapshotSharedLister's, it changes under
// the caller, so PreEnqueue, Permit and queueing hints use it.
type PodGroupManager interface {
	// PodGroupStates returns the pod groups' pod states.
	PodGroupStates() PodGroupStateLister
	// PodGroups returns the cached PodGroup objects.
	PodGroups() PodGroupLister
}
