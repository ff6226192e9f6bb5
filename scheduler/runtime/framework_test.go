package runtime

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

func TestRegistry(t *testing.T) {
	r := Registry{}
	if err := r.Register("A", fixed(&filterOnly{name: "A"}), ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		op      func() error
		wantErr string
	}{
		{name: "duplicate", op: func() error { return r.Register("A", fixed(&filterOnly{name: "A"}), ArgsSpec{}) }, wantErr: "a plugin named A already exists"},
		{name: "nil factory", op: func() error { return r.Register("B", nil, ArgsSpec{}) }, wantErr: "plugin B: nil factory"},
		{name: "merge duplicate", op: func() error { return r.Merge(Registry{"A": {}}) }, wantErr: "a plugin named A already exists"},
		{name: "merge new", op: func() error { return r.Merge(Registry{"C": {Factory: fixed(&filterOnly{name: "C"})}}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
	if r["NodeResourcesFit"].Args.New != nil {
		t.Error("unexpected entry")
	}
	must(r.Register("NodeResourcesFit", fixed(&filterOnly{name: "NodeResourcesFit"}), ArgsSpec{}))
	if _, ok := r["NodeResourcesFit"].Args.New().(*configv1.NodeResourcesFitArgs); !ok {
		t.Error("an upstream plugin registered without ArgsSpec must get upstream's args type")
	}
}

func TestNewFrameworkResolvesProfile(t *testing.T) {
	extra := map[string]framework.Plugin{
		"F1":    &filterPlugin{name: "F1"},
		"F2":    &filterPlugin{name: "F2"},
		"S1":    &scorePlugin{name: "S1"},
		"S2":    &scorePlugin{name: "S2"},
		"Only":  &filterOnly{name: "Only"},
		"Sort2": &queueSortPlugin{name: "Sort2"},
	}
	defaults := &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{
		{Name: "Sort"}, {Name: "F1"}, weighted("S1", 3), {Name: "Binder"},
	}}}
	tests := []struct {
		name    string
		plugins *configv1.Plugins
		want    *configv1.Plugins
	}{
		{
			name: "a profile naming no plugins gets the defaults",
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1"),
				Filter:    enabled("F1"),
				PreScore:  enabled("S1"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S1", 3)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name:    "multiPoint plugins are expanded after defaults, unset weight is 1",
			plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "F2"}, {Name: "S2"}}}},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1", "F2"),
				Filter:    enabled("F1", "F2"),
				PreScore:  enabled("S1", "S2"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S1", 3), weighted("S2", 1)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name:    "re-enabling a default in multiPoint overrides its weight in place",
			plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S2", 2), weighted("S1", 7)}}},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1"),
				Filter:    enabled("F1"),
				PreScore:  enabled("S1", "S2"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S1", 7), weighted("S2", 2)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name: "a weight at Score wins over multiPoint and the plugin moves first",
			plugins: &configv1.Plugins{
				MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "S2"}}},
				Score:      configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S2", 5)}},
			},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1"),
				Filter:    enabled("F1"),
				PreScore:  enabled("S1", "S2"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S2", 5), weighted("S1", 3)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name:    "disabled at one point, kept at the others",
			plugins: &configv1.Plugins{Filter: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "F1"}}}},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1"),
				PreScore:  enabled("S1"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S1", 3)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name: "'*' disables every default at that point; enabled ones keep configured order",
			plugins: &configv1.Plugins{Filter: configv1.PluginSet{
				Enabled:  []configv1.Plugin{{Name: "Only"}, {Name: "F2"}},
				Disabled: []configv1.Plugin{{Name: "*"}},
			}},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort"),
				PreFilter: enabled("F1"),
				Filter:    enabled("Only", "F2"),
				PreScore:  enabled("S1"),
				Score:     configv1.PluginSet{Enabled: []configv1.Plugin{weighted("S1", 3)}},
				Bind:      enabled("Binder"),
			},
		},
		{
			name: "'*' in multiPoint disabled drops every default",
			plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
				Enabled:  []configv1.Plugin{{Name: "Sort2"}, {Name: "Binder"}},
				Disabled: []configv1.Plugin{{Name: "*"}},
			}},
			want: &configv1.Plugins{
				QueueSort: enabled("Sort2"),
				Bind:      enabled("Binder"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := NewFramework(t.Context(), baseRegistry(extra), &configv1.KubeSchedulerProfile{Plugins: tt.plugins}, WithDefaultPlugins(defaults))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			if diff := cmp.Diff(tt.want, fw.ListPlugins()); diff != "" {
				t.Errorf("ListPlugins (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewFrameworkRefusesProfile(t *testing.T) {
	extra := map[string]framework.Plugin{
		"F1":    &filterPlugin{name: "F1"},
		"Only":  &filterOnly{name: "Only"},
		"S1":    &scorePlugin{name: "S1"},
		"S2":    &scorePlugin{name: "S2"},
		"Sort2": &queueSortPlugin{name: "Sort2"},
	}
	tests := []struct {
		name    string
		profile configv1.KubeSchedulerProfile
		want    *ConfigError
	}{
		{
			name:    "unknown plugin at a point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Filter: enabled("Nope")}},
			want:    &ConfigError{ExtensionPoint: Filter, Plugin: "Nope", Reason: "no such plugin is registered"},
		},
		{
			name:    "plugin upstream does not run at a pod-group point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{PlacementScore: enabled("S1")}},
			want: &ConfigError{ExtensionPoint: "PlacementScore", Plugin: "S1",
				Reason: "the plugin does not implement PlacementScore; that point only runs for pod groups, with the TopologyAwareWorkloadScheduling feature gate, off by default in Kubernetes 1.37, and pods are scheduled one at a time here"},
		},
		{
			name:    "plugin at podGroupPostFilter names GenericWorkload",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{PodGroupPostFilter: enabled("S1")}},
			want: &ConfigError{ExtensionPoint: "PodGroupPostFilter", Plugin: "S1",
				Reason: "the plugin does not implement PodGroupPostFilter; that point only runs for pod groups, with the GenericWorkload feature gate, off by default in Kubernetes 1.37, and pods are scheduled one at a time here"},
		},
		{
			name:    "unknown plugin at a pod-group point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{PodGroupPostFilter: enabled("DynamicResources")}},
			want:    &ConfigError{ExtensionPoint: "PodGroupPostFilter", Plugin: "DynamicResources", Reason: "no such plugin is registered"},
		},
		{
			name:    "upstream plugin behind a gate off by default",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling")}},
			want: &ConfigError{ExtensionPoint: MultiPoint, Plugin: "GangScheduling",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the GenericWorkload feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{
			name:    "gated upstream plugin at a point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{PreFilter: enabled("DeferredPodScheduling")}},
			want: &ConfigError{ExtensionPoint: PreFilter, Plugin: "DeferredPodScheduling",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the InPlacePodVerticalScalingSchedulerPreemption feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{
			name:    "gated upstream plugin at a pod-group point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{PlacementScore: enabled("PodGroupPodsCount")}},
			want: &ConfigError{ExtensionPoint: "PlacementScore", Plugin: "PodGroupPodsCount",
				Reason: "kube-scheduler 1.37.2 uses this plugin only with the TopologyAwareWorkloadScheduling feature gate, off by default; profile-scheduler refuses it rather than load it inert"},
		},
		{
			name:    "unknown plugin in multiPoint",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: enabled("Nope")}},
			want:    &ConfigError{ExtensionPoint: MultiPoint, Plugin: "Nope", Reason: "no such plugin is registered"},
		},
		{
			name:    "plugin at a point it does not implement",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Score: enabled("Only")}},
			want:    &ConfigError{ExtensionPoint: Score, Plugin: "Only", Reason: "the plugin does not implement Score"},
		},
		{
			name:    "plugin enabled twice at one point",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Filter: enabled("Only", "Only")}},
			want:    &ConfigError{ExtensionPoint: Filter, Plugin: "Only", Reason: "enabled more than once"},
		},
		{
			name:    "plugin enabled twice in multiPoint",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: enabled("F1", "F1")}},
			want:    &ConfigError{ExtensionPoint: MultiPoint, Plugin: "F1", Reason: "enabled more than once"},
		},
		{
			name:    "two QueueSort plugins",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{QueueSort: enabled("Sort2")}},
			want:    &ConfigError{ExtensionPoint: QueueSort, Plugin: "Sort, Sort2", Reason: "exactly one QueueSort plugin is required, got 2"},
		},
		{
			name:    "no QueueSort plugin",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{QueueSort: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "*"}}}}},
			want:    &ConfigError{ExtensionPoint: QueueSort, Reason: "exactly one QueueSort plugin is required, got 0"},
		},
		{
			name:    "no Bind plugin",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Bind: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "Binder"}}}}},
			want:    &ConfigError{ExtensionPoint: Bind, Reason: "at least one Bind plugin is required"},
		},
		{
			name: "args for a plugin that is not enabled",
			profile: configv1.KubeSchedulerProfile{PluginConfig: []configv1.PluginConfig{
				{Name: "Only", Args: k8sruntime.RawExtension{Raw: []byte(`{}`)}}}},
			want: &ConfigError{ExtensionPoint: "PluginConfig", Plugin: "Only", Reason: "args given for a plugin that is not enabled at any extension point"},
		},
		{
			name: "args given twice",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Filter: enabled("Only")}, PluginConfig: []configv1.PluginConfig{
				{Name: "Only"}, {Name: "Only"}}},
			want: &ConfigError{ExtensionPoint: "PluginConfig", Plugin: "Only", Reason: "args given more than once"},
		},
		{
			name: "the largest weights are accepted",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Score: configv1.PluginSet{Enabled: []configv1.Plugin{
				weighted("S1", math.MaxInt32), weighted("S2", math.MaxInt32)}}}},
		},
		{
			name: "negative weight",
			profile: configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Score: configv1.PluginSet{Enabled: []configv1.Plugin{
				weighted("S1", -1)}}}},
			want: &ConfigError{ExtensionPoint: Score, Plugin: "S1", Reason: "weight -1 is negative"},
		},
		{
			name:    "percentageOfNodesToScore out of range",
			profile: configv1.KubeSchedulerProfile{PercentageOfNodesToScore: ptr.To[int32](101)},
			want:    &ConfigError{Reason: "percentageOfNodesToScore 101 is not in [0, 100]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := NewFramework(t.Context(), baseRegistry(extra), &tt.profile, WithDefaultPlugins(baseDefaults()))
			if fw != nil {
				defer func() { _ = fw.Close() }()
			}
			var got *ConfigError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewFrameworkRefusesOverflowingWeights(t *testing.T) {
	// int32 weights need tens of millions of plugins to overflow int64, so
	// the bound is lowered to exercise the rule with three plugins.
	old := maxTotalScore
	maxTotalScore = 250
	defer func() { maxTotalScore = old }()
	extra := map[string]framework.Plugin{"S1": &scorePlugin{name: "S1"}, "S2": &scorePlugin{name: "S2"}, "S3": &scorePlugin{name: "S3"}}
	profile := &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: enabled("S1", "S2")}}
	fw, err := NewFramework(t.Context(), baseRegistry(extra), profile, WithDefaultPlugins(baseDefaults()))
	if err != nil {
		t.Fatalf("2 x 100 fits in 250: %v", err)
	}
	_ = fw.Close()
	profile.Plugins.MultiPoint = enabled("S1", "S2", "S3")
	_, err = NewFramework(t.Context(), baseRegistry(extra), profile, WithDefaultPlugins(baseDefaults()))
	want := `Score plugin "S3": weight 1 makes the total score of Score plugins overflow int64`
	if diff := cmp.Diff(want, errString(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestNewFrameworkFactoryErrorNamesPlugin(t *testing.T) {
	r := baseRegistry(nil)
	must(r.Register("Broken", func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return nil, errors.New("boom")
	}, ArgsSpec{}))
	_, err := NewFramework(t.Context(), r, &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: enabled("Broken")}}, WithDefaultPlugins(baseDefaults()))
	if diff := cmp.Diff(`plugin "Broken": initializing: boom`, errString(err)); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
