package approval

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
)

// The package names the plugins without importing them; the names must be
// theirs.
func TestPluginNames(t *testing.T) {
	if diff := cmp.Diff([]string{manualapproval.Name, coscheduling.Name}, []string{ManualApproval, Coscheduling}); diff != "" {
		t.Errorf("plugin names (-plugins +here):\n%s", diff)
	}
}

func TestDecidableCondition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []string
		want    metav1.Condition
	}{{
		name:    "ManualApproval alone",
		pending: []string{ManualApproval},
		want: metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision,
			Message: "ManualApproval holds the pod until a decision"},
	}, {
		name:    "ManualApproval and others",
		pending: []string{"Quota", ManualApproval, "Gang"},
		want: metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision,
			Message: "ManualApproval holds the pod until a decision; it is also held by Gang, Quota, which a decision does not release"},
	}, {
		name:    "others only",
		pending: []string{"Gang"},
		want: metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: "Held by Gang, not by ManualApproval; a decision does not release the pod from them"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecidableCondition(tc.pending)); diff != "" {
				t.Errorf("DecidableCondition (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPinOf(t *testing.T) {
	profile := func(uid types.UID, deleting bool) schedulingv1alpha1.SchedulingProfile {
		sp := schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		if deleting {
			sp.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return sp
	}
	profiles := []schedulingv1alpha1.SchedulingProfile{profile("a", false), profile("b", false), profile("c", true)}
	for _, tc := range []struct {
		name   string
		pinned types.UID
		holder types.UID
		want   Pin
	}{
		{name: "unpinned, made ahead", pinned: "", holder: "b", want: PinHolds},
		{name: "pinned to the holding profile", pinned: "b", holder: "b", want: PinHolds},
		{name: "pinned to another profile that still exists", pinned: "a", holder: "b", want: PinOtherProfile},
		{name: "pinned to a profile when none serves the pod", pinned: "a", holder: "", want: PinOtherProfile},
		{name: "pinned to a deleted profile", pinned: "gone", holder: "b", want: PinProfileGone},
		{name: "pinned to a profile being deleted", pinned: "c", holder: "c", want: PinProfileGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &schedulingv1alpha1.WaitingPodSpec{PodUID: "p", Decision: schedulingv1alpha1.DecisionApprove, ProfileUID: tc.pinned}
			if diff := cmp.Diff(tc.want, PinOf(spec, tc.holder, profiles)); diff != "" {
				t.Errorf("PinOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotMember(t *testing.T) {
	served := map[string]ServedProfile{
		"gangs":     {Permit: []string{"Coscheduling", "ManualApproval"}},
		"approvals": {Permit: []string{"ManualApproval"}},
	}
	// waitingPod claims group train by its pod's label, with the status the
	// operator wrote.
	waitingPod := func(profile, group string) *schedulingv1alpha1.WaitingPod {
		return &schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{podgroupv1alpha1.PodGroupLabel: "train"}},
			Status:     schedulingv1alpha1.WaitingPodStatus{Profile: profile, PodGroup: group},
		}
	}
	for _, tc := range []struct {
		name string
		wp   *schedulingv1alpha1.WaitingPod
		want string
	}{
		{name: "held by a Coscheduling profile, shown in the group", wp: waitingPod("gangs", "train"), want: ""},
		{name: "a label and nothing the scheduler observed", wp: waitingPod("", ""), want: "the scheduler shows no profile holding it"},
		{name: "a profile without Coscheduling, whatever its status says", wp: waitingPod("approvals", "train"),
			want: `its profile "approvals" does not run Coscheduling, so its pod's group label makes it no member`},
		{name: "a profile that serves no pods now", wp: waitingPod("gone", "train"), want: `its profile "gone" serves no pods now`},
		{name: "held by a Coscheduling profile, not shown in the group", wp: waitingPod("gangs", ""), want: "the scheduler does not show it in the group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NotMember(tc.wp, "train", served)); diff != "" {
				t.Errorf("notMember (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeliverApprovalToGangMember(t *testing.T) {
	spec := &schedulingv1alpha1.WaitingPodSpec{Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice"}
	for _, tc := range []struct {
		name    string
		pending []string
		want    string
	}{{
		name:    "ManualApproval alone",
		pending: []string{ManualApproval},
		want:    "Approved by alice; the pod proceeds to binding on node-1",
	}, {
		name:    "and its gang",
		pending: []string{Coscheduling, ManualApproval},
		want:    "Approved by alice; Coscheduling releases the pod to binding on node-1 once its group is complete",
	}, {
		name:    "and a Workload API gang",
		pending: []string{ManualApproval, GangScheduling},
		want:    "Approved by alice; GangScheduling releases the pod to binding on node-1 once its group is complete",
	}, {
		name:    "and another plugin",
		pending: []string{"Quota", ManualApproval},
		want:    "Approved by alice; the pod is still held on node-1 by Quota, which an approval does not release",
	}, {
		name:    "and its gang and another plugin",
		pending: []string{Coscheduling, "Quota", ManualApproval},
		want:    "Approved by alice; the pod is still held on node-1 by Quota, which an approval does not release, and by Coscheduling until its group is complete",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Deliver(spec, &Hold{Pending: tc.pending, Node: "node-1"})
			if diff := cmp.Diff(Delivery{Action: Allow, Reason: ReasonDelivered, Message: tc.want}, got); diff != "" {
				t.Errorf("Deliver (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideGroupAs(t *testing.T) {
	for podGroup, want := range map[string]string{
		"":                          "",
		"train":                     "pg/train",
		WorkloadPodGroup("trainer"): "podgroup/trainer",
	} {
		if got := DecideGroupAs(podGroup); got != want {
			t.Errorf("DecideGroupAs(%q) = %q, want %q", podGroup, got, want)
		}
	}
}
