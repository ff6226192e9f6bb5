package volumebinding

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*volumeBinding)(nil)

// SignPod: verdicts depend on the pod's volumes other than ConfigMaps and
// Secrets, as upstream.
func (*volumeBinding) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	vols, err := framework.VolumesSigner(pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return []framework.SignFragment{{Key: framework.VolumesSignerName, Value: vols}}, nil
}
