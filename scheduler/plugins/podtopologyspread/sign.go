package podtopologyspread

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*podTopologySpread)(nil)

// SignPod refuses pods with topology spread constraints, their own or the
// profile's defaults, as upstream: their verdicts depend on where other
// pods are. With the default defaultingType (System) every pod has
// default constraints, so a profile with PodTopologySpread as defaulted
// never signs a pod, and never batches.
func (pl *podTopologySpread) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return nil, framework.NewStatus(framework.Unschedulable, "pods with topology constraints are not signable")
	}
	if len(pl.defaultConstraints) > 0 {
		return nil, framework.NewStatus(framework.Unschedulable, "pods with default topology constraints are not signable")
	}
	return nil, nil
}
