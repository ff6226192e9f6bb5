// Package nodeunschedulable provides NodeUnschedulable, the Filter plugin that
// keeps pods off nodes with spec.unschedulable (cordoned nodes) unless the pod
// tolerates the node.kubernetes.io/unschedulable:NoSchedule taint, as
// kube-scheduler does.
package nodeunschedulable

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
	Name = "NodeUnschedulable"
	// ErrReasonUnschedulable is upstream's reason for a cordoned node.
	ErrReasonUnschedulable = "node(s) were unschedulable"
)

// unschedulableTaint is the taint a cordoned node carries; tolerating it
// means tolerating spec.unschedulable as well.
var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// enableComparisonOperators follows the TaintTolerationComparisonOperators
// feature gate, alpha and off in Kubernetes 1.37.
const enableComparisonOperators = false

type nodeUnschedulable struct {
	// rejected is the reasons of every rejection, shared to save an
	// allocation per rejected node; a Status never writes into its
	// reasons in place.
	rejected []string
}

var (
	_ framework.PreFilterPlugin   = (*nodeUnschedulable)(nil)
	_ framework.FilterPlugin      = (*nodeUnschedulable)(nil)
	_ framework.EnqueueExtensions = (*nodeUnschedulable)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &nodeUnschedulable{rejected: []string{ErrReasonUnschedulable}}, nil
}

func (*nodeUnschedulable) Name() string { return Name }

// PreFilter does nothing. Upstream 1.37 added it to skip the plugin for a
// bound pod whose resize is deferred, behind the
// InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off); having it
// keeps the plugin at PreFilter in the expanded default profile and lets a
// 1.37 profile that enables it there explicitly load unchanged.
func (*nodeUnschedulable) PreFilter(context.Context, *framework.CycleState, *v1.Pod, []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	return nil, nil
}

// PreFilterExtensions returns nil: PreFilter keeps no state.
func (*nodeUnschedulable) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a cordoned node unless the pod tolerates it. Preemption
// cannot uncordon a node, hence UnschedulableAndUnresolvable.
func (pl *nodeUnschedulable) Filter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if !node.Spec.Unschedulable {
		return nil
	}
	logger := klog.FromContext(ctx)
	if tolerates(logger, pod) {
		return nil
	}
	if l := logger.V(4); l.Enabled() {
		l.Info("Node is unschedulable and the pod does not tolerate it", "pod", klog.KObj(pod), "node", klog.KObj(node))
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, pl.rejected...)
}

func tolerates(logger klog.Logger, pod *v1.Pod) bool {
	return corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &unschedulableTaint, enableComparisonOperators)
}

// EventsToRegister: a node that is added schedulable or uncordoned, or the
// pod gaining the toleration (its own update, a TargetPod event as upstream
// 1.37), can make the pod schedulable.
func (pl *nodeUnschedulable) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration}, QueueingHintFn: pl.isSchedulableAfterTargetPodTolerationChange},
	}, nil
}

func (*nodeUnschedulable) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if (original != nil && original.Spec.Unschedulable && !modified.Spec.Unschedulable) ||
		(original == nil && !modified.Spec.Unschedulable) {
		logger.V(5).Info("Node was created or uncordoned, pod may be schedulable now", "pod", klog.KObj(pod), "node", klog.KObj(modified))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// isSchedulableAfterTargetPodTolerationChange does not compare UIDs: the
// queue offers TargetPod events to the updated pod only, except when it
// replays them to every pod in flight, where upstream 1.37 does not check
// either.
func (*nodeUnschedulable) isSchedulableAfterTargetPodTolerationChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	// Tolerations can only be added, so the pod did not tolerate the taint
	// before (it would not have been rejected otherwise).
	if tolerates(logger, modified) {
		logger.V(5).Info("a new toleration is added for the unschedulable Pod, and it may make it schedulable", "pod", klog.KObj(modified))
		return framework.Queue, nil
	}
	logger.V(5).Info("a new toleration is added for the unschedulable Pod, but it's an unrelated toleration", "pod", klog.KObj(modified))
	return framework.QueueSkip, nil
}
