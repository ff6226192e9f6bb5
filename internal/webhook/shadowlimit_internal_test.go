package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

func TestShadowLimit(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := schedulingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	shadow := func(name string) *schedulingv1alpha1.SchedulingProfile {
		return &schedulingv1alpha1.SchedulingProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
			Spec:       schedulingv1alpha1.SchedulingProfileSpec{ShadowOf: ptr.To("live")},
		}
	}
	profiles := fake.NewClientBuilder().WithScheme(scheme).WithObjects(shadow("a"), shadow("b")).Build()
	newShadow := shadow("c")
	newShadow.CreationTimestamp = metav1.Time{}
	for _, tc := range []struct {
		name string
		sp   *schedulingv1alpha1.SchedulingProfile
		max  int
		want string
	}{
		{name: "under the limit", sp: newShadow, max: 3},
		{name: "at the limit", sp: newShadow, max: 2, want: "SchedulingProfile c cannot be a shadow: the operator runs at most 2 shadow profiles (its --max-shadows), and 2 older ones exist: a, b; delete one, or ask the operator's admin to raise --max-shadows"},
		{name: "a stored shadow among the oldest", sp: shadow("a"), max: 1},
		{name: "not a shadow", sp: &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, max: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := shadowLimit(context.Background(), profiles, tc.sp, tc.max); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}
