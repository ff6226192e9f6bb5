package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

func TestStatusShowsWhatItsWriterOwns(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC))
	cond := func(condType string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: "Because", Message: condType, LastTransitionTime: at}
	}
	waiting := cond(schedulingv1alpha1.WaitingPodWaiting, metav1.ConditionTrue)
	decidable := cond(schedulingv1alpha1.WaitingPodDecidable, metav1.ConditionTrue)
	policy := cond("PolicyChecked", metav1.ConditionTrue)
	want := schedulingv1alpha1.WaitingPodStatus{
		NodeName:       "node-1",
		PendingPlugins: []schedulingv1alpha1.PendingPlugin{{Name: "Coscheduling"}, {Name: "ManualApproval"}},
		Conditions:     []metav1.Condition{waiting, decidable},
	}
	for _, tc := range []struct {
		name string
		got  func(*schedulingv1alpha1.WaitingPodStatus)
		want bool
	}{{
		name: "as written",
		got:  func(*schedulingv1alpha1.WaitingPodStatus) {},
		want: true,
	}, {
		name: "lists merged in another order",
		got: func(st *schedulingv1alpha1.WaitingPodStatus) {
			st.Conditions = []metav1.Condition{decidable, waiting}
			st.PendingPlugins = []schedulingv1alpha1.PendingPlugin{{Name: "ManualApproval"}, {Name: "Coscheduling"}}
		},
		want: true,
	}, {
		name: "another writer's condition beside them",
		got: func(st *schedulingv1alpha1.WaitingPodStatus) {
			st.Conditions = []metav1.Condition{policy, waiting, decidable}
		},
		want: true,
	}, {
		name: "one of the mirror's conditions changed",
		got: func(st *schedulingv1alpha1.WaitingPodStatus) {
			st.Conditions = []metav1.Condition{waiting, cond(schedulingv1alpha1.WaitingPodDecidable, metav1.ConditionFalse)}
		},
	}, {
		name: "a condition of the mirror's types it does not show",
		got: func(st *schedulingv1alpha1.WaitingPodStatus) {
			st.Conditions = append(st.Conditions, cond(schedulingv1alpha1.WaitingPodApproved, metav1.ConditionTrue))
		},
	}, {
		name: "a field it leaves empty set",
		got: func(st *schedulingv1alpha1.WaitingPodStatus) {
			st.PodGroup = "forged"
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := *want.DeepCopy()
			tc.got(&got)
			if diff := cmp.Diff(tc.want, shows(got, want)); diff != "" {
				t.Errorf("shows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitConditions(t *testing.T) {
	conds := []metav1.Condition{{Type: "Waiting"}, {Type: "PolicyChecked"}, {Type: "Approved"}, {Type: "Other"}}
	own, others := splitConditions(conds, func(t string) bool { return t == "Waiting" || t == "Approved" })
	if diff := cmp.Diff([]metav1.Condition{{Type: "Approved"}, {Type: "Waiting"}}, own); diff != "" {
		t.Errorf("own (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.Condition{{Type: "PolicyChecked"}, {Type: "Other"}}, others); diff != "" {
		t.Errorf("others (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.Condition{{Type: "Waiting"}, {Type: "PolicyChecked"}, {Type: "Approved"}, {Type: "Other"}}, conds); diff != "" {
		t.Errorf("conds changed (-want +got):\n%s", diff)
	}
}
