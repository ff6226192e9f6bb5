// Package nodeports provides NodePorts, the Filter plugin that rejects nodes
// where a host port the pod asks for is already taken, with kube-scheduler's
// conflict rules: a port is identified by host IP, protocol and number; an
// empty host IP means 0.0.0.0, which conflicts with the same protocol and
// port on every IP, and an empty protocol means TCP. Ports of sidecar
// (restartable init) containers count, those of ordinary init containers do
// not.
package nodeports

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodePorts"
	// ErrReason is upstream's reason for a host port conflict.
	ErrReason = "node(s) didn't have free ports for the requested pod ports"

	preFilterStateKey framework.StateKey = "PreFilter" + Name
)

type nodePorts struct {
	// rejected is the reasons of every rejection, shared to save an
	// allocation per rejected node; a Status never writes into its
	// reasons in place.
	rejected []string
}

var (
	_ framework.PreFilterPlugin   = (*nodePorts)(nil)
	_ framework.FilterPlugin      = (*nodePorts)(nil)
	_ framework.EnqueueExtensions = (*nodePorts)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &nodePorts{rejected: []string{ErrReason}}, nil
}

func (*nodePorts) Name() string { return Name }

// preFilterState is the pod's host ports, collected once per cycle.
type preFilterState []v1.ContainerPort

// Clone shares the ports: adding or removing other pods does not change them.
func (s preFilterState) Clone() framework.StateData { return s }

// PreFilter collects the pod's host ports; a pod without any skips Filter.
func (*nodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	ports := framework.GetHostPorts(pod)
	if len(ports) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, preFilterState(ports))
	return nil, nil
}

// PreFilterExtensions returns nil: the state does not depend on other pods.
func (*nodePorts) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a node where one of the pod's host ports is in use.
// Preemption can free ports, hence Unschedulable.
func (pl *nodePorts) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	wantPorts, err := framework.ReadAs[preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if fitsPorts(wantPorts, nodeInfo.UsedPorts) {
		return nil
	}
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Host port conflict", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()))
	}
	return framework.NewStatus(framework.Unschedulable, pl.rejected...)
}

// Fits reports whether none of pod's host ports conflicts with those used on nodeInfo.
func Fits(pod *v1.Pod, nodeInfo *framework.NodeInfo) bool {
	return fitsPorts(framework.GetHostPorts(pod), nodeInfo.UsedPorts)
}

func fitsPorts(want []v1.ContainerPort, inUse framework.HostPortInfo) bool {
	for i := range want {
		if inUse.CheckConflict(want[i].HostIP, string(want[i].Protocol), want[i].HostPort) {
			return false
		}
	}
	return true
}

// EventsToRegister: ports are freed when a pod on a node goes away (an
// AssignedPod event, as upstream 1.37 registers it; a deleted pod holding a
// nomination is reported as one too), and a new node has all its ports
// free. Container ports are immutable, so pod updates never matter.
func (pl *nodePorts) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodDeleted},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
	}, nil
}

func (*nodePorts) isSchedulableAfterAssignedPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, _ any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*v1.Pod](oldObj, nil)
	if err != nil {
		return framework.Queue, err
	}
	if deleted.Spec.NodeName == "" && deleted.Status.NominatedNodeName == "" {
		// An unscheduled pod held no ports.
		return framework.QueueSkip, nil
	}
	ports := framework.GetHostPorts(deleted)
	if len(ports) == 0 {
		return framework.QueueSkip, nil
	}
	freed := make(framework.HostPortInfo, len(ports))
	for _, p := range ports {
		freed.Add(p.HostIP, string(p.Protocol), p.HostPort)
	}
	if fitsPorts(framework.GetHostPorts(pod), freed) {
		logger.V(4).Info("Deleted pod shares no host port with the pod", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}
