package scheduler

import (
	"k8s.io/component-base/featuregate"

	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// The kube-scheduler gates the operator lets people set, with upstream's
// names, stages and defaults in 1.37.2.
const (
	// OpportunisticBatching (beta, on by default since 1.35): identical
	// pods reuse the previous cycle's filter and score results.
	OpportunisticBatching featuregate.Feature = "OpportunisticBatching"
	// GenericWorkload (beta, off by default in 1.37): the
	// scheduling.k8s.io/v1beta1 Workload and PodGroup API and gang
	// scheduling. Here it lets a profile enable GangScheduling and the
	// podGroupPostFilter point; a profile that names none of the workload
	// plugins is untouched.
	GenericWorkload featuregate.Feature = runtime.GenericWorkloadGate
	// TopologyAwareWorkloadScheduling (alpha, off by default; needs
	// GenericWorkload): topology-aware placement of pod groups. Here it
	// lets a profile enable TopologyPlacementGenerator, PodGroupPodsCount
	// and the placementGenerate and placementScore points.
	TopologyAwareWorkloadScheduling featuregate.Feature = runtime.TopologyAwareWorkloadSchedulingGate
)

// NewFeatureGate returns the gates the operator's --feature-gates flag
// accepts, at upstream's defaults, with upstream's dependency
// (TopologyAwareWorkloadScheduling needs GenericWorkload, or setting the
// flag fails) and, as every component-base gate set, AllAlpha and
// AllBeta, which set the gates of that stage not named explicitly
// (AllBeta: OpportunisticBatching and GenericWorkload; AllAlpha:
// TopologyAwareWorkloadScheduling). It is a flag.Value; any other gate
// name is refused when the flag is parsed.
func NewFeatureGate() featuregate.MutableFeatureGate {
	fg := featuregate.NewFeatureGate()
	// Adding known specs and dependencies to a new gate cannot fail.
	_ = fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		OpportunisticBatching:           {Default: true, PreRelease: featuregate.Beta},
		GenericWorkload:                 {Default: false, PreRelease: featuregate.Beta},
		TopologyAwareWorkloadScheduling: {Default: false, PreRelease: featuregate.Alpha},
	})
	_ = fg.AddDependencies(map[featuregate.Feature][]featuregate.Feature{
		TopologyAwareWorkloadScheduling: {GenericWorkload},
	})
	return fg
}

// WithOpportunisticBatching turns opportunistic batching on or off for
// every profile instance NewFramework builds (on by default).
func WithOpportunisticBatching(enabled bool) Option {
	return func(o *options) { o.disableBatching = !enabled }
}

// WithWorkloadGates sets upstream's workload gates (both off by default):
// genericWorkload lets profiles schedule scheduling.k8s.io/v1beta1 pod
// groups with GangScheduling, topologyAwareWorkload lets them place the
// groups by topology. Only profiles that enable a workload plugin use
// them.
func WithWorkloadGates(genericWorkload, topologyAwareWorkload bool) Option {
	return func(o *options) {
		o.genericWorkload, o.topologyAwareWorkload = genericWorkload, topologyAwareWorkload
	}
}

// WorkloadGates returns the workload gates profiles are checked and built
// against.
func (s *Scheduler) WorkloadGates() runtime.WorkloadGates { return s.workloadGates }
