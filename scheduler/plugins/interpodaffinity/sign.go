package interpodaffinity

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*interPodAffinity)(nil)

// SignPod refuses pods with pod affinity or anti-affinity, as upstream:
// their verdicts depend on where other pods are. Otherwise the pod's
// labels go into the signature, since existing pods' terms may match them.
// With ignorePreferredTermsOfExistingPods upstream leaves the labels out,
// on the grounds that only pods with terms of their own then count; this
// follows it, although existing pods' required anti-affinity still reads
// the labels in Filter.
func (pl *interPodAffinity) SignPod(_ context.Context, pod *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return nil, framework.NewStatus(framework.Unschedulable, "pods with InterPodAffinity are not signable")
	}
	if pl.ignorePreferredTermsOfExistingPods {
		return nil, nil
	}
	return []framework.SignFragment{{Key: framework.LabelsSignerName, Value: pod.Labels}}, nil
}
