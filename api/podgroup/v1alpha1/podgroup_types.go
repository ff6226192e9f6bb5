package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupLabel is the label that makes a pod a member of the PodGroup of
// that name in the pod's namespace.
const PodGroupLabel = "scheduling.x-k8s.io/pod-group"

// PodGroupPhase is the phase of a PodGroup, as scheduler-plugins defines it.
type PodGroupPhase string

// Phases of a PodGroup, with scheduler-plugins' meanings.
const (
	// PodGroupPending: the group was accepted, but fewer than minMember
	// member pods exist.
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupScheduling: at least minMember member pods exist, but fewer
	// than minMember are running or succeeded.
	PodGroupScheduling PodGroupPhase = "Scheduling"
	// PodGroupRunning: minMember member pods are running or succeeded.
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupUnknown: part of the group was scheduled and the rest cannot
	// be. Defined by scheduler-plugins; neither scheduler sets it.
	PodGroupUnknown PodGroupPhase = "Unknown"
	// PodGroupFinished: minMember member pods succeeded. Final.
	PodGroupFinished PodGroupPhase = "Finished"
	// PodGroupFailed: a member failed after minMember had run. Final.
	PodGroupFailed PodGroupPhase = "Failed"
)

// PodGroupSpec is what a gang needs to start: scheduler-plugins' fields.
type PodGroupSpec struct {
	// MinMember is the number of member pods that must be placed together;
	// the scheduler places none of them until it can place this many.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinMember int32 `json:"minMember,omitempty"`

	// MinResources is the least the group needs in total; the scheduler
	// does not start placing members while the cluster's free resources
	// cannot cover it.
	// +optional
	MinResources v1.ResourceList `json:"minResources,omitempty"`

	// ScheduleTimeoutSeconds is how long members wait at Permit for the
	// rest of the group; unset means the plugin's permitWaitingTimeSeconds.
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is what the operator observes of a group. Phase,
// occupiedBy, running, succeeded, failed and scheduleStartTime are
// scheduler-plugins' fields; scheduled, waiting and conditions are
// profile-scheduler's additions.
type PodGroupStatus struct {
	// Phase is the group's phase.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`

	// OccupiedBy names the workloads (namespace/name of the members'
	// owners) that use the group.
	// +optional
	OccupiedBy string `json:"occupiedBy,omitempty"`

	// Scheduled is the number of members bound to a node.
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`

	// Waiting is the number of members held at Permit: placed on a node
	// whose resources are reserved for them, waiting for the rest of the
	// group (or for an approval).
	// +optional
	Waiting int32 `json:"waiting,omitempty"`

	// Running is the number of members running.
	// +optional
	Running int32 `json:"running,omitempty"`

	// Succeeded is the number of members that succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// Failed is the number of members that failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// ScheduleStartTime is when a member of the group was first held at
	// Permit.
	// +optional
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`

	// Conditions: Scheduled says whether minMember members got past
	// Permit together, and, after a timeout, which members were missing.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of a PodGroup.
const (
	// PodGroupScheduled is True once minMember members were admitted
	// together, False with ReasonTimeout when a wait for the rest of the
	// group ended at its deadline.
	PodGroupScheduled = "Scheduled"
	// ReasonQuorumReached: minMember members were admitted together.
	ReasonQuorumReached = "QuorumReached"
	// ReasonTimeout: members waited at Permit until the group's timeout
	// and were released; the message names the members that were missing.
	ReasonTimeout = "Timeout"
)

// PodGroup is a gang: pods labelled with its name that are scheduled all
// together or not at all. It is scheduler-plugins' PodGroup, unchanged.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={pg,pgs}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
// +kubebuilder:printcolumn:name="Phase",JSONPath=".status.phase",type=string,description="Current phase of PodGroup."
// +kubebuilder:printcolumn:name="MinMember",JSONPath=".spec.minMember",type=integer,description="MinMember defines the minimal number of members/tasks to run the pod group."
// +kubebuilder:printcolumn:name="Waiting",JSONPath=".status.waiting",type=integer,description="The number of members held at Permit."
// +kubebuilder:printcolumn:name="Scheduled",JSONPath=".status.scheduled",type=integer,description="The number of members bound to a node."
// +kubebuilder:printcolumn:name="Running",JSONPath=".status.running",type=integer,description="The number of actively running pods."
// +kubebuilder:printcolumn:name="Succeeded",JSONPath=".status.succeeded",type=integer,description="The number of pods which reached phase Succeeded."
// +kubebuilder:printcolumn:name="Failed",JSONPath=".status.failed",type=integer,description="The number of pods which reached phase Failed."
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date,description="Age is the time PodGroup was created."
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec PodGroupSpec `json:"spec,omitempty"`
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupList is a list of PodGroups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
