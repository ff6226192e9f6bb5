// Package approval is the approval domain: what holds a pod at Permit, what
// a person's decision on a WaitingPod is for, and what it releases. The
// operator's WaitingPod controllers, the ManualApproval decision reader and
// the kubectl-approve and kubectl-reject plugins all decide these questions
// here, so that what the operator shows, what it does and what the CLI
// refuses cannot drift apart.
//
// It holds rules, not machinery: no reconciler, cache or scheduling
// framework. It depends on the API types only, so the kubectl plugins link
// it without the scheduler.
package approval

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// Names of the Permit plugins the approval domain speaks of. They are the
// plugins' Name constants; this package does not import the plugins, which
// would link the scheduling framework into the kubectl plugins.
const (
	// ManualApproval holds pods until a person decides.
	ManualApproval = "ManualApproval"
	// Coscheduling holds a gang's members until its quorum has nodes.
	Coscheduling = "Coscheduling"
)

// OtherPlugins are the pending Permit plugins other than ManualApproval,
// sorted: the holds a decision never ends.
func OtherPlugins(pending []string) []string {
	var others []string
	for _, name := range pending {
		if name != ManualApproval {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	return others
}

// AfterApproval splits the Permit plugins other than ManualApproval in
// pending: gangs are those that hold a gang's members until the gang is
// complete and then release them together (Coscheduling, GangScheduling),
// so an approved member goes on with its gang without anyone's doing;
// others are the rest, whose holds an approval does not end and that
// nothing here says will ever end.
func AfterApproval(pending []string) (gangs, others []string) {
	for _, name := range OtherPlugins(pending) {
		if name == Coscheduling || name == GangScheduling {
			gangs = append(gangs, name)
		} else {
			others = append(others, name)
		}
	}
	return gangs, others
}

// HeldByManualApproval reports whether ManualApproval is among the pending
// Permit plugins: only then can a decision release the pod.
func HeldByManualApproval(pending []string) bool {
	return slices.Contains(pending, ManualApproval)
}

// DecidableCondition says whether a decision can end a hold by the pending
// Permit plugins: only ManualApproval's hold is a person's to end.
func DecidableCondition(pending []string) metav1.Condition {
	others := OtherPlugins(pending)
	if !HeldByManualApproval(pending) {
		return metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: fmt.Sprintf("Held by %s, not by %s; a decision does not release the pod from them", strings.Join(others, ", "), ManualApproval),
		}
	}
	msg := fmt.Sprintf("%s holds the pod until a decision", ManualApproval)
	if len(others) > 0 {
		msg += fmt.Sprintf("; it is also held by %s, which a decision does not release", strings.Join(others, ", "))
	}
	return metav1.Condition{
		Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision, Message: msg,
	}
}

// PendingPlugins are the Permit plugins holding the pod of wp, as the
// operator observed.
func PendingPlugins(wp *schedulingv1alpha1.WaitingPod) []string {
	names := make([]string, 0, len(wp.Status.PendingPlugins))
	for _, p := range wp.Status.PendingPlugins {
		names = append(names, p.Name)
	}
	return names
}

// HeldByOthersOnly reports, from what the operator observed (the Decidable
// condition it wrote), whether only Permit plugins other than
// ManualApproval hold the pod of wp, and which.
func HeldByOthersOnly(wp *schedulingv1alpha1.WaitingPod) ([]string, bool) {
	c := meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil, false
	}
	return OtherPlugins(PendingPlugins(wp)), true
}

// PodUIDOf is the pod a WaitingPod is about, to tell a leftover of an
// earlier pod of the same name from the current one: the pod its spec
// names, else the one the scheduler held. Decisions never use the fallback:
// a decision applies only to the pod its spec.podUID names.
func PodUIDOf(wp *schedulingv1alpha1.WaitingPod) types.UID {
	if wp.Spec.PodUID != "" {
		return wp.Spec.PodUID
	}
	return wp.Status.PodUID
}

// OperatorConditionTypes are the WaitingPod condition types the operator
// writes. Other writers may add conditions of other types; only these say
// what the scheduler observed and what became of a decision.
func OperatorConditionTypes() [6]string {
	return [...]string{
		schedulingv1alpha1.WaitingPodWaiting, schedulingv1alpha1.WaitingPodDecidable, schedulingv1alpha1.WaitingPodApproved,
		schedulingv1alpha1.WaitingPodRejected, schedulingv1alpha1.WaitingPodExpired, schedulingv1alpha1.WaitingPodPodMismatch,
	}
}

// Decided is how a message about decision starts: "Approved" or "Rejected".
func Decided(decision schedulingv1alpha1.Decision) string {
	if decision == schedulingv1alpha1.DecisionReject {
		return "Rejected"
	}
	return "Approved"
}

// Verb is how decision reads within a sentence: "approved" or "rejected".
func Verb(decision schedulingv1alpha1.Decision) string {
	return strings.ToLower(Decided(decision))
}

// ConditionType is the WaitingPod condition that shows what became of
// decision: Approved or Rejected.
func ConditionType(decision schedulingv1alpha1.Decision) string {
	if decision == schedulingv1alpha1.DecisionReject {
		return schedulingv1alpha1.WaitingPodRejected
	}
	return schedulingv1alpha1.WaitingPodApproved
}

// Pin says whether a decision applies to the profile holding its pod.
type Pin int

const (
	// PinHolds: the decision is unpinned, or pinned to the holding profile.
	PinHolds Pin = iota
	// PinProfileGone: the profile it is pinned to no longer exists.
	PinProfileGone
	// PinOtherProfile: it is pinned to another profile than the holding
	// one, which still exists (it became a shadow, or gave up the name).
	PinOtherProfile
)

// PinOf says whether spec's decision belongs to the profile holding the pod,
// holderUID (empty when no profile is known to serve the pod): a decision
// belongs to the profile that held the pod when it was made, never to
// another one that serves the name later. profiles are the
// SchedulingProfiles that exist.
func PinOf(spec *schedulingv1alpha1.WaitingPodSpec, holderUID types.UID, profiles []schedulingv1alpha1.SchedulingProfile) Pin {
	if spec.ProfileUID == "" {
		return PinHolds
	}
	if !slices.ContainsFunc(profiles, func(sp schedulingv1alpha1.SchedulingProfile) bool {
		return sp.UID == spec.ProfileUID && sp.DeletionTimestamp == nil
	}) {
		return PinProfileGone
	}
	if spec.ProfileUID != holderUID {
		return PinOtherProfile
	}
	return PinHolds
}

// PinCondition is the Approved or Rejected condition, False, of a decision
// that pin keeps from the profile holding the pod, named holder.
func PinCondition(spec *schedulingv1alpha1.WaitingPodSpec, pin Pin, holder string) metav1.Condition {
	cond := metav1.Condition{Type: ConditionType(spec.Decision), Status: metav1.ConditionFalse}
	switch pin {
	case PinProfileGone:
		cond.Reason = schedulingv1alpha1.ReasonProfileGone
		cond.Message = fmt.Sprintf("%s by %s for a SchedulingProfile (UID %s) that was deleted since; it does not apply to the profile holding the pod now: delete this WaitingPod and decide again",
			Decided(spec.Decision), spec.DecidedBy, spec.ProfileUID)
	default:
		cond.Reason = schedulingv1alpha1.ReasonOtherProfile
		cond.Message = fmt.Sprintf("%s by %s for another SchedulingProfile (UID %s) than %q, which serves the pod now; it does not apply to this profile: delete this WaitingPod and decide again",
			Decided(spec.Decision), spec.DecidedBy, spec.ProfileUID, holder)
	}
	return cond
}

// ServedProfile is what the status of the SchedulingProfile serving a
// schedulerName says: its UID and the Permit plugins its instance runs.
type ServedProfile struct {
	UID    types.UID
	Permit []string
}

// ServedProfiles maps each schedulerName an active SchedulingProfile serves
// to what it runs, from the profiles' status: the operator writes it from
// the instances it built, whereas a pod's spec and labels are its author's.
func ServedProfiles(profiles []schedulingv1alpha1.SchedulingProfile) map[string]ServedProfile {
	served := map[string]ServedProfile{}
	for _, sp := range profiles {
		// Of profiles claiming one schedulerName, only the one serving it
		// is Active.
		if sp.Status.SchedulerName == "" || !meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive) {
			continue
		}
		permit := []string{}
		if sp.Status.Plugins != nil {
			for _, p := range sp.Status.Plugins.Permit {
				permit = append(permit, p.Name)
			}
		}
		served[sp.Status.SchedulerName] = ServedProfile{UID: sp.UID, Permit: permit}
	}
	return served
}

// NotMember says why wp, which claims group by its label or status, is no
// member of it; "" when it is one. Only the operator's status counts: a
// pod's group label is its author's claim.
func NotMember(wp *schedulingv1alpha1.WaitingPod, group string, served map[string]ServedProfile) string {
	profile := wp.Status.Profile
	sp, ok := served[profile]
	switch {
	case profile == "":
		return "the scheduler shows no profile holding it"
	case !ok:
		return fmt.Sprintf("its profile %q serves no pods now", profile)
	case !slices.Contains(sp.Permit, Coscheduling):
		return fmt.Sprintf("its profile %q does not run %s, so its pod's group label makes it no member", profile, Coscheduling)
	case wp.Status.PodGroup != group:
		return "the scheduler does not show it in the group"
	}
	return ""
}

// Action is what the operator does with a decision on a held pod.
type Action int

const (
	// Record: nothing to release now; the decision is kept for when the pod
	// reaches ManualApproval's Permit (an approval also retries the pod).
	Record Action = iota
	// Allow ManualApproval's hold of the pod.
	Allow
	// Reject the pod at ManualApproval.
	Reject
)

// Hold is a pod's current wait at Permit, as the instance holding it says.
type Hold struct {
	// Pending are the Permit plugins that still hold the pod.
	Pending []string
	// Node is where the pod waits.
	Node string
}

// Delivery is what becomes of a decision: what to do with the hold, and
// the reason and message of the condition that shows it.
type Delivery struct {
	Action  Action
	Reason  string
	Message string
}

// Condition reasons of a decision's Approved or Rejected condition, besides
// the API's own.
const (
	// ReasonDelivered: the decision reached the held pod.
	ReasonDelivered = "Delivered"
	// ReasonRecorded: the pod is not held now; the decision applies when it
	// reaches Permit again.
	ReasonRecorded = "Recorded"
)

// Deliver says what becomes of spec's decision for a pod held as hold says,
// nil when it is not held now. A decision never ends the hold of another
// Permit plugin: a gang quorum or a quota is not a person's to waive.
func Deliver(spec *schedulingv1alpha1.WaitingPodSpec, hold *Hold) Delivery {
	if hold == nil || len(hold.Pending) == 0 {
		// Not held now, or every plugin allowed it already and it is on
		// its way to binding.
		if spec.Decision == schedulingv1alpha1.DecisionApprove {
			return Delivery{Action: Record, Reason: ReasonRecorded, Message: fmt.Sprintf("Approved by %s; applies when the pod reaches Permit", spec.DecidedBy)}
		}
		return Delivery{Action: Record, Reason: ReasonRecorded, Message: fmt.Sprintf("Rejected by %s; the pod will not be let through Permit", spec.DecidedBy)}
	}
	others := OtherPlugins(hold.Pending)
	switch {
	case !HeldByManualApproval(hold.Pending):
		// Held, but not by ManualApproval (it allowed the pod already, or
		// the profile does not run it): the decision is kept for
		// ManualApproval and releases nothing.
		return Delivery{Action: Record, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: fmt.Sprintf("%s by %s, but the pod was not released: it is held by %s, not %s, and a decision does not release it from them",
				Decided(spec.Decision), spec.DecidedBy, strings.Join(others, ", "), ManualApproval)}
	case spec.Decision == schedulingv1alpha1.DecisionApprove:
		msg := fmt.Sprintf("Approved by %s; the pod proceeds to binding on %s", spec.DecidedBy, hold.Node)
		gangs, rest := AfterApproval(hold.Pending)
		switch {
		case len(rest) > 0:
			msg = fmt.Sprintf("Approved by %s; the pod is still held on %s by %s, which an approval does not release", spec.DecidedBy, hold.Node, strings.Join(rest, ", "))
			if len(gangs) > 0 {
				msg += fmt.Sprintf(", and by %s until its group is complete", strings.Join(gangs, ", "))
			}
		case len(gangs) > 0:
			msg = fmt.Sprintf("Approved by %s; %s releases the pod to binding on %s once its group is complete", spec.DecidedBy, strings.Join(gangs, ", "), hold.Node)
		}
		return Delivery{Action: Allow, Reason: ReasonDelivered, Message: msg}
	default:
		return Delivery{Action: Reject, Reason: ReasonDelivered, Message: fmt.Sprintf("Rejected by %s; the pod returned to pending", spec.DecidedBy)}
	}
}
