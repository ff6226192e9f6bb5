package webhook

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// shadowLimit refuses a shadow beyond the operator's --max-shadows (max),
// counting the shadows profiles holds: the controller refuses it as well,
// for what reaches the cluster without the webhook or while the stored
// profiles were still being listed here.
func shadowLimit(ctx context.Context, profiles client.Reader, sp *schedulingv1alpha1.SchedulingProfile, max int) error {
	if sp.Spec.ShadowOf == nil {
		return nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := profiles.List(ctx, &list); err != nil {
		return fmt.Errorf("SchedulingProfile %s: cannot count the shadow profiles, so nothing was changed; try again: %w", sp.Name, err)
	}
	if msg := profilebuild.ShadowLimit(sp, list.Items, max); msg != "" {
		return fmt.Errorf("SchedulingProfile %s cannot be a shadow: %s", sp.Name, msg)
	}
	return nil
}
