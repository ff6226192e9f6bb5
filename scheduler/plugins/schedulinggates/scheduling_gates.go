// Package schedulinggates provides SchedulingGates, the PreEnqueue plugin that
// keeps a pod out of the scheduling queue while spec.schedulingGates is not
// empty, as kube-scheduler does.
package schedulinggates

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "SchedulingGates"

type schedulingGates struct{}

var (
	_ framework.PreEnqueuePlugin  = (*schedulingGates)(nil)
	_ framework.EnqueueExtensions = (*schedulingGates)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &schedulingGates{}, nil
}

func (*schedulingGates) Name() string { return Name }

// PreEnqueue gates the pod while it has scheduling gates. The message lists
// the gates in spec order, formatted as upstream ("[a b]"), and the code is
// UnschedulableAndUnresolvable: only removing the gates helps.
func (*schedulingGates) PreEnqueue(ctx context.Context, p *v1.Pod) *framework.Status {
	if len(p.Spec.SchedulingGates) == 0 {
		return nil
	}
	gates := make([]string, 0, len(p.Spec.SchedulingGates))
	for _, gate := range p.Spec.SchedulingGates {
		gates = append(gates, gate.Name)
	}
	klog.FromContext(ctx).V(4).Info("Pod is gated", "pod", klog.KObj(p), "gates", gates)
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for scheduling gates: %v", gates))
}

// EventsToRegister: a gated pod is released when its own last gate is
// removed, a TargetPod event as upstream 1.37 (other pods losing their
// gates are UnscheduledPod events and do not reach this plugin).
func (pl *schedulingGates) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodSchedulingGatesEliminated}, QueueingHintFn: pl.isSchedulableAfterUpdateTargetPodSchedulingGatesEliminated},
	}, nil
}

// isSchedulableAfterUpdateTargetPodSchedulingGatesEliminated always queues,
// as upstream 1.37, which dropped the UID check along with the Pod
// registration.
func (*schedulingGates) isSchedulableAfterUpdateTargetPodSchedulingGatesEliminated(klog.Logger, *v1.Pod, any, any) (framework.QueueingHint, error) {
	return framework.Queue, nil
}
