package controllers

import (
	"context"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// WithMaxShadows sets how many shadow profiles run at most; the oldest
// run, newer ones are refused in status. 0 means
// profilebuild.DefaultMaxShadows.
func WithMaxShadows(n int) ProfileOption {
	if n <= 0 {
		n = profilebuild.DefaultMaxShadows
	}
	return func(r *SchedulingProfileReconciler) { r.maxShadows = n }
}

// shadowLimit says why shadow sp may not run: as many older shadows as
// the operator allows run. The admission webhook refuses such a shadow
// too; this catches what reached the cluster without it.
func (r *SchedulingProfileReconciler) shadowLimit(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) (string, error) {
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.client.List(ctx, &list); err != nil {
		return "", err
	}
	max := r.maxShadows
	if max <= 0 {
		max = profilebuild.DefaultMaxShadows
	}
	return profilebuild.ShadowLimit(sp, list.Items, max), nil
}
