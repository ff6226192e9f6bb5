package imagelocality

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*imageLocality)(nil)

// SignPod: scores depend on the images of the pod's containers and init
// containers, as upstream. Like upstream, image volumes are left out
// although they count in the score.
func (*imageLocality) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	names := sets.New[string]()
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			names.Insert(normalizedImageName(c.Image))
		}
	}
	return []framework.SignFragment{{Key: framework.ImageNamesSignerName, Value: sets.List(names)}}, nil
}
