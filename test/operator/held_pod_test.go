package operator_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// permitCondition returns the pod's WaitingAtPermit condition.
func permitCondition(pod *corev1.Pod) func() *corev1.PodCondition {
	return func() *corev1.PodCondition {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return nil
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == schedulingv1alpha1.PodWaitingAtPermit {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
}

func havePodCondition(status corev1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

var _ = Describe("A pod held at Permit shows it", Ordered, func() {
	BeforeAll(func() {
		nodes("held", 1, "4", "8Gi")
		apply("held", approvalProfile("held", "10m"))
		serving("held")
		apply("held-short", approvalProfile("held-short", "2s"))
		serving("held-short")
	})

	It("has an event and a condition naming the plugin, the WaitingPod and the deadline, cleared on approval", func() {
		ns := namespace()
		start := time.Now()
		pod := createPod(poolPod(ns, "held-0", "held", "held", "1", "1Gi"))
		Eventually(permitCondition(pod)).Should(havePodCondition(corev1.ConditionTrue, "HeldByManualApproval"))
		cond := permitCondition(pod)()
		Expect(cond.Message).To(MatchRegexp(`^Held at Permit by ManualApproval until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: decide with kubectl approve\|reject waitingpod/held-0$`))
		// The WaitingPod exists before the pod shows its hold; its status
		// is written once the operator's cache shows the new object.
		wp, err := getWaitingPod(ns, "held-0")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (*metav1.Time, error) {
			var err error
			wp, err = getWaitingPod(ns, "held-0")
			return wp.Status.Expires, err
		}).ShouldNot(BeNil())
		Expect(cond.Message).To(ContainSubstring(wp.Status.Expires.UTC().Format(time.RFC3339)))
		Expect(wp.Status.Expires.Time).To(BeTemporally("~", start.Add(10*time.Minute), time.Minute))
		Eventually(eventNotes("Pod", ns, "held-0", schedulingv1alpha1.ReasonWaitingAtPermit)).Should(ConsistOf(cond.Message))

		// Written by a field manager of its own, to the status only.
		p := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
		Expect(p.GetManagedFields()).To(ContainElement(And(
			HaveField("Manager", "profile-scheduler-permit"),
			HaveField("Operation", metav1.ManagedFieldsOperationApply),
			HaveField("Subresource", "status"),
		)))

		described := kubectlOK("describe", "pod", "held-0", "-n", ns)
		Expect(described).To(ContainSubstring(schedulingv1alpha1.PodWaitingAtPermit))
		Expect(described).To(MatchRegexp(`WaitingAtPermit\s+.*Held at Permit by ManualApproval until \S+: decide with kubectl approve\|reject waitingpod/held-0`))

		kubectlOK("approve", "waitingpod/held-0", "-n", ns)
		Expect(boundNode(pod)).To(HavePrefix("held-"))
		Eventually(permitCondition(pod)).Should(havePodCondition(corev1.ConditionFalse, "Allowed"))
	})

	It("clears the condition of a rejected pod, next to the event of the rejection", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "held-1", "held", "held", "1", "1Gi"))
		Eventually(permitCondition(pod)).Should(havePodCondition(corev1.ConditionTrue, "HeldByManualApproval"))
		kubectlOK("reject", "waitingpod/held-1", "-n", ns, "--reason", "over budget")
		Eventually(permitCondition(pod)).Should(And(
			havePodCondition(corev1.ConditionFalse, schedulingv1alpha1.WaitingPodRejected),
			HaveField("Message", ContainSubstring("over budget")),
		))
		Eventually(eventNotes("Pod", ns, "held-1", schedulingv1alpha1.WaitingPodRejected)).Should(ContainElement(ContainSubstring("over budget")))
	})

	It("says on the pod that its wait expired", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "held-2", "held-short", "held", "1", "1Gi"))
		Eventually(eventNotes("Pod", ns, "held-2", schedulingv1alpha1.ReasonWaitingAtPermit)).Should(ContainElement(ContainSubstring("Held at Permit by ManualApproval until")))
		Eventually(eventNotes("Pod", ns, "held-2", schedulingv1alpha1.ReasonPermitTimedOut)).Should(ContainElement(ContainSubstring("timeout")))
		Eventually(permitCondition(pod)).Should(havePodCondition(corev1.ConditionFalse, "Timeout"))
	})
})
