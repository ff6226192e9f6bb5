package queue

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Labels of queue moves that are not cluster events, as upstream.
const (
	// ScheduleAttemptFailure is a pod coming back after a failed attempt.
	ScheduleAttemptFailure = "ScheduleAttemptFailure"
	// BackoffComplete is a pod leaving the backoff queue.
	BackoffComplete = "BackoffComplete"
	// ForceActivate is a pod moved to the active queue by a plugin.
	ForceActivate = "ForceActivate"
	// UnschedulableTimeout is a pod flushed from the unschedulable pool
	// after the longest time it may stay there.
	UnschedulableTimeout = "UnschedulableTimeout"
	// ProfileUpdated is a pod retried because its profile got a new instance.
	ProfileUpdated = "ProfileUpdated"
)

// Cluster events the scheduler reports to the queue, with upstream's labels.
var (
	EventNodeAdd              = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
	EventNodeDelete           = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Delete}
	EventAssignedPodAdd       = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add}
	EventAssignedPodUpdate    = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Update}
	EventAssignedPodDelete    = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
	EventUnscheduledPodAdd    = framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Add}
	EventUnscheduledPodUpdate = framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Update}
	EventUnscheduledPodDelete = framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Delete}
	// EventUnschedulableTimeout moves every pod that stayed too long in the pool.
	EventUnschedulableTimeout = framework.ClusterEvent{Resource: framework.WildCard, ActionType: framework.All, CustomLabel: UnschedulableTimeout}
	// EventForceActivate is recorded for an in-flight pod that a plugin activated.
	EventForceActivate = framework.ClusterEvent{Resource: framework.WildCard, ActionType: framework.All, CustomLabel: ForceActivate}
	// EventProfileUpdated retries the pods of a profile whose instance was replaced.
	EventProfileUpdated = framework.ClusterEvent{Resource: framework.WildCard, ActionType: framework.All, CustomLabel: ProfileUpdated}
)

// NodeSchedulingPropertiesChange returns the Node update events that the
// change from oldNode to newNode amounts to; none when nothing the
// scheduler looks at changed.
func NodeSchedulingPropertiesChange(newNode, oldNode *v1.Node) []framework.ClusterEvent {
	var events []framework.ClusterEvent
	add := func(a framework.ActionType) {
		events = append(events, framework.ClusterEvent{Resource: framework.Node, ActionType: a})
	}
	// A node becoming schedulable is reported as a taint change, as upstream.
	if newNode.Spec.Unschedulable != oldNode.Spec.Unschedulable && !newNode.Spec.Unschedulable {
		add(framework.UpdateNodeTaint)
	}
	if !equality.Semantic.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable) {
		add(framework.UpdateNodeAllocatable)
	}
	if !equality.Semantic.DeepEqual(oldNode.Labels, newNode.Labels) {
		add(framework.UpdateNodeLabel)
	}
	if !equality.Semantic.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints) {
		add(framework.UpdateNodeTaint)
	}
	if !equality.Semantic.DeepEqual(conditionStatuses(oldNode), conditionStatuses(newNode)) {
		add(framework.UpdateNodeCondition)
	}
	if !equality.Semantic.DeepEqual(oldNode.Annotations, newNode.Annotations) {
		add(framework.UpdateNodeAnnotation)
	}
	if !equality.Semantic.DeepEqual(oldNode.Spec.PodPreemptionPolicy, newNode.Spec.PodPreemptionPolicy) {
		add(framework.UpdateNodePreemptionPolicy)
	}
	// The API server keeps the list sorted, so comparing in order suffices.
	if !slices.Equal(oldNode.Status.DeclaredFeatures, newNode.Status.DeclaredFeatures) {
		add(framework.UpdateNodeDeclaredFeature)
	}
	return events
}

// conditionStatuses keeps only the status of each condition: heartbeat
// times change all the time and never make a pod fit.
func conditionStatuses(n *v1.Node) map[v1.NodeConditionType]v1.ConditionStatus {
	out := make(map[v1.NodeConditionType]v1.ConditionStatus, len(n.Status.Conditions))
	for _, c := range n.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

// PodSchedulingPropertiesChange returns the pod update events that the
// change from oldPod to newPod amounts to: AssignedPod events for a bound
// pod; for a pod not bound yet, TargetPod events when isTargetPod (the
// update of the pending pod itself, offered to that pod only) and
// UnscheduledPod events otherwise, as upstream 1.37. An update that matches
// no specific action is reported as a general Update, which only matches
// plugins that registered for any pod update.
func PodSchedulingPropertiesChange(newPod, oldPod *v1.Pod, isTargetPod bool) []framework.ClusterEvent {
	var r framework.EventResource
	switch {
	case newPod.Spec.NodeName != "":
		r = framework.AssignedPod
	case isTargetPod:
		r = framework.TargetPod
	default:
		r = framework.UnscheduledPod
	}
	var events []framework.ClusterEvent
	add := func(a framework.ActionType) {
		events = append(events, framework.ClusterEvent{Resource: r, ActionType: a})
	}
	if !equality.Semantic.DeepEqual(oldPod.Labels, newPod.Labels) {
		add(framework.UpdatePodLabel)
	}
	opts := resource.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}
	oldReq, newReq := resource.PodRequests(oldPod, opts), resource.PodRequests(newPod, opts)
	if requestDroppedOrWentDown(oldReq, newReq) {
		add(framework.UpdatePodScaleDown)
	}
	if requestDroppedOrWentDown(newReq, oldReq) {
		add(framework.UpdatePodScaleUp)
	}
	if len(newPod.Spec.SchedulingGates) == 0 && len(oldPod.Spec.SchedulingGates) != 0 {
		add(framework.UpdatePodSchedulingGatesEliminated)
	}
	// Tolerations can only be added, so a length change is any change.
	if len(newPod.Spec.Tolerations) != len(oldPod.Spec.Tolerations) {
		add(framework.UpdatePodToleration)
	}
	// The resource claim controller records the claims it made for the
	// pod in its status; DynamicResources waits for them.
	if !resourceclaim.PodStatusEqual(newPod.Status.ResourceClaimStatuses, oldPod.Status.ResourceClaimStatuses) ||
		!resourceclaim.PodExtendedStatusEqual(newPod.Status.ExtendedResourceClaimStatus, oldPod.Status.ExtendedResourceClaimStatus) {
		add(framework.UpdatePodGeneratedResourceClaim)
	}
	if len(events) == 0 {
		add(framework.Update)
	}
	return events
}

// requestDroppedOrWentDown reports whether a request in from is missing
// from to or smaller there. From old to new that is a scale down (in-place
// resize); from new to old, a scale up (a request added or increased). An
// update can be both.
func requestDroppedOrWentDown(from, to v1.ResourceList) bool {
	for name, q := range from {
		toQ, ok := to[name]
		if !ok || q.MilliValue() > toQ.MilliValue() {
			return true
		}
	}
	return false
}
