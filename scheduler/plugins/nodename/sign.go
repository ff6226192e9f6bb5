package nodename

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*nodeName)(nil)

// SignPod: verdicts depend on spec.nodeName alone, as upstream.
func (*nodeName) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return []framework.SignFragment{{Key: framework.NodeNameSignerName, Value: pod.Spec.NodeName}}, nil
}
