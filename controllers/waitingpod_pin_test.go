package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
)

// servingProfile is a SchedulingProfile whose status shows it serving
// schedulerName (or serving nothing, as a shadow, when it is empty).
func servingProfile(name string, uid types.UID, schedulerName string) *schedulingv1alpha1.SchedulingProfile {
	sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
	if schedulerName != "" {
		sp.Status.SchedulerName = schedulerName
		sp.Status.Conditions = []metav1.Condition{{Type: schedulingv1alpha1.ProfileActive, Status: metav1.ConditionTrue, Reason: "Serving"}}
	}
	return sp
}

// A decision belongs to the profile that held the pod when it was made:
// ManualApproval of the profile serving the pod now honours it only if it
// is that profile, whichever others still exist.
func TestManualApprovalHonoursOnlyDecisionsPinnedToItsProfile(t *testing.T) {
	const podUID = types.UID("pod-uid")
	for _, tc := range []struct {
		name   string
		pinned types.UID
		// wantWait: the pod is held, the decision not honoured.
		wantWait bool
	}{
		{name: "pinned to the profile serving the pod", pinned: "b-uid"},
		{name: "made ahead, pinned to no profile", pinned: ""},
		{name: "pinned to a profile that became a shadow", pinned: "a-uid", wantWait: true},
		{name: "pinned to a profile deleted since", pinned: "gone-uid", wantWait: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
			wp := &schedulingv1alpha1.WaitingPod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train-0"},
				Spec: schedulingv1alpha1.WaitingPodSpec{PodUID: podUID, Decision: schedulingv1alpha1.DecisionApprove, DecidedBy: "alice",
					ProfileUID: tc.pinned},
			}
			// A held the pod and was then made a shadow; B serves the name now.
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wp,
				servingProfile("a", "a-uid", ""), servingProfile("b", "b-uid", "approvals")).Build()

			r := registry.New(nil)
			if err := manualapproval.Register(r, Decisions{Reader: c}); err != nil {
				t.Fatal(err)
			}
			profile := st.MultiPointProfile(st.Plugin(queuesort.Name, 0), st.Plugin(manualapproval.Name, 0), st.Plugin(defaultbinder.Name, 0))
			profile.SchedulerName = ptr.To("approvals")
			fwk := st.NewFramework(t, r, profile, nil)

			pod := st.MakePod().Namespace("ns").Name("train-0").UID(string(podUID)).Obj()
			pod.Spec.SchedulerName = "approvals"
			got := fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), pod, "node-1")
			if got.IsWait() != tc.wantWait || (!tc.wantWait && !got.IsSuccess()) {
				t.Fatalf("RunPermitPlugins = %v, want wait %v", got, tc.wantWait)
			}
			if held := fwk.GetWaitingPod(podUID); held != nil {
				held.Reject(manualapproval.Name, "test over")
			}
		})
	}
}
