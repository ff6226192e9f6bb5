package tainttoleration

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*taintToleration)(nil)

// SignPod: verdicts and scores depend on the pod's tolerations, as upstream.
func (*taintToleration) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return []framework.SignFragment{{Key: framework.TolerationsSignerName, Value: framework.TolerationsSigner(pod)}}, nil
}
