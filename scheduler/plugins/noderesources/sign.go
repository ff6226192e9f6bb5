package noderesources

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*fit)(nil)

// SignPod: verdicts and scores depend on the pod's requests with overhead,
// as upstream; a pod requesting an extended resource backed by DRA is not
// signable, as upstream: its fit depends on devices, not on the pod alone.
func (pl *fit) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	if pl.dra != nil && framework.RequestsDRAExtendedResource(pod, pl.dra.DeviceClassResolver()) {
		return nil, framework.NewStatus(framework.Unschedulable, "signature disabled when dra extended resources are used in the cluster")
	}
	return []framework.SignFragment{{Key: framework.ResourcesSignerName, Value: framework.ResourcesSigner(pod)}}, nil
}
