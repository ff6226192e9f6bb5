package v1alpha1

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/randfill"
)

// TestSpecMirrorsUpstreamProfile checks that SchedulingProfileSpec carries
// every field of upstream's KubeSchedulerProfile: random upstream profiles go
// through the project's type and come back unchanged.
func TestSpecMirrorsUpstreamProfile(t *testing.T) {
	f := randfill.New().NilChance(0.2).NumElements(0, 3).Funcs(
		func(r *runtime.RawExtension, c randfill.Continue) {
			// Args are JSON objects on the wire.
			r.Raw = fmt.Appendf(nil, `{"kind":"TestArgs","value":%d}`, c.Int63())
		},
	)
	for i := range 200 {
		var want configv1.KubeSchedulerProfile
		f.Fill(&want)

		data, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var spec SchedulingProfileSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			t.Fatalf("round %d: upstream profile does not decode into SchedulingProfileSpec: %v", i, err)
		}
		data, err = json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var got configv1.KubeSchedulerProfile
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		// An empty list and no list are the same on the wire (omitempty).
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: profile changed going through SchedulingProfileSpec (-want +got):\n%s", i, diff)
		}
	}
}
