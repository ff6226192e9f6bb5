package controllers

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// rollout is where the current generation of a profile stands, as GitOps
// tools must see it.
type rollout struct {
	// schedulerName is the name the profile claims.
	schedulerName string
	// building: the current generation's instance is being built.
	building bool
	// reason and msg say why the current generation cannot serve until
	// the spec changes (a Stalled reason); reason is "" when it can.
	reason, msg string
	// serving is the generation of the profile that serves meanwhile, 0
	// when none does.
	serving int64
	// shadow: the profile runs in shadow of schedulerName (spec.shadowOf)
	// rather than serving it; Ready then means the current generation
	// runs as the shadow.
	shadow bool
}

// serves says what generation gen of a profile does for its schedulerName.
func (r rollout) serves(gen int64) string {
	if r.shadow {
		return fmt.Sprintf("generation %d evaluates placements of schedulerName %s in shadow", gen, r.schedulerName)
	}
	return fmt.Sprintf("generation %d serves schedulerName %s", gen, r.schedulerName)
}

// setRolloutConditions sets Ready, Reconciling and Stalled, the conditions
// kstatus reads, on sp for its current generation. kstatus decides in this
// order: status.observedGeneration behind metadata.generation is
// InProgress; Reconciling=True is InProgress; Stalled=True is Failed;
// then Ready says Current (True) or InProgress (False); with none of them
// an object is Current. So Reconciling and Stalled are present only when
// True (abnormal-true, as kstatus asks), and Ready is always there, True
// only when the current generation serves: a generation that cannot
// serve is never reported Current because an older one still does.
func setRolloutConditions(sp *schedulingv1alpha1.SchedulingProfile, r rollout) {
	set := func(condType string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: msg, ObservedGeneration: sp.Generation,
		})
	}
	switch {
	case r.building:
		msg := fmt.Sprintf("Generation %d is being built; ", sp.Generation)
		if r.serving != 0 {
			msg += fmt.Sprintf("generation %d serves schedulerName %s until it is swapped in", r.serving, r.schedulerName)
		} else {
			msg += fmt.Sprintf("no generation of this profile serves schedulerName %s yet", r.schedulerName)
		}
		set(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, schedulingv1alpha1.ReasonBuilding, msg)
		set(schedulingv1alpha1.ProfileReconciling, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilding, msg)
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileStalled)
	case r.reason != "":
		tail := "; no generation of this profile serves"
		switch {
		case r.serving != 0 && r.shadow:
			tail = fmt.Sprintf("; generation %d, the last valid one, keeps evaluating placements of schedulerName %s in shadow", r.serving, r.schedulerName)
		case r.serving != 0:
			tail = fmt.Sprintf("; generation %d, the last valid one, keeps serving schedulerName %s", r.serving, r.schedulerName)
		case r.shadow:
			tail = "; no generation of this shadow runs"
		}
		// The tail says what serves: cut the reason's message, never it.
		msg := truncate(r.msg, maxConditionMessage-len(tail)) + tail
		set(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, r.reason, msg)
		set(schedulingv1alpha1.ProfileStalled, metav1.ConditionTrue, r.reason, msg)
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileReconciling)
	default:
		reason := schedulingv1alpha1.ReasonServing
		if r.shadow {
			reason = schedulingv1alpha1.ReasonShadowing
		}
		msg := r.serves(sp.Generation)
		set(schedulingv1alpha1.ProfileReady, metav1.ConditionTrue, reason, strings.ToUpper(msg[:1])+msg[1:])
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileReconciling)
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileStalled)
	}
}
