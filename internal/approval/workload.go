package approval

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// GangScheduling holds the members of a scheduling.k8s.io/v1beta1
// PodGroup's gang (kube-scheduler's workload-aware scheduling) until
// minCount of them have nodes.
const GangScheduling = "GangScheduling"

// WorkloadPodGroupPrefix starts a WaitingPod's status.podGroup when the
// group is a scheduling.k8s.io PodGroup rather than scheduler-plugins'
// (scheduling.x-k8s.io, shown by bare name): podgroup.scheduling.k8s.io/,
// as `kubectl get -o name` names it. A PodGroup name holds no "/", so the
// two kinds never read alike.
const WorkloadPodGroupPrefix = "podgroup.scheduling.k8s.io/"

// WorkloadPodGroup is how a WaitingPod's status.podGroup names the
// scheduling.k8s.io PodGroup name.
func WorkloadPodGroup(name string) string { return WorkloadPodGroupPrefix + name }

// WorkloadPodGroupName is the name of the scheduling.k8s.io PodGroup that
// a WaitingPod's status.podGroup names, and whether it names one.
func WorkloadPodGroupName(podGroup string) (string, bool) {
	return strings.CutPrefix(podGroup, WorkloadPodGroupPrefix)
}

// DecideGroupAs is how `kubectl approve` and `kubectl reject` are told to
// decide every member of the group a WaitingPod's status.podGroup shows,
// as kubectl users name each kind: podgroup/NAME for the Workload API's
// (kubectl's plain resource name is the built-in kind), pg/NAME for
// scheduler-plugins' (its CRD's short name, which only it has). "" when
// podGroup shows no group.
func DecideGroupAs(podGroup string) string {
	if name, ok := WorkloadPodGroupName(podGroup); ok {
		return "podgroup/" + name
	}
	if podGroup == "" {
		return ""
	}
	return "pg/" + podGroup
}

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
// runs GangScheduling at Permit, which the operator shows in the group, is
// held as a member of that gang.
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
	case wp.Status.PodGroup != WorkloadPodGroup(group):
		return "the scheduler does not show it in the group"
	}
	return ""
}
