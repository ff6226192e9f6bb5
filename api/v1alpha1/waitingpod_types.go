package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Decision is what a person decided for a pod held at Permit.
// +kubebuilder:validation:Enum=Approve;Reject
type Decision string

// A decision answers the ManualApproval Permit plugin only: it never
// releases a pod from another Permit plugin (a gang quorum, a quota), whose
// hold is that plugin's to end.
const (
	// DecisionApprove allows ManualApproval for the pod.
	DecisionApprove Decision = "Approve"
	// DecisionReject rejects the pod at ManualApproval; it returns to
	// pending with the reason.
	DecisionReject Decision = "Reject"
)

// WaitingPodSpec is a person's intent about a held pod. Once a decision is
// set neither it nor its reason and author can change, as with an approved
// CertificateSigningRequest.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == oldSelf.decision)",message="decision cannot be changed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.reason) == has(oldSelf.reason) && (!has(oldSelf.reason) || self.reason == oldSelf.reason) && has(self.decidedBy) == has(oldSelf.decidedBy) && (!has(oldSelf.decidedBy) || self.decidedBy == oldSelf.decidedBy))",message="reason and decidedBy cannot be changed once a decision is set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.podUID) || (has(self.podUID) && self.podUID == oldSelf.podUID)",message="podUID cannot be changed once set"
// +kubebuilder:validation:XValidation:rule="!has(self.decision) || (has(self.podUID) && size(self.podUID) > 0)",message="a decision must name its pod: set podUID to the UID of the pod it is for"
// +kubebuilder:validation:XValidation:rule="has(self.profileUID) == has(oldSelf.profileUID) && (!has(oldSelf.profileUID) || self.profileUID == oldSelf.profileUID) || (!has(oldSelf.decision) && !has(oldSelf.profileUID))",message="profileUID cannot be changed once set or once a decision is set"
type WaitingPodSpec struct {
	// PodUID is the pod the decision applies to; a decision requires it. A
	// decision never applies to another pod that later takes the same name.
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`

	// Decision is Approve or Reject.
	// +optional
	Decision Decision `json:"decision,omitempty"`

	// Reason is why the decision was made; it is shown on the pod.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// DecidedBy is the user who made the decision.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	DecidedBy string `json:"decidedBy,omitempty"`

	// ProfileUID pins the decision to the SchedulingProfile, by UID, that
	// held the pod when it was made (kubectl approve/reject set it from
	// the profile status.profile names). The decision applies only while
	// that profile serves the pod: not to another profile serving the
	// name (its Approved or Rejected condition turns False, reason
	// OtherProfile), nor, once it is deleted, to a new profile of the same
	// name (reason ProfileGone). A decision without it (made with --ahead)
	// applies to whichever profile holds the pod next.
	// +optional
	ProfileUID types.UID `json:"profileUID,omitempty"`
}

// PendingPlugin is a Permit plugin that still holds the pod.
type PendingPlugin struct {
	// Name of the Permit plugin.
	Name string `json:"name"`
	// Deadline is when the plugin's wait ends on its own.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// Message is what the plugin says it waits for, such as
	// "3/4 members assigned", when it says so.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClaimAllocation is what one ResourceClaim of a held pod would be
// allocated if the pod is let through: the devices the scheduler set aside
// for it in Reserve, which only the binding that follows Permit writes to
// the claim.
type ClaimAllocation struct {
	// Name is the pod's name for the claim, its entry in
	// spec.resourceClaims.
	Name string `json:"name"`
	// ResourceClaim is the ResourceClaim object, in the pod's namespace:
	// the one the entry names, or the one made from its
	// ResourceClaimTemplate.
	ResourceClaim string `json:"resourceClaim"`
	// Devices are the devices allocated to the claim's requests, in the
	// order of the allocation result.
	// +optional
	// +listType=atomic
	Devices []AllocatedDevice `json:"devices,omitempty"`
}

// AllocatedDevice is one device allocated to a request of a ResourceClaim,
// as the claim's status.allocation.devices.results names it.
type AllocatedDevice struct {
	// Request is the claim's request the device serves; a subrequest of
	// firstAvailable is named <request>/<subrequest>.
	Request string `json:"request"`
	// Driver is the DRA driver of the device, such as gpu.example.com.
	Driver string `json:"driver"`
	// Pool is the pool of the driver's ResourceSlices the device is in.
	Pool string `json:"pool"`
	// Device is the device's name in its pool.
	Device string `json:"device"`
}

// WaitingPodStatus is what the scheduler observes of a held pod.
type WaitingPodStatus struct {
	// PodUID is the pod the scheduler holds.
	// +optional
	PodUID types.UID `json:"podUID,omitempty"`
	// Profile is the schedulerName of the instance holding the pod.
	// +optional
	Profile string `json:"profile,omitempty"`
	// PodGroup is the PodGroup the pod is a member of: the one its
	// scheduling.x-k8s.io/pod-group label names, shown only when the
	// instance holding the pod runs Coscheduling at Permit and the PodGroup
	// exists. A label on a pod of any other profile makes it no member.
	// +optional
	PodGroup string `json:"podGroup,omitempty"`
	// NodeName is the node whose resources are reserved for the pod while
	// it is held, and where it goes on to bind once every Permit plugin
	// allowed it. It is cleared when the pod is rejected or its wait
	// expires: the pod is pending again and holds nothing there.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// PendingPlugins are the Permit plugins that still hold the pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	PendingPlugins []PendingPlugin `json:"pendingPlugins,omitempty"`
	// Plugins are the names of pendingPlugins joined with ",", for
	// `kubectl get -o wide`: a table cell shows one value of a list.
	// +optional
	Plugins string `json:"plugins,omitempty"`
	// Expires is the earliest deadline of the pending plugins.
	// +optional
	Expires *metav1.Time `json:"expires,omitempty"`
	// Message sums up what the pending plugins wait for, as
	// "<plugin>: <message>" joined with "; " in the order of
	// pendingPlugins, for those that say.
	// +optional
	Message string `json:"message,omitempty"`
	// Claims are, while the pod is held, the devices each of its
	// ResourceClaims would get: allocations the scheduler made in Reserve
	// and writes to the claims only if the pod is let through, or the
	// claim's allocation when it was allocated before. Only the pod's own
	// claims are shown; the list is emptied once the wait ends.
	// +optional
	// +listType=map
	// +listMapKey=name
	Claims []ClaimAllocation `json:"claims,omitempty"`
	// ExtendedResourceDevices are, while the pod is held, the devices set
	// aside for its extended resources backed by DRA (requests of a
	// DeviceClass's extendedResourceName): the scheduler creates the
	// ResourceClaim that holds them only if the pod is let through, so
	// until then they are in no claim. Emptied once the wait ends.
	// +optional
	// +listType=atomic
	ExtendedResourceDevices []AllocatedDevice `json:"extendedResourceDevices,omitempty"`
	// Conditions: Waiting, Decidable, Approved, Rejected, Expired,
	// PodMismatch.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Condition types of a WaitingPod.
const (
	// WaitingPodWaiting is True while a Permit plugin holds the pod.
	WaitingPodWaiting = "Waiting"
	// WaitingPodApproved is True once an approval reached the scheduler;
	// its reason says whether it reached ManualApproval's hold, is recorded
	// for later, or released nothing (ReasonHeldByOtherPlugins).
	WaitingPodApproved = "Approved"
	// WaitingPodRejected is True once the pod was rejected, by a person or a plugin.
	WaitingPodRejected = "Rejected"
	// WaitingPodExpired is True when a wait ended because its deadline passed.
	WaitingPodExpired = "Expired"
	// WaitingPodDecidable says, while the pod is held, whether a decision
	// can end the hold: True when ManualApproval holds it, False when only
	// other Permit plugins do, which a decision never releases. It is
	// removed once the wait ends.
	WaitingPodDecidable = "Decidable"
	// WaitingPodPodMismatch is True on a decided WaitingPod whose
	// spec.podUID names no pod of its name while another pod of that name
	// is held (an earlier pod's decision, or one made ahead for a pod that
	// was then replaced): the decision does not apply to the held pod,
	// and the WaitingPod is kept, marked, rather than replaced.
	WaitingPodPodMismatch = "PodMismatch"
)

// The condition the operator sets on a Pod held at Permit, and the reason
// of the event that says so on the Pod: `kubectl describe pod` shows why
// the pod waits and which WaitingPod to decide.
const (
	// PodWaitingAtPermit is True on a Pod while Permit plugins hold it,
	// its reason naming them (HeldBy<Plugin>[And<Plugin>...]), and False
	// once the wait ended (reason Allowed, Rejected or Timeout).
	PodWaitingAtPermit = "scheduling.schedprofiles.io/WaitingAtPermit"
	// ReasonWaitingAtPermit is the reason of the event on a Pod that a
	// Permit plugin started to hold it.
	ReasonWaitingAtPermit = "WaitingAtPermit"
	// ReasonPermitTimedOut is the reason of the event on a Pod whose wait
	// at Permit ended because its deadline passed.
	ReasonPermitTimedOut = "PermitTimedOut"
)

// Reasons of the Decidable condition, and of an Approved or Rejected
// condition whose decision did not release the pod.
const (
	// ReasonAwaitingDecision: ManualApproval holds the pod until a decision.
	ReasonAwaitingDecision = "AwaitingDecision"
	// ReasonHeldByOtherPlugins: only Permit plugins other than
	// ManualApproval hold the pod; a decision does not release it.
	ReasonHeldByOtherPlugins = "HeldByOtherPlugins"
	// ReasonOtherPodDecided: the decision is for another pod than the one
	// held under the WaitingPod's name (PodMismatch).
	ReasonOtherPodDecided = "OtherPodDecided"
	// ReasonProfileGone: the decision was made for a SchedulingProfile
	// (spec.profileUID) that no longer exists; it applies to no other.
	ReasonProfileGone = "ProfileGone"
	// ReasonOtherProfile: the decision was made for another
	// SchedulingProfile (spec.profileUID) than the one holding the pod now,
	// which still exists; it applies to that profile only.
	ReasonOtherProfile = "OtherProfile"
)

// WaitingPod is a pod held at the Permit extension point, made visible so a
// person can approve or reject it. It has the namespace and name of its Pod
// and is owned by it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wp
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.metadata.ownerReferences[0].name`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`,priority=1
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.status.profile`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.status.podGroup`
// +kubebuilder:printcolumn:name="Plugins",type=string,JSONPath=`.status.plugins`,priority=1
// +kubebuilder:printcolumn:name="Decidable",type=string,JSONPath=`.status.conditions[?(@.type=="Decidable")].status`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.spec.decision`
// +kubebuilder:printcolumn:name="Expires",type=string,format=date-time,JSONPath=`.status.expires`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WaitingPod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WaitingPodSpec `json:"spec"`
	// +optional
	Status WaitingPodStatus `json:"status,omitempty"`
}

// WaitingPodList is a list of WaitingPods.
//
// +kubebuilder:object:root=true
type WaitingPodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WaitingPod `json:"items"`
}
