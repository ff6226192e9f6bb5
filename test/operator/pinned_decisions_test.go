package operator_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// pendingPluginNames returns the Permit plugins the WaitingPod ns/name
// shows holding its pod.
func pendingPluginNames(ns, name string) func() []string {
	return func() []string {
		wp, err := getWaitingPod(ns, name)
		if err != nil {
			return nil
		}
		var names []string
		for _, p := range wp.Status.PendingPlugins {
			names = append(names, p.Name)
		}
		return names
	}
}

var _ = Describe("Decisions pinned to their profile", func() {
	It("do not carry over to a profile deleted and created again under the same name", func() {
		ns := gangNamespace()
		name := "pinned-" + ns
		manifest := gangProfile(name, "permitWaitingTimeSeconds: 600\npodGroupRejectPercentage: 100", "ManualApproval")
		apply(name, manifest)
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		})
		serving(name)
		nodes(name, 1, "4", "8Gi")
		// A gang of two whose second member fits no node: Coscheduling
		// keeps holding the first after the approval, so the profile goes
		// before it binds.
		podGroup(ns, "pair", 2, nil)
		createPod(member(ns, "pair", 0, name, name, "1"))
		unfit := member(ns, "pair", 1, name, name, "1")
		unfit.Spec.NodeSelector["gang"] = "none"
		createPod(unfit)
		Eventually(pendingPluginNames(ns, "pair-0")).Should(ConsistOf("Coscheduling", "ManualApproval"))

		kubectlOK("approve", "waitingpod/pair-0", "-n", ns)
		old := getProfile(name)
		wp, err := getWaitingPod(ns, "pair-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Spec.ProfileUID).To(Equal(old.UID))
		Eventually(pendingPluginNames(ns, "pair-0")).Should(ConsistOf("Coscheduling"))

		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &schedulingv1alpha1.SchedulingProfile{}))
		}).Should(BeTrue())
		apply(name, manifest)
		serving(name)
		Expect(getProfile(name).UID).NotTo(Equal(old.UID))

		// Held again by the new profile, ManualApproval included: the old
		// approval is not its, and the WaitingPod says why.
		Eventually(pendingPluginNames(ns, "pair-0")).Should(ConsistOf("Coscheduling", "ManualApproval"))
		Eventually(waitingCondition(ns, "pair-0", schedulingv1alpha1.WaitingPodApproved)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonProfileGone),
			HaveField("Message", ContainSubstring(fmt.Sprintf("(UID %s) that was deleted since", old.UID)))))
		Consistently(pendingPluginNames(ns, "pair-0"), "2s").Should(ContainElement("ManualApproval"))
	})

	It("leave a decision made with --ahead to whichever profile holds the pod", func() {
		ns := namespace()
		name := "ahead-" + ns
		nodes(name, 1, "4", "8Gi")
		pod := createPod(poolPod(ns, "later", name, name, "1", "1Gi"))
		kubectlOK("approve", "pod/later", "-n", ns, "--ahead")
		wp, err := getWaitingPod(ns, "later")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Spec.ProfileUID).To(BeEmpty())

		apply(name, approvalProfile(name, "10m"))
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		})
		Expect(boundNode(pod)).To(HavePrefix(name + "-"))
	})
})
