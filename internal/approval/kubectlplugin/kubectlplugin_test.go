package kubectlplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
)

func TestNotMember(t *testing.T) {
	served := map[string]approval.ServedProfile{
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
			if diff := cmp.Diff(tc.want, approval.NotMember(tc.wp, "train", served)); diff != "" {
				t.Errorf("notMember (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePodUIDAndAhead(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts options
		want string
	}{
		{name: "one name pinned", opts: options{names: []string{"web-0"}, podUID: "u"}},
		{name: "one pod ahead", opts: options{names: []string{"pod/web-0"}, ahead: true}},
		{name: "a pin for two names", opts: options{names: []string{"a", "b"}, podUID: "u"},
			want: "--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME, without --all or --undo"},
		{name: "a pin for --all", opts: options{all: true, podUID: "u"},
			want: "--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME, without --all or --undo"},
		{name: "a pinned group", opts: options{names: []string{"pg/train"}, podUID: "u"},
			want: `"pg/train": --pod-uid and --ahead take waitingpod/NAME or pod/NAME: a group's members are decided as the operator holds them`},
		{name: "a group ahead", opts: options{names: []string{"podgroup/train"}, ahead: true},
			want: `"podgroup/train": --pod-uid and --ahead take waitingpod/NAME or pod/NAME: a group's members are decided as the operator holds them`},
		{name: "--all ahead", opts: options{all: true, ahead: true}, want: "--ahead goes with waitingpod/NAME or pod/NAME, not --all or --undo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.dryRun = "none"
			got := ""
			if err := tc.opts.validate(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("validate (-want +got):\n%s", diff)
			}
		})
	}
}
