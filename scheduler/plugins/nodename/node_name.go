// Package nodename provides NodeName, the Filter plugin that keeps a pod
// whose spec.nodeName is set on that node only, as kube-scheduler does.
package nodename

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodeName"
	// ErrReason is upstream's reason for a node other than spec.nodeName.
	ErrReason = "node(s) didn't match the requested node name"
)

type nodeName struct {
	// rejected is the reasons of every rejection, shared to save an
	// allocation per rejected node; a Status never writes into its
	// reasons in place.
	rejected []string
}

var (
	_ framework.FilterPlugin      = (*nodeName)(nil)
	_ framework.EnqueueExtensions = (*nodeName)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &nodeName{rejected: []string{ErrReason}}, nil
}

func (*nodeName) Name() string { return Name }

// Filter rejects every node but spec.nodeName. Preemption cannot change a
// node's name, hence UnschedulableAndUnresolvable.
func (pl *nodeName) Filter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	if Fits(pod, nodeInfo) {
		return nil
	}
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Node does not match spec.nodeName", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()))
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, pl.rejected...)
}

// Fits reports whether pod may run on the node of nodeInfo by its spec.nodeName.
func Fits(pod *v1.Pod, nodeInfo *framework.NodeInfo) bool {
	return len(pod.Spec.NodeName) == 0 || pod.Spec.NodeName == nodeInfo.Node().Name
}

// EventsToRegister: only a new node (the one named) can help; node updates
// never change a node's name.
func (*nodeName) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
	}, nil
}
