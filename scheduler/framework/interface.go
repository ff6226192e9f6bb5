package framework

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// NodeScore is a node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// NodeScoreList is the scores of one plugin over the filtered nodes, in node order.
type NodeScoreList []NodeScore

// PluginScore is a weighted score from one plugin (or extender).
type PluginScore struct {
	Name  string
	Score int64
}

// NodePluginScores is the score breakdown of one node.
type NodePluginScores struct {
	Name string
	// RawScores holds what each scoring plugin that ran returned for the
	// node before NormalizeScore and weights, in plugin order. Opportunistic
	// batching keeps them to normalize again when a node is re-scored;
	// RunScorePlugins fills them only when CycleState.ShouldKeepRawScores.
	RawScores []PluginScore
	// Scores holds one weighted score per scoring plugin that ran, in plugin order.
	Scores []PluginScore
	// TotalScore is the sum of Scores.
	TotalScore int64
	// Randomizer breaks ties between equal TotalScores in SortedScoredNodes
	// (the larger wins). As upstream, only extenders' scores set it: nodes
	// scored by plugins alone keep 0.
	Randomizer int
}

const (
	// MaxScore is the maximum score a Score or PlacementScore plugin may
	// return after normalizing.
	MaxScore int64 = 100
	// MinScore is the minimum score a Score or PlacementScore plugin may
	// return after normalizing.
	MinScore int64 = 0
	// MaxNodeScore is MaxScore, by its older name.
	MaxNodeScore = MaxScore
	// MinNodeScore is MinScore, by its older name.
	MinNodeScore = MinScore
	// MaxTotalScore bounds the sum of weighted scores; profiles whose
	// weights × MaxNodeScore could exceed it are refused.
	MaxTotalScore int64 = math.MaxInt64
)

// NominatingMode tells whether a PostFilter result changes the pod's nominated node.
type NominatingMode int

const (
	// ModeNoop leaves the nominated node as it is.
	ModeNoop NominatingMode = iota
	// ModeOverride sets the nominated node to NominatedNodeName.
	ModeOverride
)

// NominatingInfo is the nominated node a PostFilter plugin proposes.
type NominatingInfo struct {
	NominatedNodeName string
	NominatingMode    NominatingMode
}

// Mode returns the mode (ModeNoop for nil).
func (ni *NominatingInfo) Mode() NominatingMode {
	if ni == nil {
		return ModeNoop
	}
	return ni.NominatingMode
}

// PreFilterResult narrows the nodes Filter is run on.
type PreFilterResult struct {
	// NodeNames are the only nodes worth filtering; nil means all nodes.
	NodeNames sets.Set[string]
}

// AllNodes reports whether the result does not narrow the node set.
func (p *PreFilterResult) AllNodes() bool {
	return p == nil || p.NodeNames == nil
}

// Merge intersects two results; the receiver and in are not modified.
func (p *PreFilterResult) Merge(in *PreFilterResult) *PreFilterResult {
	if p.AllNodes() && in.AllNodes() {
		return nil
	}
	r := PreFilterResult{}
	switch {
	case p.AllNodes():
		r.NodeNames = in.NodeNames.Clone()
	case in.AllNodes():
		r.NodeNames = p.NodeNames.Clone()
	default:
		r.NodeNames = p.NodeNames.Intersection(in.NodeNames)
	}
	return &r
}

// PostFilterResult is what a successful PostFilter plugin proposes.
type PostFilterResult struct {
	*NominatingInfo
}

// PreBindPreFlightResult is a PreBind plugin's answer to "will you do work for this pod?".
type PreBindPreFlightResult struct {
	// AllowParallel says PreBind may run concurrently with neighbouring
	// plugins that allow it too. The runtime currently runs PreBind
	// plugins sequentially regardless; the field is kept for porting.
	AllowParallel bool
}

// NodeToStatusReader is the read-only view of per-node filter results given to PostFilter plugins.
type NodeToStatusReader interface {
	// Get returns the status of nodeName, or AbsentNodesStatus if none was recorded.
	Get(nodeName string) *Status
	// NodesForStatusCode returns the nodes whose status has code, absent nodes included.
	NodesForStatusCode(nodeLister NodeInfoLister, code Code) ([]*NodeInfo, error)
}

// NodeToStatus records why nodes were rejected in PreFilter or Filter.
// Nodes never evaluated (cut by a PreFilterResult, or all nodes when
// PreFilter failed) share AbsentNodesStatus instead of one entry each.
type NodeToStatus struct {
	nodeToStatus      map[string]*Status
	absentNodesStatus *Status
}

var _ NodeToStatusReader = (*NodeToStatus)(nil)

// NewDefaultNodeToStatus returns an empty NodeToStatus whose absent nodes are UnschedulableAndUnresolvable.
func NewDefaultNodeToStatus() *NodeToStatus {
	return NewNodeToStatus(make(map[string]*Status), NewStatus(UnschedulableAndUnresolvable))
}

// NewNodeToStatus returns a NodeToStatus with the given entries and absent-node status.
func NewNodeToStatus(nodeToStatus map[string]*Status, absentNodesStatus *Status) *NodeToStatus {
	return &NodeToStatus{nodeToStatus: nodeToStatus, absentNodesStatus: absentNodesStatus}
}

// Get returns the status of nodeName, or the absent-nodes status.
func (m *NodeToStatus) Get(nodeName string) *Status {
	if s, ok := m.nodeToStatus[nodeName]; ok {
		return s
	}
	return m.absentNodesStatus
}

// Set records the status of nodeName. Not safe for concurrent use.
func (m *NodeToStatus) Set(nodeName string, status *Status) {
	m.nodeToStatus[nodeName] = status
}

// Len returns the number of explicitly recorded nodes.
func (m *NodeToStatus) Len() int {
	return len(m.nodeToStatus)
}

// AbsentNodesStatus returns the status of nodes without an entry.
func (m *NodeToStatus) AbsentNodesStatus() *Status {
	return m.absentNodesStatus
}

// SetAbsentNodesStatus sets the status of nodes without an entry.
func (m *NodeToStatus) SetAbsentNodesStatus(status *Status) {
	m.absentNodesStatus = status
}

// ForEachExplicitNode calls fn for each recorded node (absent nodes are not visited).
func (m *NodeToStatus) ForEachExplicitNode(fn func(nodeName string, status *Status)) {
	for name, s := range m.nodeToStatus {
		fn(name, s)
	}
}

// NodesForStatusCode returns the nodes whose status has code. When absent
// nodes match, all nodes are listed from nodeLister.
func (m *NodeToStatus) NodesForStatusCode(nodeLister NodeInfoLister, code Code) ([]*NodeInfo, error) {
	var out []*NodeInfo
	if m.AbsentNodesStatus().Code() == code {
		all, err := nodeLister.List()
		if err != nil {
			return nil, err
		}
		if m.Len() == 0 {
			return all, nil
		}
		for _, ni := range all {
			if m.Get(ni.Node().Name).Code() == code {
				out = append(out, ni)
			}
		}
		return out, nil
	}
	for name, s := range m.nodeToStatus {
		if s.Code() != code {
			continue
		}
		ni, err := nodeLister.Get(name)
		if err != nil {
			return nil, err
		}
		out = append(out, ni)
	}
	return out, nil
}

// PodsToActivateKey is the reserved CycleState key under which plugins stash
// pods that should be moved to the active queue when this cycle (or its
// binding cycle) succeeds.
const PodsToActivateKey StateKey = "kubernetes.io/pods-to-activate"

// PodsToActivate is the StateData stored under PodsToActivateKey.
type PodsToActivate struct {
	// mu guards Map: plugins add to it from any extension point, including
	// the parallel ones.
	mu sync.Mutex
	// Map is keyed by "namespace/name".
	Map map[string]*v1.Pod
}

// NewPodsToActivate returns an empty PodsToActivate.
func NewPodsToActivate() *PodsToActivate {
	return &PodsToActivate{Map: make(map[string]*v1.Pod)}
}

// Add records pod under its namespaced name.
func (s *PodsToActivate) Add(pod *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Map[pod.Namespace+"/"+pod.Name] = pod
}

// Take returns the recorded pods and clears them.
func (s *PodsToActivate) Take() map[string]*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.Map
	s.Map = make(map[string]*v1.Pod)
	return m
}

// Clone returns s itself: all clones of a cycle share one set of pods to activate.
func (s *PodsToActivate) Clone() StateData {
	return s
}

// Plugin is the parent of every plugin interface.
type Plugin interface {
	Name() string
}

// PreEnqueuePlugin gates pods before they enter the active or backoff queue.
// It runs in informer event handlers, so it must be cheap and never call the API.
type PreEnqueuePlugin interface {
	Plugin
	// PreEnqueue returns non-success to keep the pod gated.
	PreEnqueue(ctx context.Context, p *v1.Pod) *Status
}

// LessFunc orders pods in the active queue.
type LessFunc func(podInfo1, podInfo2 *QueuedPodInfo) bool

// QueueSortPlugin orders the active queue. A profile has exactly one.
type QueueSortPlugin interface {
	Plugin
	Less(*QueuedPodInfo, *QueuedPodInfo) bool
}

// EnqueueExtensions is implemented by plugins that can reject pods
// (PreEnqueue, PreFilter, Filter, Reserve, Permit) to name the cluster events
// that can make such a pod schedulable. A rejecting plugin without it is
// registered for every event, which requeues too often. Returning an empty
// list means the pod is only retried by the periodic flush.
type EnqueueExtensions interface {
	Plugin
	// EventsToRegister is called once when the instance is built; the
	// result must not depend on cluster state.
	EventsToRegister(context.Context) ([]ClusterEventWithHint, error)
}

// PreFilterExtensions lets the framework update a PreFilter plugin's
// CycleState when it evaluates adding or removing pods (nominated pods,
// preemption victims). The nodeInfo may be a shared, non-snapshotted
// NodeInfo: treat it as read-only.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToRemove *PodInfo, nodeInfo *NodeInfo) *Status
}

// PreFilterPlugin runs once per cycle before Filter; it is the place for
// per-pod work so that Filter stays cheap per node.
type PreFilterPlugin interface {
	Plugin
	// PreFilter may return a PreFilterResult to narrow the nodes; nodes it
	// excludes count as UnschedulableAndUnresolvable. Skip makes the
	// framework skip this plugin's Filter and PreFilterExtensions this
	// cycle (the result is ignored).
	PreFilter(ctx context.Context, state *CycleState, p *v1.Pod, nodes []*NodeInfo) (*PreFilterResult, *Status)
	// PreFilterExtensions returns nil if the plugin has none.
	PreFilterExtensions() PreFilterExtensions
}

// FilterPlugin excludes nodes that cannot run the pod. It runs in parallel
// over nodes, with one shared CycleState.
type FilterPlugin interface {
	Plugin
	// Filter returns Success, Unschedulable, UnschedulableAndUnresolvable
	// or Error. Use nodeInfo, not the snapshot, for the node's state: it
	// may be a modified copy (nominated pods added, victims removed). On
	// ctx cancellation return UnschedulableAndUnresolvable quickly.
	Filter(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
}

// PostFilterPlugin runs when no node passed Filter (e.g. preemption).
type PostFilterPlugin interface {
	Plugin
	// PostFilter returns Success (the pod can be made schedulable, with an
	// optional nomination), Unschedulable, UnschedulableAndUnresolvable
	// (stop trying other PostFilter plugins) or Error.
	PostFilter(ctx context.Context, state *CycleState, pod *v1.Pod, filteredNodeStatusMap NodeToStatusReader) (*PostFilterResult, *Status)
}

// PreScorePlugin runs once per cycle with the feasible nodes before Score.
type PreScorePlugin interface {
	Plugin
	// PreScore returns Skip to skip this plugin's Score this cycle.
	PreScore(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status
}

// ScoreExtensions holds NormalizeScore.
type ScoreExtensions interface {
	// NormalizeScore rewrites scores in place to the 0..100 range.
	NormalizeScore(ctx context.Context, state *CycleState, p *v1.Pod, scores NodeScoreList) *Status
}

// ScorePlugin ranks feasible nodes. Score runs in parallel over nodes.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, p *v1.Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions returns nil if the plugin has none.
	ScoreExtensions() ScoreExtensions
}

// ReservePlugin keeps plugin state in step with the scheduler cache once a
// node is chosen. Unreserve must be idempotent and may be called without a
// prior Reserve.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string)
}

// PreBindPlugin does work before the pod is bound (e.g. provisioning volumes).
type PreBindPlugin interface {
	Plugin
	// PreBindPreFlight is a cheap check: Success if PreBind has work for
	// this pod, Skip if not, Error on failure.
	PreBindPreFlight(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string) (*PreBindPreFlightResult, *Status)
	PreBind(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string) *Status
}

// PostBindPlugin is told that a pod was bound; informational only.
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string)
}

// PermitPlugin approves, rejects or holds a pod before binding.
type PermitPlugin interface {
	Plugin
	// Permit returns Success, a rejection, or Wait with a timeout. The
	// timeout is clamped to MaxPermitTimeout unless the plugin implements
	// PermitTimeoutExtension.
	Permit(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string) (*Status, time.Duration)
}

// GangPermitPlugin is a Permit plugin that lets pods through only together
// with the rest of their group (a gang): it holds each member and, once
// enough of the group can go, allows them in one step with
// Handle.AllowWaitingPodsTogether. Another Permit plugin may hold a member
// too, and the gang must not go while it does, or that plugin's rejection
// would come after its siblings were bound. So the framework tells the
// plugin how its members' holds change, and the plugin counts a member only
// once it alone holds it.
//
// A profile runs at most one: two would each wait for the other.
type GangPermitPlugin interface {
	PermitPlugin
	// HoldChanged is called for a pod the plugin holds at Permit: once in
	// RunPermitPlugins, as soon as the pod waits (before its Permit timers
	// start and before waiting-pod observers hear of it), and again every
	// time another plugin allows it. It runs on the caller's goroutine (the
	// scheduling cycle, or whoever called Allow, possibly holding its own
	// locks, possibly from within IterateOverWaitingPods). The framework
	// holds none of its locks while it calls, nor while it runs
	// IterateOverWaitingPods' callbacks, so HoldChanged may take its
	// plugin's lock and use the Handle's waiting-pod methods; it must not
	// call back into other plugins. If it lets the pod go in
	// RunPermitPlugins, RunPermitPlugins returns Success and the pod is
	// never seen waiting, as if Permit had returned Success, whatever the
	// Permit timeouts (zero included).
	HoldChanged(ctx context.Context, wp WaitingPod)
}

// WaitStartedPermitPlugin is a Permit plugin that acts on a pod it holds
// only once the pod is waiting, such as one that allows the pod when its
// own window ends: a timer armed in Permit could end before the waiting pod
// exists (the later Permit plugins and the gang plugin run in between), and
// its Allow would find nothing to allow.
type WaitStartedPermitPlugin interface {
	PermitPlugin
	// WaitStarted is called once in RunPermitPlugins for a pod the plugin
	// asked to hold, once the pod waits and its Permit timers run, before
	// waiting-pod observers hear of it; not when the pod did not wait. It
	// runs on the scheduling cycle with no lock of the framework held.
	WaitStarted(ctx context.Context, wp WaitingPod)
}

// MaxPermitTimeout is the longest a Permit plugin may hold a pod (upstream's maxTimeout).
const MaxPermitTimeout = 15 * time.Minute

// PermitTimeoutExtension is implemented by Permit plugins that need a longer
// approval window than MaxPermitTimeout, such as one waiting for a person.
type PermitTimeoutExtension interface {
	// MaxPermitTimeout is the largest Wait timeout honoured for this plugin.
	MaxPermitTimeout() time.Duration
}

// WaitingPodObserver is told when pods start and stop waiting at Permit, so
// that they can be shown to people. It is called on the scheduling and
// binding goroutines: implementations must return at once and never call the
// API server inline.
type WaitingPodObserver interface {
	// PodWaiting is called once a pod is held at Permit.
	PodWaiting(profile string, wp WaitingPod)
	// PodWaitChanged is called while a pod is held when what holds it
	// changed: a plugin allowed it while others still hold it, or a
	// plugin updated its message (WaitingPod.SetPendingMessage).
	PodWaitChanged(profile string, wp WaitingPod)
	// PodResolved is called once the wait is over, with how it ended and
	// its status (Success when every plugin allowed the pod, otherwise the
	// rejection).
	PodResolved(profile string, pod *v1.Pod, resolution PermitResolution, status *Status)
}

// PermitResolution is how a wait at Permit ended, so that observers need
// not read it from a status message.
type PermitResolution int

const (
	// PermitAllowed: every pending plugin allowed the pod.
	PermitAllowed PermitResolution = iota
	// PermitRejected: a plugin, a person's decision or the scheduler
	// (pod deleted, profile removed) rejected the pod.
	PermitRejected
	// PermitTimedOut: a pending plugin's wait reached its deadline.
	PermitTimedOut
	// PermitPreempted: the wait was stopped without rejecting the pod
	// (the binding cycle's context ended), so it is retried as after an
	// error.
	PermitPreempted
)

func (r PermitResolution) String() string {
	switch r {
	case PermitAllowed:
		return "Allowed"
	case PermitRejected:
		return "Rejected"
	case PermitTimedOut:
		return "TimedOut"
	case PermitPreempted:
		return "Preempted"
	}
	return fmt.Sprintf("PermitResolution(%d)", int(r))
}

// BindPlugin binds a pod to a node. Plugins run in order until one does not return Skip.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, p *v1.Pod, nodeName string) *Status
}

// WaitingPod is a pod held at Permit.
// All methods are safe for concurrent use.
type WaitingPod interface {
	// GetPod returns the pod.
	GetPod() *v1.Pod
	// GetNodeName returns the node the pod was reserved on.
	GetNodeName() string
	// GetPendingPlugins returns the Permit plugins that have not allowed the pod yet, sorted.
	GetPendingPlugins() []string
	// HeldBy reports whether pluginName still holds the pod (it is not
	// resolved and pluginName has not allowed it) and whether it alone
	// does. Unlike GetPendingPlugins it does not allocate: gang plugins
	// ask it of every member on the scheduling cycle.
	HeldBy(pluginName string) (held, alone bool)
	// GetPendingPluginDeadlines returns, per pending plugin, when its wait times out.
	GetPendingPluginDeadlines() map[string]time.Time
	// GetPendingPluginMessages returns, per pending plugin that said one,
	// what it waits for: the message of its Wait status, or the latest
	// SetPendingMessage.
	GetPendingPluginMessages() map[string]string
	// SetPendingMessage replaces what pluginName says it waits for, to be
	// shown to people. A no-op once the pod was resolved or when
	// pluginName does not hold it.
	SetPendingMessage(pluginName, msg string)
	// Allow records that pluginName allows the pod; the pod proceeds once
	// no plugin is pending. A no-op once the pod was rejected.
	Allow(pluginName string)
	// Reject fails the pod as Unschedulable. It returns false if the pod
	// was already allowed or rejected.
	Reject(pluginName, msg string) bool
	// Preempt fails the pod with Error so it is retried without being marked
	// unschedulable. It returns false if the pod was already resolved.
	Preempt(pluginName, msg string) bool
}

// PodInPreBind is a pod whose binding cycle runs PreBind plugins with
// work for it and has not sent its binding yet. Preemption cancels such a
// victim in memory instead of deleting it, as kube-scheduler does.
// All methods are safe for concurrent use.
type PodInPreBind interface {
	// CancelPod ends the context PreBind runs under, with reason as its
	// cause, unless the pod was marked prebound. It reports whether the
	// binding cycle is (now or already) cancelled: then it will not bind.
	CancelPod(reason string) bool
	// MarkPrebound, called by the binding cycle once PreBind is over,
	// makes CancelPod fail from then on. It returns false if the pod was
	// cancelled first: then the binding cycle must not bind.
	MarkPrebound() bool
	// Done is closed when the pod leaves the binding cycle: bound, or,
	// after a failure, once Unreserve ran and the scheduler cache gave its
	// room back, before the pod is requeued.
	Done() <-chan struct{}
}

// Parallelizer runs work pieces on a bounded number of goroutines.
type Parallelizer interface {
	// Until calls doWorkPiece(i) for i in [0, pieces) in parallel and
	// returns when all are done or ctx is cancelled. operation names the
	// work for diagnostics.
	Until(ctx context.Context, pieces int, doWorkPiece func(piece int), operation string)
}

// PodNominator tracks pods nominated to nodes (by preemption) so that
// filters account for them. The scheduling queue implements it.
type PodNominator interface {
	AddNominatedPod(logger klog.Logger, pod *PodInfo, nominatingInfo *NominatingInfo)
	DeleteNominatedPodIfExists(pod *v1.Pod)
	UpdateNominatedPod(logger klog.Logger, oldPod *v1.Pod, newPodInfo *PodInfo)
	NominatedPodsForNode(nodeName string) []*PodInfo
}

// PodActivator moves pods to the active queue. The scheduling queue implements it.
type PodActivator interface {
	Activate(logger klog.Logger, pods map[string]*v1.Pod)
}

// PluginsRunner runs configured plugins; preemption uses it to re-evaluate
// nodes with victims removed.
type PluginsRunner interface {
	RunPreScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status
	RunScorePlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) ([]NodePluginScores, *Status)
	RunFilterPlugins(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToRemove *PodInfo, nodeInfo *NodeInfo) *Status
	RunReservePluginsReserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	RunReservePluginsUnreserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}
