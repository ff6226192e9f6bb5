package controllers

import (
	configv1 "k8s.io/kube-scheduler/config/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// resolvedPlugins turns what an instance runs into the status form.
func resolvedPlugins(p *configv1.Plugins) *schedulingv1alpha1.ResolvedPlugins {
	if p == nil {
		return nil
	}
	return &schedulingv1alpha1.ResolvedPlugins{
		PreEnqueue: resolved(p.PreEnqueue, false),
		QueueSort:  resolved(p.QueueSort, false),
		PreFilter:  resolved(p.PreFilter, false),
		Filter:     resolved(p.Filter, false),
		PostFilter: resolved(p.PostFilter, false),
		PreScore:   resolved(p.PreScore, false),
		Score:      resolved(p.Score, true),
		Reserve:    resolved(p.Reserve, false),
		Permit:     resolved(p.Permit, false),
		PreBind:    resolved(p.PreBind, false),
		Bind:       resolved(p.Bind, false),
		PostBind:   resolved(p.PostBind, false),
	}
}

func resolved(set configv1.PluginSet, weighted bool) []schedulingv1alpha1.ResolvedPlugin {
	if len(set.Enabled) == 0 {
		return nil
	}
	out := make([]schedulingv1alpha1.ResolvedPlugin, len(set.Enabled))
	for i, p := range set.Enabled {
		out[i].Name = p.Name
		if weighted {
			out[i].Weight = 1
			if p.Weight != nil {
				out[i].Weight = *p.Weight
			}
		}
	}
	return out
}
