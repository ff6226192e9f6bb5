package runtime

import (
	configv1 "k8s.io/kube-scheduler/config/v1"
)

// Upstream's feature gates for workload-aware scheduling, by name.
const (
	// GenericWorkloadGate (beta, off by default in 1.37) is
	// scheduling.k8s.io/v1beta1's Workload and PodGroup and gang
	// scheduling.
	GenericWorkloadGate = "GenericWorkload"
	// TopologyAwareWorkloadSchedulingGate (alpha, off by default) is
	// topology-aware placement of pod groups; it needs GenericWorkload.
	TopologyAwareWorkloadSchedulingGate = "TopologyAwareWorkloadScheduling"
)

// WorkloadGates are the workload gates the operator runs with (its
// --feature-gates). They only make the workload plugins and the pod-group
// points available: a profile uses them by enabling a workload plugin.
type WorkloadGates struct {
	GenericWorkload                 bool
	TopologyAwareWorkloadScheduling bool
}

// WithWorkloadGates sets the workload gates the profile is checked and
// built against; without it both are off, as upstream's defaults.
func WithWorkloadGates(g WorkloadGates) Option {
	return func(o *frameworkOptions) { o.workloadGates = g }
}

// enabled says whether gate is on. TopologyAwareWorkloadScheduling counts
// only with GenericWorkload, which it depends on upstream.
func (g WorkloadGates) enabled(gate string) bool {
	switch gate {
	case GenericWorkloadGate:
		return g.GenericWorkload
	case TopologyAwareWorkloadSchedulingGate:
		return g.GenericWorkload && g.TopologyAwareWorkloadScheduling
	}
	return false
}

// allows says whether name is one of upstream's workload plugins, those
// its default profile gains with GenericWorkload (GangScheduling) and
// TopologyAwareWorkloadScheduling (TopologyPlacementGenerator,
// PodGroupPodsCount), and its gate is on.
func (g WorkloadGates) allows(name string) bool {
	gate, ok := offByDefaultGate(name)
	return ok && g.enabled(gate)
}

// WorkloadAware says whether a profile with plugins custom, merged onto
// defaults as NewFramework merges them, schedules pod groups: it enables,
// anywhere, a workload plugin whose gate is on. Upstream turns workload
// scheduling on for the whole scheduler with the gates; here a profile
// opts in by naming the plugins upstream's expanded default profile names
// with the gates on, and a profile that names none runs as without the
// gates.
func WorkloadAware(defaults, custom *configv1.Plugins, g WorkloadGates) bool {
	if defaults == nil {
		defaults = &configv1.Plugins{}
	}
	return workloadAware(mergePlugins(defaults.DeepCopy(), custom.DeepCopy()), g)
}

// workloadAware is WorkloadAware of merged plugins.
func workloadAware(merged *configv1.Plugins, g WorkloadGates) bool {
	if !g.GenericWorkload {
		return false
	}
	for name := range enabledNames(merged, extensionPoints) {
		if g.allows(name) {
			return true
		}
	}
	for _, pt := range podGroupPoints {
		for _, p := range pt.set(merged).Enabled {
			if g.allows(p.Name) {
				return true
			}
		}
	}
	return false
}

// WorkloadAware says whether the instance schedules pod groups: its
// profile enables a workload plugin whose gate is on (see WorkloadAware).
// Pods of an instance that does not are scheduled one at a time, whatever
// their scheduling group.
func (f *frameworkImpl) WorkloadAware() bool { return f.workloadAware }

// HasPlacementPlugins says whether the instance places pod groups by
// placement: it runs a PlacementGenerate or PlacementScore plugin, which
// only a workload-aware profile with TopologyAwareWorkloadScheduling on
// builds. Upstream places every group so when the gate is on; here a
// profile opts in by naming the gate's plugins.
func (f *frameworkImpl) HasPlacementPlugins() bool {
	return len(f.placementGeneratePlugins)+len(f.placementScorePlugins) > 0
}
