package profilebuild

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

func fitArgs(raw string) []schedulingv1alpha1.PluginConfig {
	return []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: runtime.RawExtension{Raw: []byte(raw)}}}
}

func weighted(w int32) *schedulingv1alpha1.Plugins {
	return &schedulingv1alpha1.Plugins{Score: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NodeResourcesFit", Weight: ptr.To(w)}}}}
}

func TestSpecHash(t *testing.T) {
	base := schedulingv1alpha1.SchedulingProfileSpec{
		Plugins:      weighted(2),
		PluginConfig: fitArgs(`{"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":1}]}}`),
	}
	baseHash := SpecHash(&base)
	if len(baseHash) != specHashLength {
		t.Fatalf("SpecHash = %q, want %d hex digits", baseHash, specHashLength)
	}
	for _, tc := range []struct {
		name string
		spec schedulingv1alpha1.SchedulingProfileSpec
		same bool
	}{{
		name: "args keys in another order, with spacing",
		spec: schedulingv1alpha1.SchedulingProfileSpec{
			Plugins:      weighted(2),
			PluginConfig: fitArgs(`{ "scoringStrategy": {"resources": [{"weight": 1, "name": "cpu"}], "type": "MostAllocated"} }`),
		},
		same: true,
	}, {
		name: "shadowOf and schedulerName set",
		spec: schedulingv1alpha1.SchedulingProfileSpec{
			SchedulerName: ptr.To("bin-packing"),
			ShadowOf:      ptr.To("bin-packing"),
			Plugins:       weighted(2),
			PluginConfig:  base.PluginConfig,
		},
		same: true,
	}, {
		name: "another weight",
		spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: weighted(3), PluginConfig: base.PluginConfig},
	}, {
		name: "another scoring strategy",
		spec: schedulingv1alpha1.SchedulingProfileSpec{
			Plugins:      weighted(2),
			PluginConfig: fitArgs(`{"scoringStrategy":{"type":"LeastAllocated","resources":[{"name":"cpu","weight":1}]}}`),
		},
	}, {
		name: "percentageOfNodesToScore set",
		spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: weighted(2), PluginConfig: base.PluginConfig, PercentageOfNodesToScore: ptr.To[int32](100)},
	}, {
		name: "args that are not JSON",
		spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: weighted(2), PluginConfig: fitArgs(`{"scoringStrategy":`)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.spec.DeepCopy()
			got := SpecHash(&tc.spec)
			if diff := cmp.Diff(before, &tc.spec); diff != "" {
				t.Errorf("SpecHash changed its argument (-before +after):\n%s", diff)
			}
			if (got == baseHash) != tc.same {
				t.Errorf("SpecHash = %s, base spec's %s; want equal: %t", got, baseHash, tc.same)
			}
			if again := SpecHash(&tc.spec); again != got {
				t.Errorf("SpecHash is not stable: %s, then %s", got, again)
			}
		})
	}
}
