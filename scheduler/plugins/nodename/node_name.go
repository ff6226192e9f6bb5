// Package nodename provides NodeName, the PreFilter and Filter plugin that
// keeps a pod whose spec.nodeName is set on that node only, as
// kube-scheduler 1.37.2 does.
package nodename

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
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
	_ framework.PreFilterPlugin   = (*nodeName)(nil)
	_ framework.FilterPlugin      = (*nodeName)(nil)
	_ framework.EnqueueExtensions = (*nodeName)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &nodeName{rejected: []string{ErrReason}}, nil
}

func (*nodeName) Name() string { return Name }

// PreFilter narrows the nodes of a pod with spec.nodeName to that node, as
// upstream 1.37: the others are UnschedulableAndUnresolvable without
// running Filter, so preemption never considers them, and a NodeAffinity
// matchFields naming another node is a PreFilter rejection. A pod without
// spec.nodeName gets no result (not Skip: Filter still runs, as upstream).
func (*nodeName) PreFilter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if pod.Spec.NodeName != "" {
		return &framework.PreFilterResult{NodeNames: sets.New(pod.Spec.NodeName)}, nil
	}
	return nil, nil
}

// PreFilterExtensions returns nil: the result does not depend on other pods.
func (*nodeName) PreFilterExtensions() framework.PreFilterExtensions { return nil }

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
