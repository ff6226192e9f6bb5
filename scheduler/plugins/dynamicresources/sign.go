package dynamicresources

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*dynamicResources)(nil)

// SignPod makes pods with resource claims unsignable, as upstream: whether
// a claim is bound to one node or shared is not simple to tell from the
// pod. Other pods add nothing to the signature.
func (*dynamicResources) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, framework.NewStatus(framework.Unschedulable, "pods with dra resource claims are not signable")
	}
	return nil, nil
}
