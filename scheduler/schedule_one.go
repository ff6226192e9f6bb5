package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	internalcache "github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// ErrNoNodesAvailable is the error of a cycle in a cluster without nodes.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// maxEventNoteLength is the longest note the events API accepts.
const maxEventNoteLength = 1024

// clearNominatedNode is the nominating info of a failure that voids any
// nomination the pod had.
var clearNominatedNode = &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: ""}

// ScheduleResult is the outcome of a successful scheduling cycle.
type ScheduleResult struct {
	// SuggestedHost is the node the pod goes to.
	SuggestedHost string
	// EvaluatedNodes is how many nodes were filtered.
	EvaluatedNodes int
	// FeasibleNodes is how many of them passed.
	FeasibleNodes int
	// nominatingInfo is set by PostFilter when the cycle failed.
	nominatingInfo *framework.NominatingInfo
}

// scheduleOne schedules the next entity the queue pops: a pod, or a pod
// group (scheduleOnePodGroup). It returns false once the queue is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	entity, err := s.queue.Pop(logger)
	if err != nil {
		if errors.Is(err, queue.ErrClosed) {
			return false
		}
		logger.Error(err, "Taking the next pod from the queue")
		return true
	}
	switch e := entity.(type) {
	case *framework.QueuedPodGroupInfo:
		s.scheduleOnePodGroup(ctx, e)
	case *framework.QueuedPodInfo:
		s.scheduleOnePod(ctx, e)
	default:
		logger.Error(nil, "Unexpected entity", "type", fmt.Sprintf("%T", entity))
	}
	return true
}

// scheduleOnePod schedules one pod. The pod's profile instance is held
// from here until its binding cycle ends, so a newly published instance
// never changes an attempt midway and the old one is closed only when no
// attempt uses it.
func (s *Scheduler) scheduleOnePod(ctx context.Context, podInfo *framework.QueuedPodInfo) {
	logger := klog.FromContext(ctx)
	pod := podInfo.Pod
	s.progress.begin(pod)
	defer s.progress.end()
	ref, ok := s.profiles.Acquire(pod.Spec.SchedulerName)
	if !ok {
		// The profile went away after the pod was queued; its pods
		// return with it.
		s.queue.Done(pod.UID)
		return
	}
	fwk := ref.Framework()
	logger = klog.LoggerWithValues(logger, "pod", klog.KObj(pod), "profile", fwk.ProfileName())
	ctx = klog.NewContext(ctx, logger)
	if s.skipPodSchedule(ctx, fwk, pod) {
		s.queue.Done(pod.UID)
		ref.Release()
		return
	}
	logger.V(3).Info("Attempting to schedule pod")

	start := time.Now()
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(runtime.ShouldSamplePluginMetrics())
	podsToActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, podsToActivate)

	cycleCtx, cancel := context.WithCancel(ctx)
	result, assumedPodInfo, status := s.schedulingCycle(cycleCtx, state, fwk, podInfo, podsToActivate)
	cancel()
	if !status.IsSuccess() {
		s.handleSchedulingFailure(ctx, fwk, assumedPodInfo, status, result.nominatingInfo, start)
		ref.Release()
		return
	}
	s.runBindingCycle(ctx, ref, state, result, assumedPodInfo, start, podsToActivate)
}

// runBindingCycle binds an assumed pod on its own goroutine, holding ref,
// which it releases when the binding cycle ends.
func (s *Scheduler) runBindingCycle(ctx context.Context, ref profiles.Ref, state *framework.CycleState, result ScheduleResult, assumedPodInfo *framework.QueuedPodInfo, start time.Time, podsToActivate *framework.PodsToActivate) {
	fwk := ref.Framework()
	s.bindings.Add(1)
	go func() {
		defer s.bindings.Done()
		defer ref.Release()
		status := s.bindingCycle(ctx, state, fwk, result, assumedPodInfo, start, podsToActivate)
		if !status.IsSuccess() {
			s.handleBindingCycleError(ctx, state, fwk, assumedPodInfo, start, result, status)
			return
		}
		fwk.RemovePodInPreBind(assumedPodInfo.Pod.UID)
		s.queue.Done(assumedPodInfo.Pod.UID)
	}()
}

// skipPodSchedule reports whether pod must not be scheduled now: it is
// being deleted, or it is already assumed (an update requeued it while its
// binding runs).
func (s *Scheduler) skipPodSchedule(ctx context.Context, fwk framework.Framework, pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		s.recorder(fwk).Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", "skip schedule deleting pod: %v/%v", pod.Namespace, pod.Name)
		klog.FromContext(ctx).V(3).Info("Skip schedule deleting pod")
		return true
	}
	if s.cache.IsAssumedPod(pod) {
		klog.FromContext(ctx).V(3).Info("Skip schedule pod that is already assumed")
		return true
	}
	return false
}

// schedulingCycle finds a node on an up-to-date snapshot, assumes the pod
// there and runs Reserve and Permit. It makes no API call. On failure it
// returns the pod info to requeue and the status; Reserve and the
// assumption are undone.
func (s *Scheduler) schedulingCycle(ctx context.Context, state *framework.CycleState, fwk framework.Framework, podInfo *framework.QueuedPodInfo, podsToActivate *framework.PodsToActivate) (ScheduleResult, *framework.QueuedPodInfo, *framework.Status) {
	if err := s.cache.UpdateSnapshot(klog.FromContext(ctx), s.picker.snapshot); err != nil {
		return ScheduleResult{nominatingInfo: clearNominatedNode}, podInfo, framework.AsStatus(err)
	}
	result, status := s.schedulingAlgorithm(ctx, state, fwk, podInfo)
	if !status.IsSuccess() {
		return result, podInfo, status
	}
	assumedPodInfo, status := s.prepareForBindingCycle(ctx, state, fwk, podInfo, podsToActivate, result)
	if !status.IsSuccess() {
		return ScheduleResult{nominatingInfo: clearNominatedNode}, assumedPodInfo, status
	}
	return result, assumedPodInfo, nil
}

// schedulingAlgorithm runs Filter and Score for one pod, then PostFilter
// when no node fits, except in a pod-group cycle, which runs
// PodGroupPostFilter for the whole group instead.
func (s *Scheduler) schedulingAlgorithm(ctx context.Context, state *framework.CycleState, fwk framework.Framework, podInfo *framework.QueuedPodInfo) (ScheduleResult, *framework.Status) {
	logger := klog.FromContext(ctx)
	pod := podInfo.Pod
	result, err := s.schedulePod(ctx, fwk, state, pod)
	if err == nil {
		return result, nil
	}
	if errors.Is(err, ErrNoNodesAvailable) {
		return ScheduleResult{nominatingInfo: clearNominatedNode}, framework.NewStatus(framework.UnschedulableAndUnresolvable).WithError(err)
	}
	var fitErr *framework.FitError
	if !errors.As(err, &fitErr) {
		return ScheduleResult{nominatingInfo: clearNominatedNode}, framework.AsStatus(err)
	}
	if state.IsPodGroupSchedulingCycle() {
		// No nomination yet: PodGroupPostFilter may give one, and
		// submitPodGroupAlgorithmResult decides, as upstream.
		return ScheduleResult{}, framework.NewStatus(framework.Unschedulable).WithError(err)
	}
	if !fwk.HasPostFilterPlugins() {
		return ScheduleResult{nominatingInfo: clearNominatedNode}, framework.NewStatus(framework.Unschedulable).WithError(err)
	}
	// PostFilter (preemption) may make room for a later attempt.
	postResult, postStatus := fwk.RunPostFilterPlugins(ctx, state, pod, fitErr.Diagnosis.NodeToStatus)
	fitErr.Diagnosis.PostFilterMsg = postStatus.Message()
	if postStatus.Code() == framework.Error {
		logger.Error(nil, "Status after running PostFilter plugins for pod", "status", postStatus.Message())
	} else {
		logger.V(5).Info("Status after running PostFilter plugins for pod", "status", postStatus.Message())
	}
	var ni *framework.NominatingInfo
	if postResult != nil {
		ni = postResult.NominatingInfo
	}
	return ScheduleResult{nominatingInfo: ni}, framework.NewStatus(framework.Unschedulable).WithError(err)
}

// prepareForBindingCycle assumes the pod on its node, runs Reserve and
// Permit, and activates the pods plugins asked for.
func (s *Scheduler) prepareForBindingCycle(ctx context.Context, state *framework.CycleState, fwk framework.Framework, podInfo *framework.QueuedPodInfo, podsToActivate *framework.PodsToActivate, result ScheduleResult) (*framework.QueuedPodInfo, *framework.Status) {
	assumedPodInfo, status := s.assumeAndReserve(ctx, state, fwk, podInfo, result)
	if !status.IsSuccess() {
		return assumedPodInfo, status
	}
	assumedPod := assumedPodInfo.Pod
	permit := fwk.RunPermitPlugins(ctx, state, assumedPod, result.SuggestedHost)
	if !permit.IsWait() && !permit.IsSuccess() {
		if err := s.unreserveAndForget(ctx, state, fwk, assumedPodInfo, result.SuggestedHost); err != nil {
			klog.FromContext(ctx).Error(err, "Forgetting the assumed pod after Permit failed")
		}
		return assumedPodInfo, rejectionOnNode(podInfo.Pod, result.SuggestedHost, permit)
	}
	if m := podsToActivate.Take(); len(m) != 0 {
		s.queue.Activate(klog.FromContext(ctx), m)
	}
	return assumedPodInfo, nil
}

// assumeAndReserve counts the pod on its node now, so the next cycle sees
// the room it takes before the binding is even sent, and runs Reserve. In
// a pod-group cycle the pod is assumed in the snapshot only, for the
// group's later pods (see Snapshot.AssumePod).
func (s *Scheduler) assumeAndReserve(ctx context.Context, state *framework.CycleState, fwk framework.Framework, podInfo *framework.QueuedPodInfo, result ScheduleResult) (*framework.QueuedPodInfo, *framework.Status) {
	logger := klog.FromContext(ctx)
	assumedPodInfo := podInfo.DeepCopy()
	assumedPod := assumedPodInfo.Pod
	assumedPod.Spec.NodeName = result.SuggestedHost
	var err error
	if state.IsPodGroupSchedulingCycle() {
		err = s.picker.snapshot.AssumePod(assumedPodInfo.PodInfo)
	} else {
		err = s.cache.AssumePod(logger, assumedPodInfo.PodInfo)
	}
	if err != nil {
		return assumedPodInfo, framework.AsStatus(err)
	}
	s.queue.DeleteNominatedPodIfExists(assumedPod)

	if sts := fwk.RunReservePluginsReserve(ctx, state, assumedPod, result.SuggestedHost); !sts.IsSuccess() {
		if err := s.unreserveAndForget(ctx, state, fwk, assumedPodInfo, result.SuggestedHost); err != nil {
			logger.Error(err, "Forgetting the assumed pod after Reserve failed")
		}
		return assumedPodInfo, rejectionOnNode(podInfo.Pod, result.SuggestedHost, sts)
	}
	return assumedPodInfo, nil
}

// unreserveAndForget runs Unreserve and forgets the assumed pod, in the
// snapshot during a pod-group cycle, where the pod's nomination, which
// assuming it dropped, is given back.
func (s *Scheduler) unreserveAndForget(ctx context.Context, state *framework.CycleState, fwk framework.Framework, assumedPodInfo *framework.QueuedPodInfo, nodeName string) error {
	logger := klog.FromContext(ctx)
	fwk.RunReservePluginsUnreserve(ctx, state, assumedPodInfo.Pod, nodeName)
	if !state.IsPodGroupSchedulingCycle() {
		return s.cache.ForgetPod(logger, assumedPodInfo.Pod)
	}
	if err := s.picker.snapshot.ForgetPod(logger, assumedPodInfo.Pod); err != nil {
		return err
	}
	if nnn := assumedPodInfo.Pod.Status.NominatedNodeName; nnn != "" {
		s.queue.AddNominatedPod(logger, assumedPodInfo.PodInfo, &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: nnn})
	}
	return nil
}

// rejectionOnNode turns a rejection on the chosen node (Reserve, Permit)
// into a FitError over that one node, so the pod is requeued by the
// rejecting plugin's events; other failures pass through.
func rejectionOnNode(pod *v1.Pod, nodeName string, sts *framework.Status) *framework.Status {
	if !sts.IsRejected() {
		return sts
	}
	fitErr := &framework.FitError{
		NumAllNodes: 1,
		Pod:         pod,
		Diagnosis:   framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()},
	}
	fitErr.Diagnosis.NodeToStatus.Set(nodeName, sts)
	fitErr.Diagnosis.AddPluginStatus(sts)
	return framework.NewStatus(sts.Code()).WithError(fitErr)
}

// schedulePod picks a node for pod on the snapshot, which the caller
// updated, within the placement the pod-group cycle assumed. With
// opportunistic batching (upstream's, see runtime.opportunisticBatch) the
// pod is signed with the serving instance and its results are stored for
// the next pod with the same signature, where upstream stores them.
func (s *Scheduler) schedulePod(ctx context.Context, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod) (ScheduleResult, error) {
	// Upstream signs a pod when it is queued; signing here, with the
	// instance that serves this cycle, gives the same signature and never
	// compares one instance's signature with another's when a profile is
	// replaced while its pods wait.
	b := &cycleBatch{signature: fwk.SignPod(ctx, pod), cycle: s.queue.SchedulingCycle()}
	// Only a signed pod's results are kept for the next pod, raw scores
	// included.
	state.SetKeepRawScores(b.signature != nil)
	c, err := s.picker.findCandidates(ctx, fwk, state, pod, b)
	if err != nil {
		return ScheduleResult{}, err
	}
	host, rest := c.selectHost()
	fwk.StoreScheduleResults(ctx, b.signature, b.hint, host, rest, b.cycle)
	return ScheduleResult{SuggestedHost: host, EvaluatedNodes: c.evaluated, FeasibleNodes: len(c.feasible)}, nil
}

// nodePicker runs the node-selection part of a scheduling cycle (PreFilter,
// Filter, the extenders' filters, PreScore, Score and NormalizeScore) on
// one snapshot, which its owner keeps up to date. The loop has one; each
// shadow has its own, so that a shadow never touches the loop's snapshot.
// Only the owner's goroutine, and the Filter and Score workers of the
// cycle it runs, use it.
type nodePicker struct {
	snapshot *internalcache.Snapshot
	// nextStartNodeIndex is where the next search for feasible nodes
	// starts, where the previous one stopped, as upstream.
	nextStartNodeIndex int
	// wantsAllBest keeps the search going past the first feasible node
	// when nothing scores nodes: a shadow compares the serving node with
	// every node it finds as good as any, where the loop, as upstream,
	// takes the first one found.
	wantsAllBest bool
}

// cycleBatch is the loop's part of opportunistic batching in a cycle: the
// pod's signature and queue cycle, and the hint the batch gave. Shadows
// pick nodes without one, so that they neither read nor store batch
// results.
type cycleBatch struct {
	signature framework.PodSignature
	cycle     int64
	// hint is set by findNodesThatFitPod after PreFilter.
	hint string
}

// candidates are the nodes a cycle found for a pod.
type candidates struct {
	// feasible passed every filter.
	feasible []*framework.NodeInfo
	// scores are the feasible nodes' scores; nil when there is a single
	// feasible node. Without Score plugins and prioritizing extenders,
	// every node scores 1.
	scores []framework.NodePluginScores
	// evaluated is how many nodes were filtered.
	evaluated int
}

// selectHost picks the node the pod goes to, popped from upstream's
// SortedScoredNodes (the highest total score; among equal ones, the
// larger Randomizer, which only extenders' scores set), and returns the
// other feasible nodes in that order, nil when there are none.
func (c candidates) selectHost() (string, *framework.SortedScoredNodes) {
	if c.scores == nil {
		return c.feasible[0].Node().Name, nil
	}
	sorted := framework.NewSortedScoredNodes(c.scores)
	return sorted.Pop().Name, sorted
}

// findCandidates finds the feasible nodes for pod on the picker's snapshot
// and scores them; it returns a *framework.FitError when none is feasible.
// b is the loop's batching state of the cycle, nil for a shadow.
func (p *nodePicker) findCandidates(ctx context.Context, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, b *cycleBatch) (candidates, error) {
	if p.snapshot.NumNodesInPlacement() == 0 {
		return candidates{}, ErrNoNodesAvailable
	}
	feasible, diagnosis, err := p.findNodesThatFitPod(ctx, fwk, state, pod, b)
	if err != nil {
		return candidates{}, err
	}
	if len(feasible) == 0 {
		return candidates{}, &framework.FitError{Pod: pod, NumAllNodes: p.snapshot.NumNodesInPlacement(), Diagnosis: diagnosis}
	}
	c := candidates{feasible: feasible, evaluated: len(feasible) + diagnosis.NodeToStatus.Len()}
	if len(feasible) == 1 {
		return c, nil
	}
	if c.scores, err = prioritizeNodes(ctx, fwk, state, pod, feasible); err != nil {
		return candidates{}, err
	}
	return c, nil
}

// findNodesThatFitPod runs PreFilter once and Filter over the nodes. A
// pod's nominated node, else the batch's hint (asked for only when b is
// not nil, and recorded in it), is tried alone first; if it passes, the
// search (and the move of the next cycle's start) is skipped, as upstream.
func (p *nodePicker) findNodesThatFitPod(ctx context.Context, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, b *cycleBatch) ([]*framework.NodeInfo, framework.Diagnosis, error) {
	logger := klog.FromContext(ctx)
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	allNodes, err := p.snapshot.ListNodesInPlacement()
	if err != nil {
		return nil, diagnosis, err
	}
	preRes, st, narrowing := fwk.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = narrowing
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, diagnosis, st.AsError()
		}
		// Every node gets the same status so that preemption sees them all.
		diagnosis.NodeToStatus.SetAbsentNodesStatus(st)
		diagnosis.PreFilterMsg = st.Message()
		logger.V(5).Info("Status after running PreFilter plugins for pod", "status", st.Message())
		diagnosis.AddPluginStatus(st)
		return nil, diagnosis, nil
	}

	var hint string
	if b != nil {
		// Asked even for a nominated pod, as upstream: the batch then
		// counts the pod as a reason its results were not used.
		hint = fwk.GetNodeHint(ctx, pod, b.signature, state, b.cycle)
		b.hint = hint
	}
	// A nominated node was likely freed by preemption for this very pod,
	// and a hint is the best node of the previous identical pod's search:
	// try it alone first.
	if nnn := pod.Status.NominatedNodeName; nnn != "" || hint != "" {
		if nnn == "" {
			nnn = hint
		}
		feasible, err := p.evaluateNominatedNode(ctx, fwk, state, pod, nnn, &diagnosis)
		if err != nil {
			logger.Error(err, "Evaluation failed on nominated node", "node", nnn)
		}
		if len(feasible) != 0 {
			return feasible, diagnosis, nil
		}
	}

	nodes := allNodes
	if !preRes.AllNodes() {
		nodes = make([]*framework.NodeInfo, 0, len(preRes.NodeNames))
		for name := range preRes.NodeNames {
			// A PreFilter result may name nodes that do not exist, or
			// that are outside the placement tried.
			if ni, err := p.snapshot.GetNodeInPlacement(name); err == nil {
				nodes = append(nodes, ni)
			}
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(narrowing))))
	}
	numToFind := int(fwk.NumFeasibleNodesToFind(int32(len(nodes))))
	if !p.wantsAllBest && !scoresOrFiltersWithExtenders(fwk) {
		// Every feasible node would score the same: the first one found is
		// as good as any, as upstream.
		numToFind = 1
	}
	feasible, err := fwk.FindNodesThatPassFilters(ctx, state, pod, &diagnosis, nodes, p.nextStartNodeIndex, numToFind)
	// Move the start even on error, so every node gets its turn. As
	// upstream, by the feasible nodes and every node with a status: those
	// the search rejected and a hinted or nominated node rejected above.
	p.nextStartNodeIndex = (p.nextStartNodeIndex + len(feasible) + diagnosis.NodeToStatus.Len()) % len(allNodes)
	if err != nil {
		return nil, diagnosis, err
	}
	passed, err := extender.FindNodesThatPass(ctx, fwk.Extenders(), pod, feasible, diagnosis.NodeToStatus)
	if err != nil {
		return nil, diagnosis, err
	}
	if len(passed) != len(feasible) {
		// Extenders register no events, so upstream names them with a
		// pseudo plugin that any cluster event requeues.
		if diagnosis.UnschedulablePlugins == nil {
			diagnosis.UnschedulablePlugins = sets.New[string]()
		}
		diagnosis.UnschedulablePlugins.Insert(extender.Name)
	}
	return passed, diagnosis, nil
}

// evaluateNominatedNode runs the filters on nodeName alone. A node of the
// cluster outside the placement a pod-group cycle tries is no error: the
// pod is then searched for in the placement, as upstream.
func (p *nodePicker) evaluateNominatedNode(ctx context.Context, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, nodeName string, diagnosis *framework.Diagnosis) ([]*framework.NodeInfo, error) {
	ni, err := p.snapshot.GetNodeInPlacement(nodeName)
	if err != nil {
		if _, err := p.snapshot.Get(nodeName); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).V(4).Info("Pod's nominated node is present in the cluster but not available in the current placement", "node", nodeName)
		return nil, nil
	}
	feasible, err := fwk.FindNodesThatPassFilters(ctx, state, pod, diagnosis, []*framework.NodeInfo{ni}, 0, 1)
	if err != nil {
		return nil, err
	}
	return extender.FindNodesThatPass(ctx, fwk.Extenders(), pod, feasible, diagnosis.NodeToStatus)
}

// scoresOrFiltersWithExtenders reports whether fwk scores nodes (plugins or
// extenders) or has filtering extenders, upstream's hasScoring ||
// hasExtenderFilters.
func scoresOrFiltersWithExtenders(fwk framework.Framework) bool {
	if fwk.HasScorePlugins() {
		return true
	}
	for _, e := range fwk.Extenders() {
		if e.IsPrioritizer() || e.IsFilter() {
			return true
		}
	}
	return false
}

// prioritizeNodes scores the feasible nodes with the Score plugins and
// the extenders. Without either, every node scores 1, as upstream.
func prioritizeNodes(ctx context.Context, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, feasible []*framework.NodeInfo) ([]framework.NodePluginScores, error) {
	exts := fwk.Extenders()
	if len(exts) == 0 && !fwk.HasScorePlugins() {
		scores := make([]framework.NodePluginScores, len(feasible))
		for i, ni := range feasible {
			scores[i] = framework.NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return scores, nil
	}
	if st := fwk.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return nil, st.AsError()
	}
	scores, st := fwk.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	if klogV := klog.FromContext(ctx).V(10); klogV.Enabled() {
		for _, ns := range scores {
			klogV.Info("Plugin scored node for pod", "node", ns.Name, "score", ns.TotalScore, "plugins", ns.Scores)
		}
	}
	if len(exts) != 0 {
		extender.AddScores(ctx, exts, pod, feasible, scores)
	}
	return scores, nil
}

// bindingCycle waits for Permit and binds; it runs on its own goroutine.
// A wait at Permit ends when ctx does (the pod is then retried); PreBind,
// Bind and PostBind run to completion even during shutdown, so a binding
// request already sent is never abandoned halfway. The one thing that
// stops PreBind is preemption of the pod (Handle.GetPodInPreBind), before
// its binding is sent.
func (s *Scheduler) bindingCycle(ctx context.Context, state *framework.CycleState, fwk framework.Framework, result ScheduleResult, assumedPodInfo *framework.QueuedPodInfo, start time.Time, podsToActivate *framework.PodsToActivate) *framework.Status {
	logger := klog.FromContext(ctx)
	assumedPod := assumedPodInfo.Pod
	host := result.SuggestedHost

	// As upstream under NominatedNodeNameForExpectation (beta, on by
	// default): when the pod will wait at Permit or a PreBind plugin has
	// work for it, its status names the node it is about to bind to, so
	// that other components (a cluster autoscaler) count it there.
	preFlight := fwk.RunPreBindPreFlights(context.WithoutCancel(ctx), state, assumedPod, host)
	if preFlight.Code() == framework.Error || preFlight.IsRejected() {
		// Fails at once, as upstream's does; a pod about to wait at
		// Permit is let go first (upstream leaves it registered as
		// waiting, which here would leave its WaitingPod behind).
		if wp := fwk.GetWaitingPod(assumedPod.UID); wp != nil {
			wp.Reject(preFlight.Plugin(), preFlight.Message())
			fwk.WaitOnPermit(ctx, assumedPod)
		}
		return preFlight
	}
	if preFlight.IsSuccess() || fwk.WillWaitOnPermit(ctx, assumedPod) {
		s.status.update(assumedPod, nil, &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: host})
	}

	s.releaseIfHeldOtherWay(logger, fwk, assumedPod)
	if st := fwk.WaitOnPermit(ctx, assumedPod); !st.IsSuccess() {
		if st.IsRejected() {
			fitErr := &framework.FitError{
				NumAllNodes: 1,
				Pod:         assumedPod,
				Diagnosis: framework.Diagnosis{
					NodeToStatus:         framework.NewDefaultNodeToStatus(),
					UnschedulablePlugins: sets.New[string](),
				},
			}
			if st.Plugin() != "" {
				fitErr.Diagnosis.UnschedulablePlugins.Insert(st.Plugin())
			}
			fitErr.Diagnosis.NodeToStatus.Set(host, st)
			return framework.NewStatus(st.Code()).WithError(fitErr)
		}
		return st
	}
	// From here on a failure is never "unschedulable": the pod goes to
	// backoff, so events need no longer be recorded for it.
	s.queue.Done(assumedPod.UID)

	bindCtx := context.WithoutCancel(ctx)
	if preFlight.IsSuccess() {
		// A PreBind plugin has work for the pod (it may wait for volumes a
		// long time): preemption may then cancel the pod in memory rather
		// than delete it, as upstream does under
		// NominatedNodeNameForExpectation (beta, on by default). Only
		// preemption cancels this context; shutdown still does not.
		// The pod stays registered until it leaves the binding cycle
		// (see scheduleOne and handleBindingCycleError), so that a
		// preemptor that cancelled it can wait for its room.
		var cancel context.CancelCauseFunc
		bindCtx, cancel = context.WithCancelCause(bindCtx)
		defer cancel(nil)
		fwk.AddPodInPreBind(assumedPod.UID, cancel)
	}
	if st := fwk.RunPreBindPlugins(bindCtx, state, assumedPod, host); !st.IsSuccess() {
		return st
	}
	// A PreBind that ignores its context may finish after the pod was
	// preempted: it must not be bound then. Once marked, preemption can
	// no longer cancel it and deletes it through the API instead.
	if p := fwk.GetPodInPreBind(assumedPod.UID); p != nil && !p.MarkPrebound() {
		return framework.AsStatus(context.Cause(bindCtx))
	}
	if st := s.bind(bindCtx, fwk, state, assumedPod, host); !st.IsSuccess() {
		return st
	}
	logger.V(2).Info("Successfully bound pod to node", "node", host, "evaluatedNodes", result.EvaluatedNodes, "feasibleNodes", result.FeasibleNodes)
	s.observeAttempt(scheduledResult, fwk.ProfileName(), time.Since(start).Seconds())
	s.metrics.PodSchedulingAttempts.Observe(float64(assumedPodInfo.Attempts))
	if t := assumedPodInfo.InitialAttemptTimestamp; t != nil {
		s.metrics.PodSchedulingSLIDuration.WithLabelValues(attemptsLabel(assumedPodInfo.Attempts), fwk.ProfileName()).Observe(time.Since(*t).Seconds())
	}
	fwk.RunPostBindPlugins(bindCtx, state, assumedPod, host)
	if m := podsToActivate.Take(); len(m) != 0 {
		s.queue.Activate(logger, m)
	}
	return nil
}

// bind lets a binding extender interested in the pod bind it, else runs
// the Bind plugins (upstream's precedence), and tells the cache the
// binding call returned.
func (s *Scheduler) bind(ctx context.Context, fwk framework.Framework, state *framework.CycleState, assumed *v1.Pod, host string) *framework.Status {
	var st *framework.Status
	if bound, err := extender.Bind(ctx, fwk.Extenders(), assumed, host); bound {
		st = framework.AsStatus(err)
	} else {
		// Waiting for a slot holds nothing but the assumed pod: binding
		// calls in flight always finish and free theirs. A profile's bind
		// extender, bounded by its own timeout, takes none, so a slow one
		// does not hold up other profiles' bindings.
		s.bindSlots <- struct{}{}
		st = fwk.RunBindPlugins(ctx, state, assumed, host)
		<-s.bindSlots
	}
	if err := s.cache.FinishBinding(klog.FromContext(ctx), assumed); err != nil {
		klog.FromContext(ctx).Error(err, "Finishing the binding in the scheduler cache")
	}
	if !st.IsSuccess() {
		klog.FromContext(ctx).V(1).Info("Failed to bind pod", "node", host)
		return st
	}
	s.recorder(fwk).Eventf(assumed, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", assumed.Namespace, assumed.Name, host)
	return nil
}

// handleBindingCycleError undoes Reserve and the assumption, tells the
// queue that room was freed, and requeues the pod.
func (s *Scheduler) handleBindingCycleError(ctx context.Context, state *framework.CycleState, fwk framework.Framework, podInfo *framework.QueuedPodInfo, start time.Time, result ScheduleResult, st *framework.Status) {
	logger := klog.FromContext(ctx)
	assumedPod := podInfo.Pod
	fwk.RunReservePluginsUnreserve(context.WithoutCancel(ctx), state, assumedPod, result.SuggestedHost)
	if err := s.cache.ForgetPod(logger, assumedPod); err != nil {
		if s.cache.IsAssumedPod(assumedPod) {
			logger.Error(err, "Forgetting the assumed pod after its binding cycle failed")
		} else {
			// Deleted while its binding cycle ran (a PreBind waiting for
			// volumes, say): the deletion handler already gave its room back.
			logger.V(4).Info("Assumed pod was already released", "pod", klog.KObj(assumedPod))
		}
	} else if st.IsRejected() {
		// Not the pod itself: it was rejected, so only its plugins' events may requeue it.
		defer s.queue.MoveAllToActiveOrBackoffQueue(logger, queue.EventAssignedPodDelete, assumedPod, nil, func(p *v1.Pod) bool {
			return p.UID != assumedPod.UID
		})
	} else {
		s.queue.MoveAllToActiveOrBackoffQueue(logger, queue.EventAssignedPodDelete, assumedPod, nil, nil)
	}
	// Its room is given back: a preemptor that cancelled it in PreBind
	// may go (upstream lets it go when the cancel is sent, and it may then
	// find the pod still assumed and delete it through the API). Before
	// the requeue, so that no later binding cycle of the pod registers
	// before this one is forgotten.
	fwk.RemovePodInPreBind(assumedPod.UID)
	s.handleSchedulingFailure(ctx, fwk, podInfo, st, clearNominatedNode, start)
}

// handleSchedulingFailure requeues the pod (unless it was deleted, bound or
// recreated meanwhile), records the nomination, and reports the failure
// with a FailedScheduling event and the PodScheduled condition, both sent
// asynchronously.
func (s *Scheduler) handleSchedulingFailure(ctx context.Context, fwk framework.Framework, podInfo *framework.QueuedPodInfo, st *framework.Status, ni *framework.NominatingInfo, start time.Time) {
	logger := klog.FromContext(ctx)
	requeued := false
	defer func() {
		if !requeued {
			s.queue.Done(podInfo.Pod.UID)
		}
	}()

	reason := v1.PodReasonSchedulerError
	result := errorResult
	if st.IsRejected() {
		reason = v1.PodReasonUnschedulable
		result = unschedulableResult
	}
	s.observeAttempt(result, fwk.ProfileName(), time.Since(start).Seconds())

	pod := podInfo.Pod
	err := st.AsError()
	msg := st.Message()
	// The plugins of this failure replace those of earlier ones.
	podInfo.UnschedulablePlugins = sets.New[string]()
	podInfo.PendingPlugins = sets.New[string]()
	var fitErr *framework.FitError
	switch {
	case errors.Is(err, ErrNoNodesAvailable):
		logger.V(2).Info("Unable to schedule pod; no nodes are registered to the cluster; waiting")
	case errors.As(err, &fitErr):
		if fitErr.Diagnosis.UnschedulablePlugins != nil {
			podInfo.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins
		}
		if fitErr.Diagnosis.PendingPlugins != nil {
			podInfo.PendingPlugins = fitErr.Diagnosis.PendingPlugins
		}
		logger.V(2).Info("Unable to schedule pod; no fit; waiting", "err", msg)
	case errors.Is(err, errPodGroupUnschedulable):
		logger.V(2).Info("Unable to schedule pod belonging to a pod group; waiting", "err", msg)
	default:
		logger.Error(err, "Error scheduling pod; retrying")
	}

	pi := podInfo.PodInfo
	current, getErr := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	switch {
	case getErr != nil:
		logger.V(3).Info("Pod doesn't exist in informer cache", "err", getErr)
	case current.Spec.NodeName != "":
		logger.V(3).Info("Pod has been assigned to node. Abort adding it back to queue.", "node", current.Spec.NodeName)
	case current.UID != pod.UID:
		logger.V(2).Info("Pod was recreated while handling scheduling failure. Skip requeueing and status updates.", "newUID", current.UID)
		return
	default:
		// Requeue the informer's latest version. Informer objects are
		// shared and never modified by the queue, so no copy is needed.
		var perr error
		if pi, perr = framework.NewPodInfo(current); perr != nil {
			logger.V(4).Info("Parsing the pod's affinity terms", "err", perr)
		}
		podInfo.PodInfo = pi
		pod = current
		// podInfo belongs to the queue from here on; only pi is used below.
		if err := s.queue.AddUnschedulableIfNotPresent(logger, podInfo, s.queue.SchedulingCycle()); err != nil {
			logger.Error(err, "Requeueing the pod")
		}
		requeued = true
	}
	s.queue.AddNominatedPod(logger, pi, ni)
	if err == nil {
		return
	}
	s.recorder(fwk).Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", truncateMessage(msg))
	s.status.update(pod, &v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             reason,
		Message:            msg,
		ObservedGeneration: pod.Generation,
	}, ni)
}

// recorder is the instance's event recorder; instances not built by
// NewFramework may lack one.
func (s *Scheduler) recorder(fwk framework.Framework) events.EventRecorder {
	if r := fwk.EventRecorder(); r != nil {
		return r
	}
	return s.broadcaster.NewRecorder(scheme.Scheme, fwk.ProfileName())
}

// truncateMessage keeps an event note within the API's limit.
func truncateMessage(msg string) string {
	if len(msg) <= maxEventNoteLength {
		return msg
	}
	const suffix = " ..."
	return msg[:maxEventNoteLength-len(suffix)] + suffix
}
