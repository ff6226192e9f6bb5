package operator

import (
	"flag"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"

	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// ValidationFlags are the operator's settings that decide whether a
// profile may serve (and the feature gates, which also set how the
// scheduling loop runs). The operator and `profile-scheduler validate` bind
// the same flags, so a profile checked in CI with the operator's arguments
// is judged as the operator judges it.
type ValidationFlags struct {
	ReservedSchedulerNames string
	// AllowedExtenderURLPrefixes and ExtenderMaxReplyBytes are what
	// profiles' extenders are allowed (extender.Policy).
	AllowedExtenderURLPrefixes string
	ExtenderMaxReplyBytes      int64
	// FeatureGates are the kube-scheduler gates people may set
	// (scheduler.NewFeatureGate); AddFlags makes them.
	FeatureGates featuregate.MutableFeatureGate
}

// AddFlags binds f to fs with the operator's defaults.
func (f *ValidationFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.ReservedSchedulerNames, "reserved-scheduler-names", corev1.DefaultSchedulerName, "Comma-separated schedulerNames no SchedulingProfile may serve, because another scheduler does.")
	fs.StringVar(&f.AllowedExtenderURLPrefixes, strings.TrimPrefix(extender.AllowedURLPrefixesFlag, "--"), "", "Comma-separated URL prefixes SchedulingProfiles' HTTP extenders may be called at (e.g. https://gpu-extender.kube-system.svc:8443/scheduler); a prefix without a port allows its scheme's default port, one whose host ends in :* (http://127.0.0.1:*) every port. Empty refuses every profile with extenders.")
	fs.Int64Var(&f.ExtenderMaxReplyBytes, "extender-max-reply-bytes", extender.DefaultMaxReplyBytes, "How many bytes an extender's reply may have beyond the size of the request it answers (at most 64 MiB, and no reply is read past 64 MiB); a larger reply is refused.")
	f.FeatureGates = scheduler.NewFeatureGate()
	fs.Func("feature-gates", "Comma-separated key=value pairs of kube-scheduler feature gates, as kube-scheduler's flag; only these may be set, with kube-scheduler 1.37's defaults and dependencies (TopologyAwareWorkloadScheduling needs GenericWorkload; AllBeta sets OpportunisticBatching and GenericWorkload, AllAlpha sets TopologyAwareWorkloadScheduling, unless they are given). GenericWorkload and TopologyAwareWorkloadScheduling let profiles enable the workload plugins (GangScheduling; TopologyPlacementGenerator, PodGroupPodsCount) and pod-group points; profiles that enable none are untouched. Any other name is refused and the other gates keep kube-scheduler 1.37's defaults:\n"+strings.Join(f.FeatureGates.KnownFeatures(), "\n"), f.FeatureGates.Set)
}

// WorkloadGates returns the workload gates the flags set; both off when
// AddFlags was not called.
func (f *ValidationFlags) WorkloadGates() runtime.WorkloadGates {
	if f.FeatureGates == nil {
		return runtime.WorkloadGates{}
	}
	return runtime.WorkloadGates{
		GenericWorkload:                 f.FeatureGates.Enabled(scheduler.GenericWorkload),
		TopologyAwareWorkloadScheduling: f.FeatureGates.Enabled(scheduler.TopologyAwareWorkloadScheduling),
	}
}

// OpportunisticBatching says whether the flags leave opportunistic
// batching on (it is, when AddFlags was not called).
func (f *ValidationFlags) OpportunisticBatching() bool {
	return f.FeatureGates == nil || f.FeatureGates.Enabled(scheduler.OpportunisticBatching)
}

// Reserved returns the reserved schedulerNames.
func (f *ValidationFlags) Reserved() []string {
	return SplitList(f.ReservedSchedulerNames)
}

// ExtenderPolicy returns the extender policy the flags set, or why they
// are wrong.
func (f *ValidationFlags) ExtenderPolicy() (extender.Policy, error) {
	if f.ExtenderMaxReplyBytes <= 0 || f.ExtenderMaxReplyBytes > extender.MaxReplyBytesCap {
		return extender.Policy{}, fmt.Errorf("--extender-max-reply-bytes must be between 1 and %d, got %d", extender.MaxReplyBytesCap, f.ExtenderMaxReplyBytes)
	}
	policy, err := extender.NewPolicy(SplitList(f.AllowedExtenderURLPrefixes), f.ExtenderMaxReplyBytes)
	if err != nil {
		return extender.Policy{}, fmt.Errorf("%s: %w", extender.AllowedURLPrefixesFlag, err)
	}
	return policy, nil
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(list string) []string {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names
}
