package runtime

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// TestWorkloadGates checks what the workload gates let a profile use: a
// workload plugin only with its gate on, whether or not a plugin of that
// name is registered; the pod-group points as without the gates unless the
// profile is workload-aware; and which instances are workload-aware.
func TestWorkloadGates(t *testing.T) {
	extra := map[string]framework.Plugin{
		"S1":                         &scorePlugin{name: "S1"},
		"GangScheduling":             &gangFilter{placementFeasiblePlugin{name: "GangScheduling"}},
		"TopologyPlacementGenerator": &filterOnly{name: "TopologyPlacementGenerator"},
		"PodGroupPodsCount":          &scorePlugin{name: "PodGroupPodsCount"},
		"DeferredPodScheduling":      &filterOnly{name: "DeferredPodScheduling"},
		"DefaultPreemption":          &filterOnly{name: "DefaultPreemption"},
		"DynamicResources":           &filterOnly{name: "DynamicResources"},
	}
	off := WorkloadGates{}
	generic := WorkloadGates{GenericWorkload: true}
	both := WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}
	gang := &configv1.Plugins{MultiPoint: enabled("GangScheduling")}
	tests := []struct {
		name      string
		gates     WorkloadGates
		plugins   *configv1.Plugins
		want      *ConfigError
		wantAware bool
	}{
		{
			name:    "GangScheduling with the gates off, registered or not",
			gates:   off,
			plugins: gang,
			want: &ConfigError{ExtensionPoint: MultiPoint, Plugin: "GangScheduling",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the GenericWorkload feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{name: "GangScheduling with GenericWorkload", gates: generic, plugins: gang, wantAware: true},
		{name: "GangScheduling at one point", gates: generic, plugins: &configv1.Plugins{Filter: enabled("GangScheduling")}, wantAware: true},
		{
			name:    "a topology plugin with GenericWorkload only",
			gates:   generic,
			plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling", "PodGroupPodsCount")},
			want: &ConfigError{ExtensionPoint: MultiPoint, Plugin: "PodGroupPodsCount",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the TopologyAwareWorkloadScheduling feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{
			name:    "TopologyAwareWorkloadScheduling without GenericWorkload counts for nothing",
			gates:   WorkloadGates{TopologyAwareWorkloadScheduling: true},
			plugins: &configv1.Plugins{MultiPoint: enabled("TopologyPlacementGenerator")},
			want: &ConfigError{ExtensionPoint: MultiPoint, Plugin: "TopologyPlacementGenerator",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the TopologyAwareWorkloadScheduling feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{name: "every workload plugin with both gates", gates: both, plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount")}, wantAware: true},
		{name: "a topology plugin alone makes a profile workload-aware", gates: both, plugins: &configv1.Plugins{MultiPoint: enabled("PodGroupPodsCount")}, wantAware: true},
		{
			name:    "DeferredPodScheduling stays refused",
			gates:   both,
			plugins: &configv1.Plugins{PreFilter: enabled("DeferredPodScheduling")},
			want: &ConfigError{ExtensionPoint: PreFilter, Plugin: "DeferredPodScheduling",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the InPlacePodVerticalScalingSchedulerPreemption feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{name: "a profile naming no workload plugin", gates: both},
		{
			name:    "a pod-group point in a profile that is not workload-aware",
			gates:   both,
			plugins: &configv1.Plugins{PodGroupPostFilter: enabled("S1")},
			want: &ConfigError{ExtensionPoint: "PodGroupPostFilter", Plugin: "S1",
				Reason: "the plugin does not implement PodGroupPostFilter; that point only runs for pod groups, in a profile that enables GangScheduling, TopologyPlacementGenerator or PodGroupPodsCount, and this one schedules pods one at a time"},
		},
		{
			name:    "a pod-group point whose gate is off in a workload-aware profile",
			gates:   generic,
			plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling"), PlacementScore: enabled("S1")},
			want: &ConfigError{ExtensionPoint: "PlacementScore", Plugin: "S1",
				Reason: "the plugin does not implement PlacementScore; that point only runs for pod groups, with the TopologyAwareWorkloadScheduling feature gate, off by default in Kubernetes 1.37, and pods are scheduled one at a time here"},
		},
		{
			name:    "a workload plugin at a pod-group point whose gate is off",
			gates:   generic,
			plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling"), PlacementScore: enabled("PodGroupPodsCount")},
			want: &ConfigError{ExtensionPoint: "PlacementScore", Plugin: "PodGroupPodsCount",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the TopologyAwareWorkloadScheduling feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{name: "what upstream runs at a pod-group point stays accepted, inert", gates: both, plugins: &configv1.Plugins{PodGroupPostFilter: enabled("DynamicResources", "DefaultPreemption")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			profile := &configv1.KubeSchedulerProfile{Plugins: tt.plugins}
			fw, err := NewFramework(t.Context(), baseRegistry(extra), profile, WithDefaultPlugins(baseDefaults()), WithWorkloadGates(tt.gates))
			var got *ConfigError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if fw == nil {
				return
			}
			defer func() { _ = fw.Close() }()
			if got := fw.WorkloadAware(); got != tt.wantAware {
				t.Errorf("instance WorkloadAware() = %t, want %t", got, tt.wantAware)
			}
			if got := WorkloadAware(baseDefaults(), tt.plugins, tt.gates); got != tt.wantAware {
				t.Errorf("WorkloadAware() = %t, want %t", got, tt.wantAware)
			}
			if tt.wantAware {
				return
			}
			// A profile that is not workload-aware is built as without
			// the gates.
			without, err := NewFramework(t.Context(), baseRegistry(extra), profile, WithDefaultPlugins(baseDefaults()))
			if err != nil {
				t.Fatalf("without the gates: %v", err)
			}
			defer func() { _ = without.Close() }()
			if diff := cmp.Diff(without.ListPlugins(), fw.ListPlugins()); diff != "" {
				t.Errorf("plugins with the gates (-without +with):\n%s", diff)
			}
		})
	}
}
