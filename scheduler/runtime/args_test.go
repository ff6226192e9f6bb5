package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// customArgs is an out-of-tree args kind with its own defaults and validation.
type customArgs struct {
	metav1.TypeMeta `json:",inline"`
	Limit           int `json:"limit"`
}

func (c *customArgs) DeepCopyObject() k8sruntime.Object { out := *c; return &out }

func TestPluginArgs(t *testing.T) {
	capture := func(name string, got *k8sruntime.Object) Factory {
		return func(_ context.Context, args k8sruntime.Object, _ framework.Handle) (framework.Plugin, error) {
			*got = args
			return &argsPlugin{name: name}, nil
		}
	}
	customSpec := TypedArgs(func() *customArgs { return &customArgs{} },
		func(a *customArgs) {
			if a.Limit == 0 {
				a.Limit = 10
			}
		},
		func(a *customArgs) error {
			if a.Limit > 100 {
				return errors.New("limit must be at most 100")
			}
			return nil
		})
	fitDefaults := &configv1.NodeResourcesFitArgs{
		TypeMeta: typeMeta("NodeResourcesFitArgs"),
		ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated, Resources: []configv1.ResourceSpec{
			{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}},
	}
	tests := []struct {
		name    string
		plugin  string
		args    *k8sruntime.RawExtension
		want    k8sruntime.Object
		wantErr string
	}{
		{name: "upstream args defaulted when absent", plugin: "NodeResourcesFit", want: fitDefaults},
		{
			name: "upstream args decoded from YAML and defaulted", plugin: "NodeResourcesFit",
			args: &k8sruntime.RawExtension{Raw: []byte("scoringStrategy:\n  type: MostAllocated\n  resources:\n  - name: cpu\n")},
			want: &configv1.NodeResourcesFitArgs{TypeMeta: typeMeta("NodeResourcesFitArgs"), ScoringStrategy: &configv1.ScoringStrategy{
				Type: configv1.MostAllocated, Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 1}}}},
		},
		{
			name: "upstream args from JSON with kind", plugin: "InterPodAffinity",
			args: &k8sruntime.RawExtension{Raw: []byte(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"InterPodAffinityArgs","hardPodAffinityWeight":5}`)},
			want: &configv1.InterPodAffinityArgs{TypeMeta: typeMeta("InterPodAffinityArgs"), HardPodAffinityWeight: ptr.To[int32](5)},
		},
		{
			name: "DefaultPreemption defaults", plugin: "DefaultPreemption",
			want: &configv1.DefaultPreemptionArgs{TypeMeta: typeMeta("DefaultPreemptionArgs"), MinCandidateNodesPercentage: ptr.To[int32](10), MinCandidateNodesAbsolute: ptr.To[int32](100)},
		},
		{
			name: "unknown field is refused", plugin: "NodeResourcesFit",
			args:    &k8sruntime.RawExtension{Raw: []byte(`{"scoringStrategyy":{}}`)},
			wantErr: `PluginConfig plugin "NodeResourcesFit": decoding args: unknown field "scoringStrategyy"`,
		},
		{
			name: "wrong kind is refused", plugin: "NodeResourcesFit",
			args:    &k8sruntime.RawExtension{Raw: []byte(`{"kind":"NodeAffinityArgs"}`)},
			wantErr: `PluginConfig plugin "NodeResourcesFit": args have kind "NodeAffinityArgs", want "NodeResourcesFitArgs"`,
		},
		{name: "custom args defaulted", plugin: "Custom", want: &customArgs{Limit: 10}},
		{name: "custom args decoded", plugin: "Custom", args: &k8sruntime.RawExtension{Raw: []byte(`{"limit":7}`)}, want: &customArgs{Limit: 7}},
		{
			name: "custom args validated", plugin: "Custom", args: &k8sruntime.RawExtension{Raw: []byte(`{"limit":700}`)},
			wantErr: `PluginConfig plugin "Custom": invalid args: limit must be at most 100`,
		},
		{name: "plugin without args spec and no args gets nil", plugin: "Raw"},
		{
			name: "plugin without args spec gets raw JSON", plugin: "Raw", args: &k8sruntime.RawExtension{Raw: []byte("a: 1\n")},
			want: &k8sruntime.Unknown{Raw: []byte(`{"a":1}`), ContentType: k8sruntime.ContentTypeJSON},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got k8sruntime.Object
			r := baseRegistry(nil)
			must(r.Register("NodeResourcesFit", capture("NodeResourcesFit", &got), ArgsSpec{}))
			must(r.Register("InterPodAffinity", capture("InterPodAffinity", &got), ArgsSpec{}))
			must(r.Register("DefaultPreemption", capture("DefaultPreemption", &got), ArgsSpec{}))
			must(r.Register("Custom", capture("Custom", &got), customSpec))
			must(r.Register("Raw", capture("Raw", &got), ArgsSpec{}))
			profile := &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{Filter: enabled(tt.plugin)}}
			if tt.args != nil {
				profile.PluginConfig = []configv1.PluginConfig{{Name: tt.plugin, Args: *tt.args}}
			}
			fw, err := NewFramework(t.Context(), r, profile, WithDefaultPlugins(baseDefaults()))
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			defer func() { _ = fw.Close() }()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: configv1.SchemeGroupVersion.String(), Kind: kind}
}

func TestDecodeInto(t *testing.T) {
	var got struct{ A int }
	if err := DecodeInto(&k8sruntime.Unknown{Raw: []byte(`{"A":3}`)}, &got); err != nil {
		t.Fatal(err)
	}
	if got.A != 3 {
		t.Errorf("A = %d", got.A)
	}
	if err := DecodeInto(&configv1.NodeAffinityArgs{}, &got); err == nil {
		t.Error("DecodeInto of a typed object must fail")
	}
}
