// Package tainttoleration provides TaintToleration, kube-scheduler's plugin
// for node taints: Filter rejects nodes with a NoSchedule or NoExecute taint
// the pod does not tolerate, and Score prefers nodes with fewer untolerated
// PreferNoSchedule taints (counts normalized to 0..100 and reversed).
package tainttoleration

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "TaintToleration"
	// ErrReasonUntolerated is upstream's reason for an untolerated taint.
	ErrReasonUntolerated = "node(s) had untolerated taint(s)"

	preScoreStateKey framework.StateKey = "PreScore" + Name
)

// enableComparisonOperators follows the TaintTolerationComparisonOperators
// feature gate, alpha and off in Kubernetes 1.37.
const enableComparisonOperators = false

type taintToleration struct {
	// rejected is the reasons of every rejection, shared to save an
	// allocation per rejected node; a Status never writes into its
	// reasons in place.
	rejected []string
}

var (
	_ framework.PreFilterPlugin   = (*taintToleration)(nil)
	_ framework.FilterPlugin      = (*taintToleration)(nil)
	_ framework.PreScorePlugin    = (*taintToleration)(nil)
	_ framework.ScorePlugin       = (*taintToleration)(nil)
	_ framework.ScoreExtensions   = (*taintToleration)(nil)
	_ framework.EnqueueExtensions = (*taintToleration)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &taintToleration{rejected: []string{ErrReasonUntolerated}}, nil
}

func (*taintToleration) Name() string { return Name }

// PreFilter does nothing. Upstream 1.37 added it to skip the plugin for a
// bound pod whose resize is deferred, behind the
// InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off); having it
// keeps the plugin at PreFilter in the expanded default profile and lets a
// 1.37 profile that enables it there explicitly load unchanged.
func (*taintToleration) PreFilter(context.Context, *framework.CycleState, *v1.Pod, []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	return nil, nil
}

// PreFilterExtensions returns nil: PreFilter keeps no state.
func (*taintToleration) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a node with a NoSchedule or NoExecute taint that no
// toleration of the pod matches. Preemption cannot remove taints, hence
// UnschedulableAndUnresolvable.
func (pl *taintToleration) Filter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if len(node.Spec.Taints) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	taint, untolerated := findUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations)
	if !untolerated {
		return nil
	}
	if l := logger.V(4); l.Enabled() {
		l.Info("Node had untolerated taints", "node", klog.KObj(node), "pod", klog.KObj(pod), "untoleratedTaint", taint)
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, pl.rejected...)
}

// findUntoleratedTaint is corev1helpers.FindMatchingUntoleratedTaint with
// the NoSchedule/NoExecute filter, without the filtered copy of the taints
// that the helper allocates for every node: Filter runs once per node.
func findUntoleratedTaint(logger klog.Logger, taints []v1.Taint, tolerations []v1.Toleration) (*v1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if !helper.DoNotScheduleTaint(t) {
			continue
		}
		if !corev1helpers.TolerationsTolerateTaint(logger, tolerations, t, enableComparisonOperators) {
			return t, true
		}
	}
	return nil, false
}

// preScoreState is the pod's tolerations that can match a PreferNoSchedule
// taint (those with that effect or with no effect).
type preScoreState struct {
	tolerationsPreferNoSchedule []v1.Toleration
}

// Clone shares the state: it does not depend on other pods.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore selects the tolerations that matter for scoring, once per pod.
func (*taintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(preScoreStateKey, &preScoreState{tolerationsPreferNoSchedule: preferNoScheduleTolerations(pod.Spec.Tolerations)})
	return nil
}

func preferNoScheduleTolerations(tolerations []v1.Toleration) []v1.Toleration {
	var out []v1.Toleration
	for _, t := range tolerations {
		// An empty effect matches every effect, PreferNoSchedule included.
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			out = append(out, t)
		}
	}
	return out
}

// Score counts the node's PreferNoSchedule taints that the pod does not
// tolerate; NormalizeScore turns the count into a preference for fewer.
func (*taintToleration) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	taints := nodeInfo.Node().Spec.Taints
	if len(taints) == 0 {
		return 0, nil
	}
	var tolerations []v1.Toleration
	if s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey); err == nil {
		tolerations = s.tolerationsPreferNoSchedule
	} else {
		// PreScore was disabled in the profile: derive what it would have.
		tolerations = preferNoScheduleTolerations(pod.Spec.Tolerations)
	}
	logger := klog.FromContext(ctx)
	var count int64
	for i := range taints {
		if taints[i].Effect != v1.TaintEffectPreferNoSchedule {
			continue
		}
		if !corev1helpers.TolerationsTolerateTaint(logger, tolerations, &taints[i], enableComparisonOperators) {
			count++
		}
	}
	return count, nil
}

// ScoreExtensions returns the plugin itself for NormalizeScore.
func (pl *taintToleration) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps counts to 0..100 relative to the highest count and
// reverses them, so the node with the fewest untolerated taints scores 100.
func (*taintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return helper.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
}

// EventsToRegister: a node added or whose taints change may now be
// tolerated, and so may every node once the pod gains a toleration (its own
// update, a TargetPod event as upstream 1.37).
func (pl *taintToleration) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration}, QueueingHintFn: pl.isSchedulableAfterTargetPodTolerationChange},
	}, nil
}

func (*taintToleration) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	wasUntolerated := true
	if original != nil {
		_, wasUntolerated = corev1helpers.FindMatchingUntoleratedTaint(logger, original.Spec.Taints, pod.Spec.Tolerations, helper.DoNotScheduleTaint, enableComparisonOperators)
	}
	_, isUntolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, modified.Spec.Taints, pod.Spec.Tolerations, helper.DoNotScheduleTaint, enableComparisonOperators)
	if wasUntolerated && !isUntolerated {
		logger.V(5).Info("Node was created or updated and its taints are now tolerated", "pod", klog.KObj(pod), "node", klog.KObj(modified))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterTargetPodTolerationChange always queues, as upstream
// 1.37: any new toleration may tolerate a taint, and the queue offers
// TargetPod events to the updated pod only (except when it replays them to
// every pod in flight, where upstream does not check the UID either).
func (*taintToleration) isSchedulableAfterTargetPodTolerationChange(logger klog.Logger, pod *v1.Pod, _, _ any) (framework.QueueingHint, error) {
	logger.V(5).Info("a new toleration is added for the unschedulable Pod, and it may make it schedulable", "pod", klog.KObj(pod))
	return framework.Queue, nil
}
