// Package podutil holds helpers on Pod objects shared by the scheduler and
// its plugins, where upstream keeps them in k8s.io/kubernetes/pkg/api/v1/pod.
package podutil

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdatePodCondition sets condition in status, adding it if status has no
// condition of its type, and reports whether anything changed. The
// transition time moves to now only when the condition's status changes.
// It matches upstream's podutil.UpdatePodCondition, ObservedGeneration
// included: a change of that field alone is not reported.
func UpdatePodCondition(status *v1.PodStatus, condition *v1.PodCondition) bool {
	condition.LastTransitionTime = metav1.Now()
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != condition.Type {
			continue
		}
		if condition.Status == old.Status {
			condition.LastTransitionTime = old.LastTransitionTime
		}
		same := condition.Status == old.Status &&
			condition.Reason == old.Reason &&
			condition.Message == old.Message &&
			condition.LastProbeTime.Equal(&old.LastProbeTime) &&
			condition.LastTransitionTime.Equal(&old.LastTransitionTime)
		*old = *condition
		return !same
	}
	status.Conditions = append(status.Conditions, *condition)
	return true
}
