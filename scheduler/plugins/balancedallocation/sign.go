package balancedallocation

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*balancedAllocation)(nil)

// SignPod: scores depend on the pod's requests with overhead, as upstream
// (the same fragment as NodeResourcesFit's).
func (*balancedAllocation) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return []framework.SignFragment{{Key: framework.ResourcesSignerName, Value: framework.ResourcesSigner(pod)}}, nil
}
