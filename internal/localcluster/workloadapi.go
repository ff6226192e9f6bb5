package localcluster

// WorkloadFeatureGates are the feature gates, off by default in 1.37.2,
// that kube-apiserver needs to serve scheduling.k8s.io/v1beta1's Workload
// and PodGroup with every field workload-aware profiles read (the
// topology constraints come with TopologyAwareWorkloadScheduling), and
// that kube-controller-manager needs to run the PodGroup protection
// controller. The value is both components' --feature-gates.
const WorkloadFeatureGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// WorkloadAPIServerArgs are the kube-apiserver flags (names without
// dashes) that serve scheduling.k8s.io/v1beta1's Workload and PodGroup:
// the gates, and the beta API version, which kube-apiserver 1.37.2 does
// not serve by default. Start passes them unless Options.APIServerArgs
// sets the same flags.
func WorkloadAPIServerArgs() map[string][]string {
	return map[string][]string{
		"runtime-config": {"scheduling.k8s.io/v1beta1=true"},
		"feature-gates":  {WorkloadFeatureGates},
	}
}

// PodGroupControllers are kube-controller-manager 1.37.2's controllers
// for scheduling.k8s.io/v1beta1 PodGroups: the PodGroup protection
// controller, which removes the finalizer the API server's PodGroupProtection
// admission puts on every PodGroup once no pod that is not done names
// the group, so that a deleted PodGroup goes only after its pods. (The
// Job controller makes Workloads and PodGroups for Jobs only with the
// WorkloadWithJob gate, alpha, and the resource claim controller reads
// PodGroups for pod-group claims only with DRAWorkloadResourceClaims; both
// stay off, as in 1.37.2 by default.)
func PodGroupControllers() []string {
	return []string{"podgroup-protection-controller"}
}
