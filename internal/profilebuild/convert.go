package profilebuild

import (
	configv1 "k8s.io/kube-scheduler/config/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// UpstreamProfile converts a SchedulingProfile's spec to the upstream
// KubeSchedulerProfile it mirrors, with the schedulerName resolved. The two
// types carry the same fields (api/v1alpha1's mirror test keeps them so).
func UpstreamProfile(schedulerName string, spec *schedulingv1alpha1.SchedulingProfileSpec) *configv1.KubeSchedulerProfile {
	out := &configv1.KubeSchedulerProfile{
		SchedulerName:            &schedulerName,
		PercentageOfNodesToScore: spec.PercentageOfNodesToScore,
	}
	if p := spec.Plugins; p != nil {
		out.Plugins = &configv1.Plugins{
			PreEnqueue:         pluginSet(p.PreEnqueue),
			QueueSort:          pluginSet(p.QueueSort),
			PreFilter:          pluginSet(p.PreFilter),
			Filter:             pluginSet(p.Filter),
			PostFilter:         pluginSet(p.PostFilter),
			PreScore:           pluginSet(p.PreScore),
			Score:              pluginSet(p.Score),
			Reserve:            pluginSet(p.Reserve),
			Permit:             pluginSet(p.Permit),
			PreBind:            pluginSet(p.PreBind),
			Bind:               pluginSet(p.Bind),
			PostBind:           pluginSet(p.PostBind),
			MultiPoint:         pluginSet(p.MultiPoint),
			PlacementGenerate:  pluginSet(p.PlacementGenerate),
			PlacementScore:     pluginSet(p.PlacementScore),
			PodGroupPostFilter: pluginSet(p.PodGroupPostFilter),
		}
	}
	for _, pc := range spec.PluginConfig {
		out.PluginConfig = append(out.PluginConfig, configv1.PluginConfig{Name: pc.Name, Args: *pc.Args.DeepCopy()})
	}
	return out
}

func pluginSet(in schedulingv1alpha1.PluginSet) configv1.PluginSet {
	return configv1.PluginSet{Enabled: pluginList(in.Enabled), Disabled: pluginList(in.Disabled)}
}

func pluginList(in []schedulingv1alpha1.Plugin) []configv1.Plugin {
	if in == nil {
		return nil
	}
	out := make([]configv1.Plugin, len(in))
	for i, p := range in {
		out[i] = configv1.Plugin{Name: p.Name, Weight: p.Weight}
	}
	return out
}
