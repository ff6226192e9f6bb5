package approval

import "strings"

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
