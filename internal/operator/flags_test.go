package operator

import (
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestValidationFlags(t *testing.T) {
	for _, tt := range []struct {
		name         string
		args         []string
		wantReserved []string
		wantErr      string
	}{
		{name: "defaults", wantReserved: []string{"default-scheduler"}},
		{name: "names", args: []string{"--reserved-scheduler-names= a, ,b"}, wantReserved: []string{"a", "b"}},
		{name: "none reserved", args: []string{"--reserved-scheduler-names="}},
		{name: "allowed prefixes", args: []string{"--allowed-extender-url-prefixes=https://a.example,http://127.0.0.1:*"}, wantReserved: []string{"default-scheduler"}},
		{name: "a bad prefix", args: []string{"--allowed-extender-url-prefixes=a.example"}, wantReserved: []string{"default-scheduler"},
			wantErr: `--allowed-extender-url-prefixes: allowed extender URL prefix "a.example": must start with http:// or https://`},
		{name: "no reply", args: []string{"--extender-max-reply-bytes=0"}, wantReserved: []string{"default-scheduler"},
			wantErr: "--extender-max-reply-bytes must be between 1 and 67108864, got 0"},
		{name: "a reply too large", args: []string{"--extender-max-reply-bytes=67108865"}, wantReserved: []string{"default-scheduler"},
			wantErr: "--extender-max-reply-bytes must be between 1 and 67108864, got 67108865"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var f ValidationFlags
			f.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantReserved, f.Reserved()); diff != "" {
				t.Errorf("reserved (-want +got):\n%s", diff)
			}
			_, err := f.ExtenderPolicy()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("ExtenderPolicy() error %q, want %q", gotErr, tt.wantErr)
			}
		})
	}
}

// TestFeatureGateFlags checks that the operator and the subcommands read
// --feature-gates alike.
func TestFeatureGateFlags(t *testing.T) {
	for _, tt := range []struct {
		name         string
		args         []string
		wantGates    runtime.WorkloadGates
		wantBatching bool
		wantErr      bool
	}{
		{name: "defaults", wantBatching: true},
		{name: "not bound", args: nil, wantBatching: true},
		{name: "GenericWorkload", args: []string{"--feature-gates=GenericWorkload=true"}, wantGates: runtime.WorkloadGates{GenericWorkload: true}, wantBatching: true},
		{name: "both", args: []string{"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,OpportunisticBatching=false"},
			wantGates: runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}},
		{name: "dependency missing", args: []string{"--feature-gates=TopologyAwareWorkloadScheduling=true"}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f ValidationFlags
			if tt.name != "not bound" {
				fs := flag.NewFlagSet("test", flag.ContinueOnError)
				f.AddFlags(fs)
				if err := fs.Parse(tt.args); (err != nil) != tt.wantErr {
					t.Fatalf("Parse() = %v, want error %t", err, tt.wantErr)
				}
				if tt.wantErr {
					return
				}
			}
			if diff := cmp.Diff(tt.wantGates, f.WorkloadGates()); diff != "" {
				t.Errorf("workload gates (-want +got):\n%s", diff)
			}
			if got := f.OpportunisticBatching(); got != tt.wantBatching {
				t.Errorf("OpportunisticBatching() = %t, want %t", got, tt.wantBatching)
			}
		})
	}
}
