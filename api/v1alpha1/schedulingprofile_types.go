package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// SchedulingProfileSpec is an upstream KubeSchedulerProfile
// (kubescheduler.config.k8s.io/v1), field for field and with the same JSON
// names, so a profile pasted from a kube-scheduler configuration file is
// accepted unchanged.
type SchedulingProfileSpec struct {
	// SchedulerName is the value of pod.spec.schedulerName this profile serves.
	// When unset the profile's metadata.name is used.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SchedulerName *string `json:"schedulerName,omitempty"`

	// PercentageOfNodesToScore is the percentage of all nodes that, once found
	// feasible, stops the search for more feasible nodes. 0 or unset means the
	// adaptive default; 100 checks every node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	PercentageOfNodesToScore *int32 `json:"percentageOfNodesToScore,omitempty"`

	// Plugins enables and disables plugins per extension point. Unset means
	// the upstream default profile with the plugins built so far.
	// +optional
	Plugins *Plugins `json:"plugins,omitempty"`

	// PluginConfig holds the arguments of each plugin, in the upstream *Args
	// kinds where the plugin exists upstream.
	// +optional
	// +listType=map
	// +listMapKey=name
	PluginConfig []PluginConfig `json:"pluginConfig,omitempty"`

	// Extenders are HTTP scheduler extenders called after the plugins of
	// this profile, as upstream's KubeSchedulerConfiguration extenders are
	// (there for every profile, here per profile).
	// +optional
	// +listType=atomic
	Extenders []Extender `json:"extenders,omitempty"`

	// ShadowOf makes this profile a shadow of the named schedulerName: it
	// serves no pods and claims no schedulerName, but computes, for a sample
	// of the pods that schedulerName places (by a profile of this operator
	// or by another scheduler), where it would have placed each, and
	// reports in status.shadow how often it agrees. It reserves, holds and
	// binds nothing: Reserve, Permit, PreBind, Bind and PostFilter
	// (preemption) never run. It is not an upstream field.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ShadowOf *string `json:"shadowOf,omitempty"`
}

// Plugins lists the plugins to enable or disable at each extension point, as
// upstream's Plugins type.
type Plugins struct {
	// +optional
	PreEnqueue PluginSet `json:"preEnqueue,omitempty"`
	// +optional
	QueueSort PluginSet `json:"queueSort,omitempty"`
	// +optional
	PreFilter PluginSet `json:"preFilter,omitempty"`
	// +optional
	Filter PluginSet `json:"filter,omitempty"`
	// +optional
	PostFilter PluginSet `json:"postFilter,omitempty"`
	// +optional
	PreScore PluginSet `json:"preScore,omitempty"`
	// +optional
	Score PluginSet `json:"score,omitempty"`
	// +optional
	Reserve PluginSet `json:"reserve,omitempty"`
	// +optional
	Permit PluginSet `json:"permit,omitempty"`
	// +optional
	PreBind PluginSet `json:"preBind,omitempty"`
	// +optional
	Bind PluginSet `json:"bind,omitempty"`
	// +optional
	PostBind PluginSet `json:"postBind,omitempty"`
	// MultiPoint enables a plugin at every extension point it implements.
	// Plugins set at a specific extension point take precedence.
	// +optional
	MultiPoint PluginSet `json:"multiPoint,omitempty"`
	// PlacementGenerate, PlacementScore and PodGroupPostFilter are upstream's
	// pod-group (workload) scheduling points, which kube-scheduler 1.37 runs
	// only behind feature gates that are off by default (GenericWorkload
	// for podGroupPostFilter, TopologyAwareWorkloadScheduling for the
	// placement points). They run in a workload-aware profile, one that
	// enables GangScheduling, TopologyPlacementGenerator or
	// PodGroupPodsCount, when the operator runs with the point's gate.
	// Elsewhere, as upstream with its default gates, a plugin upstream
	// implements there (NodeResourcesFit at placementScore,
	// DynamicResources and DefaultPreemption at podGroupPostFilter) is
	// accepted and does nothing, so a pasted 1.37 profile loads unchanged;
	// any other plugin is refused, naming what the point needs, and pods
	// are scheduled one at a time.
	// +optional
	PlacementGenerate PluginSet `json:"placementGenerate,omitempty"`
	// +optional
	PlacementScore PluginSet `json:"placementScore,omitempty"`
	// +optional
	PodGroupPostFilter PluginSet `json:"podGroupPostFilter,omitempty"`
}

// PluginSet is the plugins enabled and disabled at one extension point.
type PluginSet struct {
	// Enabled plugins run in the order given, after the default plugins
	// that are not disabled.
	// +optional
	Enabled []Plugin `json:"enabled,omitempty"`
	// Disabled plugins are removed from the defaults; name '*' disables all
	// default plugins of the extension point.
	// +optional
	Disabled []Plugin `json:"disabled,omitempty"`
}

// Plugin names a plugin and, for Score, its weight.
type Plugin struct {
	// Name of the plugin.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Weight of a Score plugin; unset means 1. Only used at Score.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Weight *int32 `json:"weight,omitempty"`
}

// PluginConfig is the arguments of one plugin.
type PluginConfig struct {
	// Name of the plugin the arguments are for.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Args is the plugin's arguments, an upstream *Args kind where the plugin
	// exists upstream; apiVersion and kind may be omitted.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Args runtime.RawExtension `json:"args,omitempty"`
}

// ResolvedPlugin is a plugin that really runs at an extension point.
type ResolvedPlugin struct {
	// Name of the plugin.
	Name string `json:"name"`
	// Weight applied to the plugin's scores; set only at Score.
	// +optional
	Weight int32 `json:"weight,omitempty"`
}

// ResolvedPlugins is what really runs at each extension point, in order,
// after defaults, multiPoint expansion and disabling.
type ResolvedPlugins struct {
	// +optional
	PreEnqueue []ResolvedPlugin `json:"preEnqueue,omitempty"`
	// +optional
	QueueSort []ResolvedPlugin `json:"queueSort,omitempty"`
	// +optional
	PreFilter []ResolvedPlugin `json:"preFilter,omitempty"`
	// +optional
	Filter []ResolvedPlugin `json:"filter,omitempty"`
	// +optional
	PostFilter []ResolvedPlugin `json:"postFilter,omitempty"`
	// +optional
	PreScore []ResolvedPlugin `json:"preScore,omitempty"`
	// +optional
	Score []ResolvedPlugin `json:"score,omitempty"`
	// +optional
	Reserve []ResolvedPlugin `json:"reserve,omitempty"`
	// +optional
	Permit []ResolvedPlugin `json:"permit,omitempty"`
	// +optional
	PreBind []ResolvedPlugin `json:"preBind,omitempty"`
	// +optional
	Bind []ResolvedPlugin `json:"bind,omitempty"`
	// +optional
	PostBind []ResolvedPlugin `json:"postBind,omitempty"`
}

// SchedulingProfileStatus is what the operator observes of a profile.
type SchedulingProfileStatus struct {
	// ObservedGeneration is the generation the controller last acted on.
	// It reads 0 until the controller first writes status (the API server
	// defaults it), so that kstatus, which takes an object without status
	// for one that is ready, reports a profile just applied as in progress.
	// +optional
	// +kubebuilder:default=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// SchedulerName is the schedulerName this profile claims: spec.schedulerName,
	// or metadata.name when that is unset.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// ServingGeneration is the generation of the spec whose instance serves
	// pods now. It lags observedGeneration while an invalid update is refused.
	// +optional
	ServingGeneration int64 `json:"servingGeneration,omitempty"`

	// ServingRevision names the ControllerRevision that holds the spec of
	// servingGeneration. It lets the last valid spec keep serving across
	// operator restarts and leader changes while the current spec is
	// invalid. The spec lives there, not in status, so that a large spec
	// cannot make status too large to write.
	// +optional
	ServingRevision *RevisionReference `json:"servingRevision,omitempty"`

	// Plugins is what the serving instance runs at each extension point.
	// +optional
	Plugins *ResolvedPlugins `json:"plugins,omitempty"`

	// OmittedDefaultPlugins lists the upstream default plugins this profile
	// would run on kube-scheduler that profile-scheduler does not provide yet.
	// +optional
	// +listType=atomic
	OmittedDefaultPlugins []string `json:"omittedDefaultPlugins,omitempty"`

	// ServingSpecHash identifies the spec of servingGeneration as it
	// compiles (shadowOf and schedulerName left out), as a shadow's
	// status.shadow.specHash does the spec it evaluated.
	// +optional
	ServingSpecHash string `json:"servingSpecHash,omitempty"`

	// Shadow is what a shadow profile (spec.shadowOf) found so far: how
	// many placements it evaluated and how many it agrees with. The counts
	// start again when the shadow's generation or its shadowOf changes, or
	// the operator restarts.
	// +optional
	Shadow *ShadowStatus `json:"shadow,omitempty"`

	// Conditions: Accepted and Active, kstatus's Ready, Reconciling and
	// Stalled, and ExtendersReachable on a profile with extenders.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// RevisionReference names a ControllerRevision (apps/v1) owned by the
// profile, and the hash of its data.
type RevisionReference struct {
	// Namespace of the ControllerRevision: the operator's own.
	Namespace string `json:"namespace"`
	// Name of the ControllerRevision.
	Name string `json:"name"`
	// Hash is "sha256:" and the hex SHA-256 of the revision's data, checked
	// before the spec is served again.
	Hash string `json:"hash"`
}

// ShadowStatus counts what a shadow profile found, comparing its choice of
// node with the node the serving scheduler chose, pod by pod. It holds
// counts only: who may read SchedulingProfiles may not read every
// namespace's pods. Each disagreement is an event regarding its pod, in the
// pod's namespace, and a log line.
type ShadowStatus struct {
	// Of is the schedulerName whose placements are evaluated.
	Of string `json:"of"`
	// Generation is the generation of the shadow the counts are for: the
	// one it evaluated. It lags metadata.generation while a new spec is
	// refused (the last valid one keeps evaluating) and until the new one
	// starts; the counts start again with each generation, so they never
	// mix two.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// SpecHash identifies the spec of that generation as it compiles,
	// leaving out shadowOf and schedulerName: promoting the shadow makes
	// the live profile serve this hash (status.servingSpecHash).
	// +optional
	SpecHash string `json:"specHash,omitempty"`
	// Since is when the counts started.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Evaluated is how many placements the shadow evaluated:
	// sameNode + otherNode + noNode + errors.
	Evaluated int64 `json:"evaluated"`
	// SameNode counts pods the shadow would have placed on the serving
	// scheduler's node, or for which that node was among the shadow's
	// equally best nodes (upstream picks at random among those).
	SameNode int64 `json:"sameNode"`
	// OtherNode counts pods the shadow would have placed on another node.
	OtherNode int64 `json:"otherNode"`
	// NoNode counts pods the shadow would have found unschedulable.
	NoNode int64 `json:"noNode"`
	// Errors counts evaluations that failed with an internal error.
	// +optional
	Errors int64 `json:"errors,omitempty"`
	// SampledOut counts placements left out by the sampling rate.
	// +optional
	SampledOut int64 `json:"sampledOut,omitempty"`
	// Dropped counts sampled placements dropped because the shadow's queue
	// was full: the shadow fell behind.
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
}

// Condition types and reasons of a SchedulingProfile.
const (
	// ProfileAccepted is True when the current spec is valid and its
	// instance was built.
	ProfileAccepted = "Accepted"
	// ProfileActive is True when an instance of this profile serves pods.
	ProfileActive = "Active"

	// ProfileReady, ProfileReconciling and ProfileStalled are kstatus's
	// standard conditions, which Flux and kubectl wait read without custom
	// code (Argo CD through the health check in docs/gitops.md). Ready is
	// True when the current generation serves. Reconciling is True while
	// the current generation is being built and swapped in; Stalled is True
	// when it cannot serve until the spec changes. Both are abnormal-true:
	// absent when not True, as kstatus recommends.
	ProfileReady       = "Ready"
	ProfileReconciling = "Reconciling"
	ProfileStalled     = "Stalled"

	// ReasonBuilt: the spec was valid and its instance was built.
	ReasonBuilt = "Built"
	// ReasonInvalidSpec: the spec cannot be built; the message says why.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSpecTooLarge: the spec is larger than the operator accepts, so
	// that its status and its stored copy always fit the API server's limits.
	ReasonSpecTooLarge = "SpecTooLarge"
	// ReasonWorkloadAPINotServed: the profile is workload-aware (it enables
	// a workload plugin, with the operator's gate), and the cluster's API
	// server does not serve scheduling.k8s.io/v1beta1 Workloads and
	// PodGroups; the message names the kube-apiserver flags that serve
	// them. The profile is built once the API server serves them.
	ReasonWorkloadAPINotServed = "WorkloadAPINotServed"
	// ReasonSchedulerNameConflict: an older profile claims the same schedulerName.
	ReasonSchedulerNameConflict = "SchedulerNameConflict"
	// ReasonReservedSchedulerName: the schedulerName is reserved for another scheduler.
	ReasonReservedSchedulerName = "ReservedSchedulerName"
	// ReasonBuilding: the instance of the current generation is being
	// built; the message says which generation serves meanwhile.
	ReasonBuilding = "Building"
	// ReasonServing: an instance of the profile is taking pods.
	ReasonServing = "Serving"
	// ReasonNotServing: no instance of the profile is taking pods.
	ReasonNotServing = "NotServing"
	// ReasonShadowing: the profile is a shadow (spec.shadowOf); it takes
	// no pods, its instance evaluates another schedulerName's placements.
	ReasonShadowing = "Shadowing"
	// ReasonTooManyShadows: the operator already runs as many older
	// shadows as its --max-shadows allows.
	ReasonTooManyShadows = "TooManyShadows"
	// ReasonShadowDisagreement is the reason of the event a shadow
	// records on a pod it would have placed elsewhere or nowhere.
	ReasonShadowDisagreement = "ShadowDisagreement"
)

// SchedulingProfile is a scheduler profile as a resource: pods whose
// spec.schedulerName names it are scheduled by a live framework instance
// built from its spec, and a change to the spec takes effect without restart.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sp;sprofile
// +kubebuilder:printcolumn:name="SchedulerName",type=string,JSONPath=`.status.schedulerName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the current generation serves"
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Generation",type=integer,priority=1,JSONPath=`.metadata.generation`
// +kubebuilder:printcolumn:name="Serving",type=integer,priority=1,JSONPath=`.status.servingGeneration`,description="The generation whose instance serves pods now"
// +kubebuilder:printcolumn:name="ShadowOf",type=string,priority=1,JSONPath=`.spec.shadowOf`,description="The schedulerName a shadow profile evaluates"
// +kubebuilder:printcolumn:name="Evaluated",type=integer,priority=1,JSONPath=`.status.shadow.evaluated`,description="Placements the shadow evaluated"
// +kubebuilder:printcolumn:name="SameNode",type=integer,priority=1,JSONPath=`.status.shadow.sameNode`,description="Placements the shadow agrees with"
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why the current generation serves or not"
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.schedulerName)) || self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name is used as the schedulerName when spec.schedulerName is unset, so it must then be a DNS-1123 label"
type SchedulingProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SchedulingProfileSpec `json:"spec,omitempty"`
	// +optional
	// +kubebuilder:default={}
	Status SchedulingProfileStatus `json:"status,omitempty"`
}

// SchedulingProfileList is a list of SchedulingProfiles.
//
// +kubebuilder:object:root=true
type SchedulingProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SchedulingProfile `json:"items"`
}
