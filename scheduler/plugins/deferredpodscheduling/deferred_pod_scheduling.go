// Package deferredpodscheduling provides DeferredPodScheduling, kube-scheduler
// 1.37's plugin for bound pods whose in-place resize the kubelet deferred
// (PodResizePending with reason Deferred): the scheduler checks that the
// resize fits the pod's own node, preempting others if need be, and then
// rejects the pod at Permit so it waits in the unschedulable queue until the
// kubelet actuates the resize.
//
// Upstream adds it to the default profile, before NodeResourcesFit, only
// with the InPlacePodVerticalScalingSchedulerPreemption gate (alpha, off by
// default in 1.37), and with that gate off every extension point of it is
// a no-op; it reads the gate from feature.Features as upstream does.
package deferredpodscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "DeferredPodScheduling"
	// ErrReasonNodeDisablesResizePreemption is upstream's reason for a node
	// whose spec.podPreemptionPolicy disables resize preemption.
	ErrReasonNodeDisablesResizePreemption = "node had resize preemption disabled"
)

type deferredPodScheduling struct {
	enableInPlacePodVerticalScalingSchedulerPreemption bool
}

var (
	_ framework.PreFilterPlugin   = (*deferredPodScheduling)(nil)
	_ framework.FilterPlugin      = (*deferredPodScheduling)(nil)
	_ framework.EnqueueExtensions = (*deferredPodScheduling)(nil)
	_ framework.PermitPlugin      = (*deferredPodScheduling)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle, fts feature.Features) (framework.Plugin, error) {
	return &deferredPodScheduling{
		enableInPlacePodVerticalScalingSchedulerPreemption: fts.EnableInPlacePodVerticalScalingSchedulerPreemption,
	}, nil
}

func (*deferredPodScheduling) Name() string { return Name }

// handles reports whether the pod is this plugin's concern.
func (pl *deferredPodScheduling) handles(pod *v1.Pod) bool {
	return pl.enableInPlacePodVerticalScalingSchedulerPreemption && resource.IsPodResizeDeferred(pod)
}

// EventsToRegister: the pod's node enabling resize preemption, or being
// (re)created with it enabled, can make the deferred resize schedulable.
func (pl *deferredPodScheduling) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodePreemptionPolicy}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterNodeAdd},
	}, nil
}

func (pl *deferredPodScheduling) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	if !pl.handles(pod) {
		return framework.QueueSkip, nil
	}
	oldNode, ok := oldObj.(*v1.Node)
	if !ok {
		return framework.Queue, fmt.Errorf("got object of type %T, want *v1.Node", oldObj)
	}
	newNode, ok := newObj.(*v1.Node)
	if !ok {
		return framework.Queue, fmt.Errorf("got object of type %T, want *v1.Node", newObj)
	}
	if pod.Spec.NodeName != newNode.Name {
		return framework.QueueSkip, nil
	}
	if disablesResizePreemption(oldNode) && !disablesResizePreemption(newNode) {
		logger.V(5).Info("Node preemption policy changed from disabled to enabled, queueing pod", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

func (pl *deferredPodScheduling) isSchedulableAfterNodeAdd(logger klog.Logger, pod *v1.Pod, _, newObj any) (framework.QueueingHint, error) {
	if !pl.handles(pod) {
		return framework.QueueSkip, nil
	}
	node, ok := newObj.(*v1.Node)
	if !ok {
		return framework.Queue, fmt.Errorf("got object of type %T, want *v1.Node", newObj)
	}
	if pod.Spec.NodeName != node.Name {
		return framework.QueueSkip, nil
	}
	if !disablesResizePreemption(node) {
		logger.V(5).Info("Node added with preemption enabled, queueing pod", "pod", klog.KObj(pod), "node", klog.KObj(node))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

func disablesResizePreemption(node *v1.Node) bool {
	return node.Spec.PodPreemptionPolicy != nil && len(node.Spec.PodPreemptionPolicy.DisableResizePreemption) > 0
}

// PreFilter skips the plugin for every pod but a deferred resize.
func (pl *deferredPodScheduling) PreFilter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if !pl.handles(pod) {
		return nil, framework.NewStatus(framework.Skip)
	}
	return nil, nil
}

// PreFilterExtensions returns nil: PreFilter keeps no state.
func (*deferredPodScheduling) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter keeps a deferred resize on the pod's own node, and off a node that
// disables resize preemption. Neither can change by preempting, hence
// UnschedulableAndUnresolvable.
func (pl *deferredPodScheduling) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	if !pl.handles(pod) {
		return nil
	}
	node := nodeInfo.Node()
	if node == nil {
		return framework.NewStatus(framework.Error, "node not found")
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod assigned to different node")
	}
	if disablesResizePreemption(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeDisablesResizePreemption)
	}
	return nil
}

// Permit rejects a deferred resize that fits, so the pod stays in the
// unschedulable queue until the kubelet actuates the resize; the pod is
// bound already and must not be bound again.
func (pl *deferredPodScheduling) Permit(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if !pl.handles(pod) {
		return nil, 0
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod resize fits, waiting for Kubelet actuation"), 0
}
