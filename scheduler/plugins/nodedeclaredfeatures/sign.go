package nodedeclaredfeatures

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*nodeDeclaredFeatures)(nil)

// SignPod: verdicts depend on the features the pod needs, inferred from
// its spec as PreFilter does; the value is the feature set's bitmap, as
// upstream.
func (pl *nodeDeclaredFeatures) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	reqs, err := pl.required(&pod.Spec)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return []framework.SignFragment{{Key: framework.FeaturesSignerName, Value: reqs.String()}}, nil
}
