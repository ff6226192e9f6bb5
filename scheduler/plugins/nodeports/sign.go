package nodeports

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*nodePorts)(nil)

// SignPod: verdicts depend on the pod's host ports, as upstream.
func (*nodePorts) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return []framework.SignFragment{{Key: framework.HostPortsSignerName, Value: framework.HostPortsSigner(pod)}}, nil
}
