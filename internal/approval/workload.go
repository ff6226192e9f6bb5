package approval

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// GangScheduling holds the members of a scheduling.k8s.io PodGroup (the
// Workload API's) until its gang's minCount have nodes.
const GangScheduling = "GangScheduling"

// PodGroupNameOf is the scheduling.k8s.io PodGroup pod belongs to, from
// its spec.schedulingGroup, as kube-scheduler reads it; "" when it names
// none.
func PodGroupNameOf(pod *corev1.Pod) string {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *pod.Spec.SchedulingGroup.PodGroupName
}

// NotWorkloadMember says why wp, whose pod's spec.schedulingGroup names the
// scheduling.k8s.io PodGroup group, is no member of that group for a
// decision; "" when it is one. pod is the pod of wp's name read now. The
// pod's spec is what the scheduler itself groups by, but it is its author's
// to write: only a pod the operator holds (the same UID) in a profile that
// runs GangScheduling at Permit is held as a member of that gang.
func NotWorkloadMember(wp *schedulingv1alpha1.WaitingPod, pod *corev1.Pod, group string, served map[string]ServedProfile) string {
	profile := wp.Status.Profile
	sp, ok := served[profile]
	switch {
	case wp.Status.PodUID == "" || pod.UID != wp.Status.PodUID:
		return "the scheduler does not show its pod held"
	case PodGroupNameOf(pod) != group:
		return "its pod's spec.schedulingGroup names another group"
	case profile == "":
		return "the scheduler shows no profile holding it"
	case !ok:
		return fmt.Sprintf("its profile %q serves no pods now", profile)
	case !slices.Contains(sp.Permit, GangScheduling):
		return fmt.Sprintf("its profile %q does not run %s, so its pod's spec.schedulingGroup makes it no member", profile, GangScheduling)
	}
	return ""
}
