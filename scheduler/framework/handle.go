package framework

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// Handle is what a plugin factory receives: data and tools of the framework
// instance the plugin belongs to. Plugins keep it for their lifetime.
type Handle interface {
	// PodNominator gives access to pods nominated by preemption.
	PodNominator
	// PodActivator moves pods to the active queue.
	PodActivator
	// PluginsRunner runs this instance's plugins (used by preemption).
	PluginsRunner

	// SnapshotSharedLister returns the snapshot taken at the start of the
	// current scheduling cycle. Use it only in the scheduling cycle
	// (PreFilter to Permit): the binding cycle and PreEnqueue/queueing
	// hints run concurrently with later snapshots; use the informers there.
	SnapshotSharedLister() SharedLister
	// MutableSnapshotSharedLister returns the same snapshot as one that
	// can be changed and put back, for PodGroupPostFilter only; nil when
	// the instance's snapshot cannot be.
	MutableSnapshotSharedLister() MutableSnapshotSharedLister

	// IterateOverWaitingPods calls callback for each pod waiting at Permit
	// when it was called, holding no lock of the framework, so callback may
	// Allow or Reject it (as upstream's Coscheduling does) even when that
	// calls back into a plugin that iterates again.
	IterateOverWaitingPods(callback func(WaitingPod))
	// GetWaitingPod returns the waiting pod with uid, or nil.
	GetWaitingPod(uid types.UID) WaitingPod
	// RejectWaitingPod rejects the waiting pod with uid; false if there is none.
	RejectWaitingPod(uid types.UID) bool
	// AllowWaitingPodsTogether lets every pod of pods proceed, as one step,
	// when pluginName is the only plugin still holding each of them: either
	// all of them go or, when one was already resolved (rejected, timed
	// out, released) or another plugin still holds one, none. It reports
	// which. No other Allow, Reject or timeout of these pods interleaves
	// with it, so a plugin that admits a group of pods at once (a gang)
	// never admits part of it, and nothing can hold back part of a group
	// it admitted.
	AllowWaitingPodsTogether(pluginName string, pods []WaitingPod) bool
	// GetPodInPreBind returns the pod with uid whose binding cycle is in
	// PreBind (see PodInPreBind), or nil. A pod only gets there when a
	// PreBind plugin's PreBindPreFlight said it has work for it.
	GetPodInPreBind(uid types.UID) PodInPreBind

	// ClientSet returns the Kubernetes client.
	ClientSet() clientset.Interface
	// EventRecorder records events on behalf of the scheduler.
	EventRecorder() events.EventRecorderLogger
	// SharedInformerFactory returns the informers shared by all instances
	// and the operator's controllers; add an index to one with AddIndex.
	SharedInformerFactory() informers.SharedInformerFactory
	// SharedDRAManager returns the Dynamic Resource Allocation objects
	// shared by all instances, nil when the instance was built without.
	SharedDRAManager() SharedDRAManager

	// Extenders returns the profile's HTTP extenders, in the profile's
	// order: the scheduling loop calls them after the plugins, and
	// preemption lets them narrow its candidates.
	Extenders() []Extender

	// RunFilterPluginsWithNominatedPods runs Filter for pod on info, also
	// accounting for pods of equal or higher priority nominated to the node.
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *v1.Pod, info *NodeInfo) *Status

	// Parallelizer runs work in parallel with the scheduler's parallelism.
	Parallelizer() Parallelizer

	// ProfileName returns the schedulerName of the profile.
	ProfileName() string

	// Metrics returns the scheduler's metrics, for plugins that report
	// their own (DefaultPreemption).
	Metrics() *metrics.Metrics

	// PodGroupManager returns the scheduler cache's live view of pod
	// groups; nil when the instance was built without one.
	PodGroupManager() PodGroupManager
	// WorkloadAware reports whether the instance schedules pod groups:
	// its profile enables a workload plugin whose feature gate is on. The
	// pods of an instance that is not are scheduled one at a time,
	// whatever their scheduling group. It is known before the plugin
	// factories run, so a factory can build its plugin with upstream's
	// GenericWorkload behaviour exactly in such instances.
	WorkloadAware() bool
	// HasPlacementPlugins reports whether any PlacementGenerate or
	// PlacementScore plugin is configured: the instance places pod groups
	// by placement, as upstream does for every group with the
	// TopologyAwareWorkloadScheduling gate on. Known once the instance is
	// built, after the factories ran.
	HasPlacementPlugins() bool

	// ListPlugins returns the plugins that run at each extension point, in
	// order, with weights at Score: the resolved form of the profile. It is
	// complete once the instance is built, after the factories ran.
	ListPlugins() *configv1.Plugins
}

// Framework is one profile's plugins, ready to run: what the scheduling
// loop and the queue use. Plugins only see the Handle part.
type Framework interface {
	Handle

	// PreEnqueuePlugins returns the PreEnqueue plugins, in order.
	PreEnqueuePlugins() []PreEnqueuePlugin
	// EnqueueExtensions returns, for every plugin that can reject pods, the
	// events it registered (the wildcard set for those that registered none).
	EnqueueExtensions() []EnqueueExtensions
	// QueueSortFunc returns the QueueSort plugin's Less.
	QueueSortFunc() LessFunc

	// RunPreFilterPlugins runs PreFilter plugins. It returns the merged
	// PreFilterResult, the status, and the plugins whose result narrowed the nodes.
	RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod) (*PreFilterResult, *Status, sets.Set[string])
	// FindNodesThatPassFilters runs Filter (with nominated pods) over nodes
	// in parallel, starting at nodes[start%len(nodes)] and stopping once
	// numNodesToFind nodes passed. Rejections are recorded in
	// diagnosis.NodeToStatus and diagnosis.UnschedulablePlugins. It
	// returns the feasible nodes.
	FindNodesThatPassFilters(ctx context.Context, state *CycleState, pod *v1.Pod, diagnosis *Diagnosis, nodes []*NodeInfo, start, numNodesToFind int) ([]*NodeInfo, error)
	// RunPostFilterPlugins runs PostFilter plugins until one succeeds.
	RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, filteredNodeStatusMap NodeToStatusReader) (*PostFilterResult, *Status)
	// RunPermitPlugins runs Permit plugins. On Wait it registers the pod as
	// waiting (on nodeName) and returns Wait; call WaitOnPermit in the
	// binding cycle.
	RunPermitPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	// WillWaitOnPermit reports whether pod is waiting at Permit.
	WillWaitOnPermit(ctx context.Context, pod *v1.Pod) bool
	// WaitOnPermit blocks until the waiting pod is allowed, rejected or
	// times out; nil if the pod is not waiting.
	WaitOnPermit(ctx context.Context, pod *v1.Pod) *Status
	// RunPreBindPreFlights asks PreBind plugins whether they have work:
	// Success if any has, Skip if none, Error on failure.
	RunPreBindPreFlights(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	// AddPodInPreBind registers the binding cycle of the pod with uid as
	// in PreBind, cancellable through cancel, until RemovePodInPreBind.
	AddPodInPreBind(uid types.UID, cancel context.CancelCauseFunc)
	// RemovePodInPreBind forgets the pod with uid registered by
	// AddPodInPreBind, if any, and closes its Done. A no-op otherwise.
	RemovePodInPreBind(uid types.UID)
	// RunPreBindPlugins runs PreBind plugins that did not skip in PreBindPreFlight.
	RunPreBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	// RunBindPlugins runs Bind plugins until one does not Skip.
	RunBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	// RunPostBindPlugins runs PostBind plugins.
	RunPostBindPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)

	// RunPlacementGeneratePlugins returns the placements podGroup is tried
	// on: one holding nodes when no PlacementGenerate plugin runs.
	RunPlacementGeneratePlugins(ctx context.Context, state PodGroupCycleState, podGroup *PodGroupInfo, nodes []*NodeInfo) ([]*Placement, *Status)
	// RunPlacementFeasiblePlugins tells whether a placement can still hold
	// the group after one more of its pods was tried: Success, Wait (maybe,
	// once more pods are tried) or Unschedulable.
	RunPlacementFeasiblePlugins(ctx context.Context, state PlacementCycleState, podGroupInfo *PodGroupInfo, progress PlacementProgress) *Status
	// RunPlacementScorePlugins scores the placements whose assignments are
	// given, placementStates[i] being the state placement i was tried with:
	// normalized, weighted, one PlacementPluginScores per placement.
	RunPlacementScorePlugins(ctx context.Context, state PodGroupCycleState, podGroupInfo *PodGroupInfo, podGroupAssignments []*PodGroupAssignments, placementStates []PlacementCycleState) ([]PlacementPluginScores, *Status)
	// RunPodGroupPostFilterPlugins runs PodGroupPostFilter plugins (pod-group
	// preemption) after the group could not be scheduled.
	RunPodGroupPostFilterPlugins(ctx context.Context, state *CycleState, podGroupInfo *PodGroupInfo, pgSchedulingFunc PodGroupSchedulingFunc) (*PodGroupPostFilterResult, *Status)

	// HasFilterPlugins reports whether any Filter plugin is configured.
	HasFilterPlugins() bool
	// HasPostFilterPlugins reports whether any PostFilter plugin is configured.
	HasPostFilterPlugins() bool
	// HasScorePlugins reports whether any Score plugin is configured.
	HasScorePlugins() bool
	// PercentageOfNodesToScore returns the profile's value, or nil.
	PercentageOfNodesToScore() *int32
	// NumFeasibleNodesToFind applies percentageOfNodesToScore (profile,
	// then scheduler-wide, then adaptive) to a cluster of numAllNodes.
	NumFeasibleNodesToFind(numAllNodes int32) int32
	// SignPod returns pod's signature (see PodSignature), or nil when the
	// instance does not batch or some plugin cannot sign the pod.
	SignPod(ctx context.Context, pod *v1.Pod) PodSignature
	// GetNodeHint returns the node the previous cycle's results point the
	// pod to, or "" when they cannot be used for it (opportunistic
	// batching). cycle is the scheduling queue's cycle of the pod.
	GetNodeHint(ctx context.Context, pod *v1.Pod, signature PodSignature, state *CycleState, cycle int64) string
	// StoreScheduleResults records the cycle's choice, the hint it was
	// given and the other feasible nodes, best first, for GetNodeHint.
	StoreScheduleResults(ctx context.Context, signature PodSignature, hintedNode, chosenNode string, otherNodes *SortedScoredNodes, cycle int64)

	// Close rejects pods still waiting at Permit and closes plugins that
	// implement io.Closer. Call it once the instance is retired.
	Close() error
}
