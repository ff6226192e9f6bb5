package noderesources

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*fit)(nil)

// SignPod: verdicts and scores depend on the pod's requests with overhead,
// as upstream. Extended resources backed by DRA, which upstream cannot
// sign, are not served here.
func (*fit) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return []framework.SignFragment{{Key: framework.ResourcesSignerName, Value: framework.ResourcesSigner(pod)}}, nil
}
