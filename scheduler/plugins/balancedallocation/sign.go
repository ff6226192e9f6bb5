package balancedallocation

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*balancedAllocation)(nil)

// SignPod: scores depend on the pod's requests with overhead, as upstream
// (the same fragment as NodeResourcesFit's); a pod requesting an extended
// resource backed by DRA is not signable, as upstream.
func (pl *balancedAllocation) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	if pl.dra != nil && framework.RequestsDRAExtendedResource(pod, pl.dra.DeviceClassResolver()) {
		return nil, framework.NewStatus(framework.Unschedulable, "signature disabled when dra extended resources are used in the cluster")
	}
	return []framework.SignFragment{{Key: framework.ResourcesSignerName, Value: framework.ResourcesSigner(pod)}}, nil
}
