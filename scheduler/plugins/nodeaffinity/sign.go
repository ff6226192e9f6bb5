package nodeaffinity

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*nodeAffinityPlugin)(nil)

// SignPod: verdicts and scores depend on the pod's node affinity and node
// selector, as upstream. The profile's addedAffinity is the same for every
// pod of the profile, so it is not part of the signature.
func (*nodeAffinityPlugin) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	aff, err := framework.NodeAffinitySigner(pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	return []framework.SignFragment{
		{Key: framework.NodeAffinitySignerName, Value: aff},
		{Key: framework.NodeSelectorSignerName, Value: pod.Spec.NodeSelector},
	}, nil
}
