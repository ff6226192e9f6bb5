package operator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// The field managers docs/approvals.md and docs/profiles.md name.
const (
	waitingPodManager = "profile-scheduler-waitingpods"
	profileManager    = "profile-scheduler-profiles"
)

// applyCondition applies cond to obj's status as manager, as another
// controller that owns a condition type of its own would, without forcing
// ownership: it must not need to.
func applyCondition(obj client.Object, manager string, cond metav1.Condition) {
	GinkgoHelper()
	gvk, err := apiutil.GVKForObject(obj, k8sClient.Scheme())
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": cond.Type, "status": string(cond.Status), "reason": cond.Reason, "message": cond.Message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	Expect(k8sClient.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager))).To(Succeed())
}

// conditionOwners is, per field manager of obj's status, how it wrote
// (Apply or Update) and the condition types it owns, sorted.
func conditionOwners(obj client.Object) map[string][]string {
	GinkgoHelper()
	owners := map[string][]string{}
	for _, f := range obj.GetManagedFields() {
		if f.Subresource != "status" || f.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status struct {
				Conditions map[string]json.RawMessage `json:"f:conditions"`
			} `json:"f:status"`
		}
		Expect(json.Unmarshal(f.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		key := f.Manager + " " + string(f.Operation)
		owners[key] = []string{}
		for item := range fields.Status.Conditions {
			var k struct{ Type string }
			if typ, ok := strings.CutPrefix(item, "k:"); ok && json.Unmarshal([]byte(typ), &k) == nil {
				owners[key] = append(owners[key], k.Type)
			}
		}
		slices.Sort(owners[key])
	}
	return owners
}

var _ = Describe("Status ownership", Ordered, func() {
	BeforeAll(func() {
		nodes("owned", 1, "4", "8Gi")
		apply("owned-status", approvalProfile("owned-status", "10m"))
		serving("owned-status")
	})

	AfterAll(func() {
		kubectlOK("delete", "schedulingprofile", "owned-status")
	})

	It("keeps a WaitingPod condition another writer owns while the mirror writes its own", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "checked", "owned-status", "owned", "1", "1Gi"))
		Eventually(waitingCondition(ns, "checked", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		wp, err := getWaitingPod(ns, "checked")
		Expect(err).NotTo(HaveOccurred())

		// A policy engine records its own verdict beside the operator's.
		applyCondition(wp, "policy-check", metav1.Condition{Type: "PolicyChecked", Status: metav1.ConditionTrue, Reason: "Checked", Message: "Within the team's quota"})
		// The mirror sees the change and leaves it: not its condition type.
		Consistently(waitingCondition(ns, "checked", "PolicyChecked"), "2s").Should(haveCondition(metav1.ConditionTrue, "Checked"))

		// The policy engine writes again from what it saw before (it never
		// read the mirror's conditions): they stay.
		applyCondition(wp, "policy-check", metav1.Condition{Type: "PolicyChecked", Status: metav1.ConditionTrue, Reason: "Rechecked", Message: "Still within the team's quota"})
		wp, err = getWaitingPod(ns, "checked")
		Expect(err).NotTo(HaveOccurred())
		Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting)).To(haveCondition(metav1.ConditionTrue, "Held"))
		Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable)).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		Expect(conditionOwners(wp)).To(Equal(map[string][]string{
			waitingPodManager + " Apply": {schedulingv1alpha1.WaitingPodDecidable, schedulingv1alpha1.WaitingPodWaiting},
			"policy-check Apply":         {"PolicyChecked"},
		}))

		// The decision and the end of the wait go out as the mirror's
		// writes; the policy engine's condition outlives both. A rejected
		// pod stays pending, so its WaitingPod stays to be read.
		kubectlOK("reject", "waitingpod/checked", "-n", ns)
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "checked")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodRejected)).To(haveCondition(metav1.ConditionTrue, "Delivered"))
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting)).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.WaitingPodRejected))
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, "PolicyChecked")).To(haveCondition(metav1.ConditionTrue, "Rechecked"))
			g.Expect(conditionOwners(wp)).To(Equal(map[string][]string{
				waitingPodManager + " Apply": {schedulingv1alpha1.WaitingPodRejected, schedulingv1alpha1.WaitingPodWaiting},
				"policy-check Apply":         {"PolicyChecked"},
			}))
		}).Should(Succeed())
		Expect(scheduledPodNode(pod)).To(BeEmpty())
	})

	It("keeps a SchedulingProfile condition another writer owns across spec changes, and removes a forged one of its own", func() {
		// As docs/profiles.md has a shadow tool do it, with kubectl.
		apply("shadow-check", fmt.Sprintf(`apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: owned-status
status:
  conditions:
  - type: ShadowAgreement
    status: "True"
    reason: Agrees
    message: Same placements as the serving generation
    lastTransitionTime: %q
`, time.Now().UTC().Format(time.RFC3339)), "--server-side", "--subresource=status", "--field-manager=shadow-check")

		// A new generation: the reconciler writes Accepted and Active anew.
		generation := getProfile("owned-status").Generation
		apply("owned-status", approvalProfile("owned-status", "20m"))
		Eventually(func() int64 { return getProfile("owned-status").Status.ServingGeneration }).Should(Equal(generation + 1))
		sp := getProfile("owned-status")
		Expect(meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileAccepted)).To(HaveField("ObservedGeneration", generation+1))
		Expect(meta.FindStatusCondition(sp.Status.Conditions, "ShadowAgreement")).To(haveCondition(metav1.ConditionTrue, "Agrees"))
		Expect(conditionOwners(sp)).To(Equal(map[string][]string{
			profileManager + " Apply": {schedulingv1alpha1.ProfileAccepted, schedulingv1alpha1.ProfileActive, schedulingv1alpha1.ProfileReady},
			"shadow-check Apply":      {"ShadowAgreement"},
		}))

		// Someone with write access to the status claims that the
		// profile's extenders fail (it has none) and that it is not
		// accepted: the reconciler takes back what is its to say.
		Eventually(func() error {
			sp := getProfile("owned-status")
			meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
				Type: schedulingv1alpha1.ProfileExtendersReachable, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonExtenderUnreachable, Message: "forged",
			})
			meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
				Type: schedulingv1alpha1.ProfileAccepted, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonInvalidSpec, Message: "forged",
			})
			return k8sClient.Status().Update(ctx, sp)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			sp := getProfile("owned-status")
			g.Expect(meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)).To(BeNil())
			g.Expect(meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileAccepted)).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt))
			g.Expect(meta.FindStatusCondition(sp.Status.Conditions, "ShadowAgreement")).To(haveCondition(metav1.ConditionTrue, "Agrees"))
		}).Should(Succeed())
	})
})
