package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/featuregate"
)

// TestFeatureGate pins what --feature-gates accepts: OpportunisticBatching,
// GenericWorkload and TopologyAwareWorkloadScheduling at upstream's stages,
// defaults and dependency, and component-base's AllAlpha and AllBeta, as
// kube-scheduler; any other name is refused.
func TestFeatureGate(t *testing.T) {
	type gates struct{ Batching, Generic, Topology bool }
	tests := []struct {
		value   string
		wantErr string
		want    gates
	}{
		{value: "", want: gates{Batching: true}},
		{value: "OpportunisticBatching=false"},
		{value: "AllBeta=false"},
		{value: "AllBeta=false,OpportunisticBatching=true", want: gates{Batching: true}},
		{value: "AllBeta=true", want: gates{Batching: true, Generic: true}},
		{value: "GenericWorkload=true", want: gates{Batching: true, Generic: true}},
		{value: "GenericWorkload=true,TopologyAwareWorkloadScheduling=true", want: gates{Batching: true, Generic: true, Topology: true}},
		{value: "AllAlpha=true,AllBeta=true", want: gates{Batching: true, Generic: true, Topology: true}},
		{value: "AllAlpha=true,GenericWorkload=true,TopologyAwareWorkloadScheduling=false", want: gates{Batching: true, Generic: true}},
		{value: "TopologyAwareWorkloadScheduling=true", wantErr: "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"},
		{value: "AllAlpha=true", wantErr: "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"},
		{value: "GenericWorkload=false,TopologyAwareWorkloadScheduling=true", wantErr: "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"},
		{value: "CompositePodGroup=true", wantErr: "unrecognized feature gate: CompositePodGroup"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			fg := NewFeatureGate()
			err := fg.Set(tt.value)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Fatalf("Set(%q) error %q, want %q", tt.value, gotErr, tt.wantErr)
			}
			if tt.wantErr != "" {
				return
			}
			got := gates{fg.Enabled(OpportunisticBatching), fg.Enabled(GenericWorkload), fg.Enabled(TopologyAwareWorkloadScheduling)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("gates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFeatureGateStages pins upstream's stages and defaults in 1.37.2.
func TestFeatureGateStages(t *testing.T) {
	want := map[featuregate.Feature]featuregate.FeatureSpec{
		OpportunisticBatching:           {Default: true, PreRelease: featuregate.Beta},
		GenericWorkload:                 {Default: false, PreRelease: featuregate.Beta},
		TopologyAwareWorkloadScheduling: {Default: false, PreRelease: featuregate.Alpha},
	}
	all := NewFeatureGate().GetAll()
	got := map[featuregate.Feature]featuregate.FeatureSpec{}
	for name := range want {
		spec := all[name]
		got[name] = featuregate.FeatureSpec{Default: spec.Default, PreRelease: spec.PreRelease}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gates (-want +got):\n%s", diff)
	}
}
