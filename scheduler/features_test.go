package scheduler

import "testing"

// TestFeatureGate pins what --feature-gates accepts: OpportunisticBatching
// and component-base's AllAlpha and AllBeta, as kube-scheduler; any other
// name is refused.
func TestFeatureGate(t *testing.T) {
	tests := []struct {
		value       string
		wantErr     bool
		wantBatches bool
	}{
		{value: "", wantBatches: true},
		{value: "OpportunisticBatching=false"},
		{value: "AllBeta=false"},
		{value: "AllBeta=false,OpportunisticBatching=true", wantBatches: true},
		{value: "AllAlpha=true", wantBatches: true},
		{value: "GenericWorkload=true", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			fg := NewFeatureGate()
			if err := fg.Set(tt.value); (err != nil) != tt.wantErr {
				t.Fatalf("Set(%q) = %v, want error %t", tt.value, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got := fg.Enabled(OpportunisticBatching); got != tt.wantBatches {
				t.Errorf("OpportunisticBatching = %t, want %t", got, tt.wantBatches)
			}
		})
	}
}
