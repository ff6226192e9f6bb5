package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ActionType is a kind of change to a resource. Values are bit flags so a
// plugin can register several at once.
type ActionType int64

// Action types, in upstream's bit order.
const (
	Add ActionType = 1 << iota
	Delete

	// UpdateNodeXYZ apply to Node events only. Registering a specific
	// sub-update instead of Update avoids needless requeues.
	UpdateNodeAllocatable
	UpdateNodeLabel
	// UpdateNodeTaint covers taints and spec.unschedulable.
	UpdateNodeTaint
	UpdateNodeCondition
	UpdateNodeAnnotation
	UpdateNodeDeclaredFeature
	UpdateNodePreemptionPolicy

	// UpdatePodXYZ apply to Pod events only.
	UpdatePodLabel
	// UpdatePodScaleDown is a decrease of any resource request.
	UpdatePodScaleDown
	// UpdatePodScaleUp is an increase of any resource request.
	UpdatePodScaleUp
	// UpdatePodToleration is an added toleration (tolerations can only be added).
	UpdatePodToleration
	// UpdatePodSchedulingGatesEliminated is the removal of the last scheduling gate.
	UpdatePodSchedulingGatesEliminated
	// UpdatePodGeneratedResourceClaim is a change of the pod's generated ResourceClaims.
	UpdatePodGeneratedResourceClaim

	All ActionType = 1<<iota - 1

	// Update is any update, when the specific kind does not matter.
	Update = UpdateNodeAllocatable | UpdateNodeLabel | UpdateNodeTaint | UpdateNodeCondition | UpdateNodeAnnotation | UpdateNodeDeclaredFeature | UpdateNodePreemptionPolicy | UpdatePodLabel | UpdatePodScaleDown | UpdatePodScaleUp | UpdatePodToleration | UpdatePodSchedulingGatesEliminated | UpdatePodGeneratedResourceClaim

	// None is only used internally.
	None ActionType = 0
)

var actionTypeNames = map[ActionType]string{
	Add: "Add", Delete: "Delete",
	UpdateNodeAllocatable: "UpdateNodeAllocatable", UpdateNodeLabel: "UpdateNodeLabel",
	UpdateNodeTaint: "UpdateNodeTaint", UpdateNodeCondition: "UpdateNodeCondition",
	UpdateNodeAnnotation: "UpdateNodeAnnotation", UpdateNodeDeclaredFeature: "UpdateNodeDeclaredFeature",
	UpdateNodePreemptionPolicy: "UpdateNodePreemptionPolicy",
	UpdatePodLabel:             "UpdatePodLabel", UpdatePodScaleDown: "UpdatePodScaleDown",
	UpdatePodScaleUp: "UpdatePodScaleUp", UpdatePodToleration: "UpdatePodToleration",
	UpdatePodSchedulingGatesEliminated: "UpdatePodSchedulingGatesEliminated",
	UpdatePodGeneratedResourceClaim:    "UpdatePodGeneratedResourceClaim",
	All:                                "All", Update: "Update",
}

func (a ActionType) String() string {
	return actionTypeNames[a]
}

// EventResource names an API resource whose changes can requeue pods.
type EventResource string

// Resources. Pod covers AssignedPod, UnscheduledPod and TargetPod; plugins
// should register the most specific one they can.
const (
	Pod EventResource = "Pod"
	// AssignedPod is an event about a pod bound to a node.
	AssignedPod EventResource = "AssignedPod"
	// UnscheduledPod is an event about another pod that is not bound yet.
	UnscheduledPod EventResource = "UnscheduledPod"
	// TargetPod is an event about the rejected pod itself.
	TargetPod EventResource = "TargetPod"

	Node                  EventResource = "Node"
	PersistentVolume      EventResource = "PersistentVolume"
	PersistentVolumeClaim EventResource = "PersistentVolumeClaim"
	CSINode               EventResource = "storage.k8s.io/CSINode"
	CSIDriver             EventResource = "storage.k8s.io/CSIDriver"
	VolumeAttachment      EventResource = "storage.k8s.io/VolumeAttachment"
	CSIStorageCapacity    EventResource = "storage.k8s.io/CSIStorageCapacity"
	StorageClass          EventResource = "storage.k8s.io/StorageClass"
	ResourceClaim         EventResource = "resource.k8s.io/ResourceClaim"
	ResourceSlice         EventResource = "resource.k8s.io/ResourceSlice"
	DeviceClass           EventResource = "resource.k8s.io/DeviceClass"
	// PodGroup is scheduling.k8s.io/v1beta1 PodGroup, watched only where
	// the GenericWorkload gate is on.
	PodGroup EventResource = "scheduling.k8s.io/PodGroup"

	// WildCard matches every resource. {WildCard, All} moves every
	// unschedulable pod; use it sparingly.
	WildCard EventResource = "*"
)

// ClusterEvent is a change of a resource.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
	// CustomLabel overrides Label() for special events such as UnschedulableTimeout.
	CustomLabel string
}

// Label is used for logs and metrics.
func (ce ClusterEvent) Label() string {
	if ce.CustomLabel != "" {
		return ce.CustomLabel
	}
	return fmt.Sprintf("%v%v", ce.Resource, ce.ActionType)
}

// IsWildCard reports whether ce is {WildCard, All}.
func (ce ClusterEvent) IsWildCard() bool {
	return ce.Resource == WildCard && ce.ActionType == All
}

// Match reports whether incoming is the same as, or more specific than, the
// registered event ce. A registered Update matches an incoming
// UpdateNodeLabel, not the other way round: the queue always reports the most
// specific action it can tell. A registered Pod matches AssignedPod,
// UnscheduledPod and TargetPod. An incoming wildcard event only matches a
// registered wildcard.
func (ce ClusterEvent) Match(incoming ClusterEvent) bool {
	return ce.IsWildCard() ||
		matchEventResources(ce.Resource, incoming.Resource) && ce.ActionType&incoming.ActionType != 0 && incoming.ActionType <= ce.ActionType
}

func matchEventResources(registered, incoming EventResource) bool {
	return registered == WildCard || registered == incoming ||
		registered == Pod && (incoming == AssignedPod || incoming == UnscheduledPod || incoming == TargetPod)
}

// UnrollWildCardResource lists {resource, All} for every resource the
// scheduler watches. It is what a plugin without EnqueueExtensions is
// registered for, so the queue still installs handlers for each resource.
func UnrollWildCardResource() []ClusterEventWithHint {
	return []ClusterEventWithHint{
		{Event: ClusterEvent{Resource: Pod, ActionType: All}},
		{Event: ClusterEvent{Resource: Node, ActionType: All}},
		{Event: ClusterEvent{Resource: PersistentVolume, ActionType: All}},
		{Event: ClusterEvent{Resource: PersistentVolumeClaim, ActionType: All}},
		{Event: ClusterEvent{Resource: CSINode, ActionType: All}},
		{Event: ClusterEvent{Resource: CSIDriver, ActionType: All}},
		{Event: ClusterEvent{Resource: CSIStorageCapacity, ActionType: All}},
		{Event: ClusterEvent{Resource: StorageClass, ActionType: All}},
		{Event: ClusterEvent{Resource: ResourceClaim, ActionType: All}},
		{Event: ClusterEvent{Resource: DeviceClass, ActionType: All}},
	}
}

// QueueingHint is a QueueingHintFn's verdict.
type QueueingHint int

const (
	// QueueSkip means the event cannot make the pod schedulable.
	QueueSkip QueueingHint = iota
	// Queue means the event may make the pod schedulable.
	Queue
)

func (h QueueingHint) String() string {
	switch h {
	case QueueSkip:
		return "QueueSkip"
	case Queue:
		return "Queue"
	}
	return ""
}

// QueueingHintFn tells whether an event can make a pod that this plugin
// rejected schedulable. oldObj is nil for Add, newObj is nil for Delete. An
// error is treated as Queue so a pod is never stuck because of a buggy hint.
type QueueingHintFn func(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (QueueingHint, error)

// ClusterEventWithHint is an event a plugin registers, with an optional hint
// that filters out events irrelevant for a given pod. A nil hint means Queue.
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}
