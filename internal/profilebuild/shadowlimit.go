package profilebuild

import (
	"fmt"
	"strings"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// DefaultMaxShadows is how many shadow profiles an operator runs unless
// its --max-shadows says otherwise. Each runs up to 20 full evaluations a
// second on the leader, on the machine and with the parallelism the
// scheduling loop uses: ten at most cost, at that rate, about as much CPU
// as the loop placing 200 pods a second, which a trial of a change needs
// no more than.
const DefaultMaxShadows = 10

// ShadowLimit says why shadow sp may not run when max shadows may: as
// many older shadows as that exist among all (the stored profiles, sp
// among them or not). The oldest win, so that a shadow never stops for a
// newer one. It is empty when sp may run.
func ShadowLimit(sp *schedulingv1alpha1.SchedulingProfile, all []schedulingv1alpha1.SchedulingProfile, max int) string {
	if sp.Spec.ShadowOf == nil {
		return ""
	}
	var older []string
	for i := range all {
		other := &all[i]
		if other.Name == sp.Name || other.Spec.ShadowOf == nil || !other.DeletionTimestamp.IsZero() {
			continue
		}
		// A profile being created is newer than every stored one.
		if sp.CreationTimestamp.IsZero() || Older(other, sp) {
			older = append(older, other.Name)
		}
	}
	if len(older) < max {
		return ""
	}
	return fmt.Sprintf("the operator runs at most %d shadow profiles (its --max-shadows), and %d older ones exist: %s; delete one, or ask the operator's admin to raise --max-shadows",
		max, len(older), strings.Join(older, ", "))
}
