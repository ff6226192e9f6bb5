package operator_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

func getWaitingPod(ns, name string) (*schedulingv1alpha1.WaitingPod, error) {
	wp := &schedulingv1alpha1.WaitingPod{}
	return wp, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wp)
}

// waitingCondition returns a condition of the WaitingPod ns/name.
func waitingCondition(ns, name, condType string) func() *metav1.Condition {
	return func() *metav1.Condition {
		wp, err := getWaitingPod(ns, name)
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(wp.Status.Conditions, condType)
	}
}

// approvalProfile holds every pod of the profile for window, as ManualApproval.
func approvalProfile(name, window string) string {
	return profileManifest(name, fmt.Sprintf(`plugins:
  multiPoint:
    enabled:
    - name: ManualApproval
pluginConfig:
- name: ManualApproval
  args:
    approvalWindow: %s`, window))
}

var _ = Describe("WaitingPods and approvals", Ordered, func() {
	BeforeAll(func() {
		nodes("approvals", 2, "4", "8Gi")
		apply("approvals", approvalProfile("approvals", "10m"))
		serving("approvals")
		apply("short-window", approvalProfile("short-window", "2s"))
		serving("short-window")
	})

	It("shows a held pod as a WaitingPod and binds it on kubectl approve", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "train-0", "approvals", "approvals", "1", "1Gi"))
		start := time.Now()
		Eventually(waitingCondition(ns, "train-0", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))
		GinkgoWriter.Printf("WaitingPod shown %v after the pod was created\n", time.Since(start))

		wp, err := getWaitingPod(ns, "train-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Status.PodUID).To(Equal(pod.UID))
		Expect(wp.Status.Profile).To(Equal("approvals"))
		Expect(wp.Status.NodeName).To(HavePrefix("approvals-"))
		Expect(wp.Status.PendingPlugins).To(HaveExactElements(HaveField("Name", "ManualApproval")))
		Expect(wp.Status.PendingPlugins[0].Deadline.Time).To(BeTemporally("~", start.Add(10*time.Minute), time.Minute))
		Expect(wp.Status.Expires).To(Equal(wp.Status.PendingPlugins[0].Deadline))
		Expect(wp.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("UID", pod.UID))))

		table := kubectlOK("get", "waitingpods", "-A")
		Expect(table).To(ContainSubstring("POD"))
		Expect(table).To(MatchRegexp(`%s\s+train-0\s+train-0\s+%s\s+approvals\s+ManualApproval\s+\d{4}-\d\d-\d\dT\S+\s+\S+\n`, ns, wp.Status.NodeName))

		Expect(kubectlOK("approve", "waitingpod/train-0", "-n", ns, "--reason", "capacity reviewed")).To(Equal("waitingpod/train-0 approved\n"))
		Expect(boundNode(pod)).To(Equal(wp.Status.NodeName))
		Eventually(eventNotes("Pod", ns, "train-0", "Approved")).Should(ContainElement(ContainSubstring("Approved by admin")))

		// Resolved WaitingPods go after the retention time.
		Eventually(func() bool { _, err := getWaitingPod(ns, "train-0"); return apierrors.IsNotFound(err) }).Should(BeTrue())
	})

	It("returns a rejected pod to pending with the reason", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "train-1", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "train-1", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))

		kubectlOK("reject", "pod/train-1", "-n", ns, "--reason", "over budget")
		Eventually(scheduledCondition(pod)).Should(And(
			Not(BeNil()),
			HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", ContainSubstring("rejected at Permit by admin: over budget")),
		))
		Eventually(eventNotes("Pod", ns, "train-1", "FailedScheduling")).Should(ContainElement(ContainSubstring("over budget")))
		Eventually(waitingCondition(ns, "train-1", schedulingv1alpha1.WaitingPodRejected)).Should(Not(BeNil()))
		Consistently(func() string { return scheduledPodNode(pod) }, "2s").Should(BeEmpty())
	})

	It("expires a pod whose window ends, and an approval afterwards binds it at once", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "late", "short-window", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "late", schedulingv1alpha1.WaitingPodExpired)).Should(haveCondition(metav1.ConditionTrue, "Timeout"))
		Eventually(scheduledCondition(pod)).Should(And(
			Not(BeNil()),
			HaveField("Message", ContainSubstring("rejected due to timeout after waiting 2s at plugin ManualApproval")),
		))

		// The pod now waits in the unschedulable pool, which no cluster event
		// would flush for minutes: binding quickly proves the approval
		// retried it at once.
		kubectlOK("approve", "late", "-n", ns)
		Eventually(func() string { return scheduledPodNode(pod) }, "10s").ShouldNot(BeEmpty())
	})

	It("lets a pod approved before it is held through at once", func() {
		ns := namespace()
		gated := poolPod(ns, "early", "approvals", "approvals", "1", "1Gi")
		gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		pod := createPod(gated)

		Expect(kubectlOK("approve", "pod/early", "-n", ns)).To(ContainSubstring("approved ahead of Permit"))
		Consistently(func() string { return scheduledPodNode(pod) }, "1s").Should(BeEmpty())

		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Spec.SchedulingGates = nil
		Expect(k8sClient.Update(ctx, pod)).To(Succeed())
		Expect(boundNode(pod)).To(HavePrefix("approvals-"))
	})

	It("binds a pod approved after the operator restarted while it waited", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "survivor", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "survivor", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))

		stopOperator()
		startOperator()
		serving("approvals")
		// The new operator schedules it again and holds it again.
		Eventually(func() string {
			wp, err := getWaitingPod(ns, "survivor")
			if err != nil {
				return ""
			}
			return string(wp.Status.PodUID)
		}).Should(Equal(string(pod.UID)))
		Eventually(func() bool { wp, _ := op.Profiles.GetWaitingPod(pod.UID); return wp != nil }).Should(BeTrue())

		kubectlOK("approve", "survivor", "-n", ns)
		Expect(boundNode(pod)).To(HavePrefix("approvals-"))
	})

	AfterAll(func() {
		for _, name := range []string{"approvals", "short-window"} {
			kubectlOK("delete", "schedulingprofile", name)
		}
	})
})
