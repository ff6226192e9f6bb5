package runtime

import (
	"bytes"
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// maxBatchAge is how long a cycle's results may be reused, as upstream: it
// bounds both long runs of compatible pods and long waits between them.
const maxBatchAge = 500 * time.Millisecond

// opportunisticBatch is upstream's OpportunisticBatch (kube-scheduler
// 1.37, framework/runtime/batch.go): after a pod was placed, the nodes it
// found feasible, with their scores, are kept in order; the next pod, if
// it has the same signature and is scheduled in the very next cycle, gets
// the best of them as a hint, so the loop filters that one node instead
// of searching and scoring again. The node chosen last is filtered again
// and, if the new pod still fits there, re-scored to compete with the
// kept ones.
//
// Each framework instance has its own, so a profile instance published to
// replace another starts with none and never reuses the old instance's
// results. It is used only by the scheduling loop's goroutine, one cycle
// at a time, and needs no lock.
type opportunisticBatch struct {
	f         *frameworkImpl
	state     *batchState
	lastCycle batchCycle
}

type batchState struct {
	signature    framework.PodSignature
	sortedNodes  *framework.SortedScoredNodes
	creationTime time.Time
}

// batchCycle is what the last successful cycle of this instance chose.
type batchCycle struct {
	cycle      int64
	chosenNode string
	succeeded  bool
}

// GetNodeHint returns the node the pod most likely goes to according to
// the previous cycle's results, or "" when they cannot be used for it.
// cycle is the scheduling queue's cycle of this pod.
func (f *frameworkImpl) GetNodeHint(ctx context.Context, pod *v1.Pod, signature framework.PodSignature, state *framework.CycleState, cycle int64) string {
	if f.batch == nil {
		return ""
	}
	return f.batch.getNodeHint(ctx, pod, signature, state, cycle)
}

// StoreScheduleResults records where the cycle's pod goes (chosenNode),
// the hint it was given, and the other feasible nodes best first, for the
// next pod's GetNodeHint.
func (f *frameworkImpl) StoreScheduleResults(ctx context.Context, signature framework.PodSignature, hintedNode, chosenNode string, otherNodes *framework.SortedScoredNodes, cycle int64) {
	if f.batch == nil {
		return
	}
	f.batch.storeScheduleResults(ctx, signature, hintedNode, chosenNode, otherNodes, cycle)
}

func (b *opportunisticBatch) getNodeHint(ctx context.Context, pod *v1.Pod, signature framework.PodSignature, state *framework.CycleState, cycle int64) string {
	logger := klog.FromContext(ctx)
	profile := b.f.profileName
	var hint string
	start := time.Now()
	defer func() {
		hinted := "hint"
		if hint == "" {
			hinted = "no_hint"
			b.f.metrics.BatchAttempts.WithLabelValues(profile, metrics.BatchAttemptNoHint).Inc()
			logger.V(4).Info("OpportunisticBatch no node hint available for pod", "cycle", cycle)
		}
		b.f.metrics.GetNodeHintDuration.WithLabelValues(hinted, profile).Observe(time.Since(start).Seconds())
	}()
	if !b.compatible(logger, pod, signature, cycle) || !b.refreshHintCandidates(ctx, pod, state, cycle) {
		return ""
	}
	hint = b.state.sortedNodes.Pop().Name
	logger.V(3).Info("OpportunisticBatch provided node hint", "cycle", cycle, "hint", hint, "remainingNodes", b.state.sortedNodes.Len())
	return hint
}

func (b *opportunisticBatch) storeScheduleResults(ctx context.Context, signature framework.PodSignature, hintedNode, chosenNode string, otherNodes *framework.SortedScoredNodes, cycle int64) {
	logger := klog.FromContext(ctx)
	profile := b.f.profileName
	start := time.Now()
	defer func() {
		b.f.metrics.StoreScheduleResultsDuration.WithLabelValues(profile).Observe(time.Since(start).Seconds())
	}()
	b.lastCycle = batchCycle{cycle: cycle, chosenNode: chosenNode, succeeded: true}
	if hintedNode == chosenNode {
		// The hint was taken: the kept list, minus that node, serves the
		// next pod.
		b.f.metrics.BatchAttempts.WithLabelValues(profile, metrics.BatchAttemptHintUsed).Inc()
		logger.V(4).Info("OpportunisticBatch hint used", "cycle", cycle, "chosenNode", chosenNode)
		return
	}
	if hintedNode != "" {
		b.f.metrics.BatchAttempts.WithLabelValues(profile, metrics.BatchAttemptHintNotUsed).Inc()
		logger.V(4).Info("OpportunisticBatch hint not used", "cycle", cycle, "hint", hintedNode, "chosenNode", chosenNode)
	}
	if signature != nil && otherNodes.Len() > 0 {
		b.state = &batchState{signature: signature, sortedNodes: otherNodes, creationTime: time.Now()}
		logger.V(4).Info("OpportunisticBatch set batch information", "cycle", cycle, "nodes", otherNodes.Len())
		return
	}
	reason := metrics.BatchFlushPodNotBatchable
	if otherNodes.Len() == 0 {
		reason = metrics.BatchFlushEmptyList
	}
	b.state = nil
	b.unusable(logger, cycle, reason)
}

// unusable counts and logs why the kept results could not serve a pod.
// As upstream, only storeScheduleResults replaces or drops them: until the
// next cycle of this instance succeeds they stay, and every later pod finds
// them unusable again (a cycle was skipped), each time counted.
func (b *opportunisticBatch) unusable(logger klog.Logger, cycle int64, reason string) {
	b.f.metrics.BatchCacheFlushed.WithLabelValues(b.f.profileName, reason).Inc()
	logger.V(4).Info("OpportunisticBatch found unusable state", "cycle", cycle, "reason", reason)
}

// compatible checks, in upstream's order, that the kept results may serve
// pod.
func (b *opportunisticBatch) compatible(logger klog.Logger, pod *v1.Pod, signature framework.PodSignature, cycle int64) bool {
	if b.state == nil || b.state.sortedNodes.Len() == 0 {
		return false
	}
	var reason string
	switch {
	case cycle != b.lastCycle.cycle+1 && !b.samePodGroupCycle(cycle):
		// Another pod was popped in between (another profile's, one
		// skipped, one that failed before its node was chosen): the
		// cluster may have changed in ways the kept results miss.
		reason = metrics.BatchFlushPodSkipped
	case !b.lastCycle.succeeded:
		reason = metrics.BatchFlushPodFailed
	case pod.Status.NominatedNodeName != "":
		// A nominated pod is tried on its nominated node first.
		reason = metrics.BatchFlushPodNominated
	case signature == nil || !bytes.Equal(signature, b.state.signature):
		reason = metrics.BatchFlushPodIncompatible
	case time.Now().After(b.state.creationTime.Add(maxBatchAge)):
		reason = metrics.BatchFlushExpired
	default:
		return true
	}
	b.unusable(logger, cycle, reason)
	return false
}

// samePodGroupCycle says whether cycle is the one the kept results come
// from in an instance that schedules pod groups: the pods of a group share
// their pod-group cycle's number, and upstream (GenericWorkload on) lets
// each use the results of the one placed before it. The node it took is
// filtered and re-scored again, so the results stay as fresh as between
// consecutive cycles.
func (b *opportunisticBatch) samePodGroupCycle(cycle int64) bool {
	return b.f.workloadAware && cycle == b.lastCycle.cycle
}

// refreshHintCandidates filters the node chosen last for the new pod; if
// it still fits, re-scores it against the kept nodes (upstream 1.37: the
// previous pod may have taken little of it, or its cycle may have failed
// at Reserve or Permit and taken nothing). It returns false when that
// cannot be done.
func (b *opportunisticBatch) refreshHintCandidates(ctx context.Context, pod *v1.Pod, state *framework.CycleState, cycle int64) bool {
	logger := klog.FromContext(ctx)
	lister := b.f.snapshotSharedLister.NodeInfos()
	last, err := lister.Get(b.lastCycle.chosenNode)
	if err != nil || last == nil {
		b.unusable(logger, cycle, metrics.BatchFlushNodeMissing)
		return false
	}
	st := b.f.RunFilterPlugins(ctx, state, pod, last)
	if st.IsSuccess() {
		return b.rescore(ctx, pod, state, cycle, last)
	}
	if !st.IsRejected() {
		b.unusable(logger, cycle, metrics.BatchFlushFilterError)
		return false
	}
	return true
}

// rescore scores the last chosen node again, adds it to the kept nodes
// and normalizes all of them anew, on a copy of the cycle state so that
// nothing of this leaks into the cycle.
func (b *opportunisticBatch) rescore(ctx context.Context, pod *v1.Pod, state *framework.CycleState, cycle int64, last *framework.NodeInfo) bool {
	logger := klog.FromContext(ctx)
	profile := b.f.profileName
	start := time.Now()
	defer func() { b.f.metrics.BatchRescoreDuration.WithLabelValues(profile).Observe(time.Since(start).Seconds()) }()
	b.f.metrics.BatchRescoreAttempts.WithLabelValues(profile).Inc()

	cached := b.state.sortedNodes.UnorderedList()
	nodes := make([]*framework.NodeInfo, 0, len(cached)+1)
	lister := b.f.snapshotSharedLister.NodeInfos()
	for _, ns := range cached {
		ni, err := lister.Get(ns.Name)
		if err != nil || ni == nil {
			b.unusable(logger, cycle, metrics.BatchFlushNodeMissing)
			return false
		}
		nodes = append(nodes, ni)
	}
	// PreScore sees every candidate, the re-scored node included.
	nodes = append(nodes, last)
	rescoreState := state.Clone()
	if st := b.f.RunPreScorePlugins(ctx, rescoreState, pod, nodes); !st.IsSuccess() {
		b.unusable(logger, cycle, metrics.BatchFlushPreScoreError)
		return false
	}
	fresh, st := b.f.RunRawScorePlugins(ctx, rescoreState, pod, last)
	if !st.IsSuccess() {
		b.unusable(logger, cycle, metrics.BatchFlushRescoreError)
		return false
	}
	// Randomizer 0: the re-scored node loses ties, as upstream.
	scores := append(cached, framework.NodePluginScores{Name: last.Node().Name, RawScores: fresh})
	if st := b.f.NormalizeScores(ctx, rescoreState, pod, scores); !st.IsSuccess() {
		b.unusable(logger, cycle, metrics.BatchFlushNormalizeError)
		return false
	}
	b.state.sortedNodes = framework.NewSortedScoredNodes(scores)
	return true
}
