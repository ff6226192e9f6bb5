package profilebuild

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/randfill"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// TestUpstreamProfileCopiesEveryField compares the field-by-field conversion
// with the JSON form both types share, on random specs.
func TestUpstreamProfileCopiesEveryField(t *testing.T) {
	f := randfill.New().NilChance(0.2).NumElements(0, 3).Funcs(
		func(r *runtime.RawExtension, c randfill.Continue) {
			r.Raw = fmt.Appendf(nil, `{"value":%d}`, c.Int63())
		},
	)
	for i := range 200 {
		var spec schedulingv1alpha1.SchedulingProfileSpec
		f.Fill(&spec)
		spec.SchedulerName = nil

		data, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var want configv1.KubeSchedulerProfile
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		name := "resolved"
		want.SchedulerName = &name

		got := UpstreamProfile(name, &spec)
		if diff := cmp.Diff(&want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d (-want +got):\n%s", i, diff)
		}
	}
}
