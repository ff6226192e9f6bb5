package profilebuild

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

func TestShadowLimit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	profile := func(name string, age int, shadow bool) schedulingv1alpha1.SchedulingProfile {
		sp := schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if age >= 0 {
			sp.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))
		}
		if shadow {
			sp.Spec.ShadowOf = ptr.To("live")
		}
		return sp
	}
	deleting := profile("gone", 0, true)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	stored := []schedulingv1alpha1.SchedulingProfile{profile("live", 0, false), profile("a", 1, true), profile("b", 2, true), profile("c", 3, true), deleting}
	for _, tc := range []struct {
		name     string
		sp       schedulingv1alpha1.SchedulingProfile
		max      int
		refusing string
	}{
		{name: "not a shadow", sp: profile("new", -1, false), max: 1},
		{name: "a new shadow under the limit", sp: profile("new", -1, true), max: 4},
		{name: "a new shadow at the limit", sp: profile("new", -1, true), max: 3, refusing: "at most 3 shadow profiles (its --max-shadows), and 3 older ones exist: a, b, c"},
		{name: "the oldest shadows run", sp: profile("b", 2, true), max: 2},
		{name: "a newer stored shadow beyond the limit", sp: profile("c", 3, true), max: 2, refusing: "and 2 older ones exist: a, b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ShadowLimit(&tc.sp, stored, tc.max)
			if (got == "") != (tc.refusing == "") || !strings.Contains(got, tc.refusing) {
				t.Errorf("ShadowLimit = %q, want it to say %q", got, tc.refusing)
			}
		})
	}
}
