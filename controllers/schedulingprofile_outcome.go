package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// outcome is what one reconcile made of the current generation of a
// profile, live or shadow: built, or refused and why, and which generation
// serves (a shadow: runs) meanwhile. Reconcile and reconcileShadow both
// end in one, and writeOutcome alone turns it into conditions and writes
// them, so that the two paths cannot word the same state differently.
type outcome struct {
	// reason and msg say why the current generation was refused; reason
	// is "" when it was built.
	reason, msg string
	// claimRefused: what the profile claims was refused (a reserved or
	// taken schedulerName, a shadow beyond the limit), so nothing of it
	// serves or runs, and Active says claimActiveReason and msg.
	claimRefused      bool
	claimActiveReason string
	// last is the generation that serves or runs, 0 when none does.
	last int64
}

// builtOutcome is the outcome of a current generation that was built; last
// serves or runs.
func builtOutcome(last int64) outcome { return outcome{last: last} }

// refusedOutcome is the outcome of a current generation refused with reason and
// msg, last (0 for none) serving or running on.
func refusedOutcome(reason, msg string, last int64) outcome {
	return outcome{reason: reason, msg: msg, last: last}
}

// claimOutcome is the outcome of a profile whose claim was refused:
// nothing of it serves or runs.
func claimOutcome(reason, msg, activeReason string) outcome {
	return outcome{reason: reason, msg: msg, claimRefused: true, claimActiveReason: activeReason}
}

// setConditions sets Accepted, Active and the rollout conditions of sp,
// whose schedulerName (a shadow's: the one it shadows) is name, for out.
func (out outcome) setConditions(sp *schedulingv1alpha1.SchedulingProfile, name string) {
	shadow := sp.Spec.ShadowOf != nil
	gen := sp.Generation
	ro := rollout{schedulerName: name, shadow: shadow, reason: out.reason, msg: out.msg, serving: out.last}
	accepted := metav1.Condition{Status: metav1.ConditionFalse, Reason: out.reason, Message: out.msg}
	var active metav1.Condition
	switch {
	case out.claimRefused:
		ro.serving = 0
		active = metav1.Condition{Status: metav1.ConditionFalse, Reason: out.claimActiveReason, Message: out.msg}
	case out.reason == "" && shadow:
		accepted = metav1.Condition{Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonBuilt, Message: fmt.Sprintf("Generation %d is valid and built", gen)}
		active = metav1.Condition{Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonShadowing,
			Message: fmt.Sprintf("Generation %d evaluates placements of schedulerName %s in shadow; it places no pod", out.last, name)}
	case out.reason == "":
		accepted = metav1.Condition{Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonBuilt, Message: fmt.Sprintf("Generation %d is valid and built", gen)}
		active = metav1.Condition{Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonServing, Message: fmt.Sprintf("Generation %d serves schedulerName %s", out.last, name)}
	case out.last == 0 && shadow:
		active = metav1.Condition{Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonNotServing, Message: "No valid generation of this shadow has been built"}
	case out.last == 0:
		active = metav1.Condition{Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonNotServing, Message: "No valid generation of this profile has been built"}
	case shadow:
		active = metav1.Condition{Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonShadowing,
			Message: fmt.Sprintf("Generation %d, the last valid one, keeps evaluating placements of schedulerName %s in shadow; it places no pod", out.last, name)}
	default:
		active = metav1.Condition{Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonServing,
			Message: fmt.Sprintf("Generation %d, the last valid one, keeps serving schedulerName %s", out.last, name)}
	}
	for _, c := range []struct {
		typ  string
		cond metav1.Condition
	}{{schedulingv1alpha1.ProfileAccepted, accepted}, {schedulingv1alpha1.ProfileActive, active}} {
		c.cond.Type, c.cond.ObservedGeneration = c.typ, gen
		c.cond.Message = truncate(c.cond.Message, maxConditionMessage)
		meta.SetStatusCondition(&sp.Status.Conditions, c.cond)
	}
	setRolloutConditions(sp, ro)
}

// writeOutcome sets sp's conditions for out and writes sp's status over
// base, the status as last written. A running shadow's counts are written
// at a bounded rate (writeShadowStatus).
func (r *SchedulingProfileReconciler) writeOutcome(ctx context.Context, base, sp *schedulingv1alpha1.SchedulingProfile, name string, out outcome) (ctrl.Result, error) {
	out.setConditions(sp, name)
	if sp.Spec.ShadowOf != nil && out.last > 0 {
		return r.writeShadowStatus(ctx, base, sp)
	}
	return ctrl.Result{}, r.patchStatus(ctx, base, sp)
}
