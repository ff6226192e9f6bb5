package operator_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
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

// waitingPodReconciles is how many reconciles the WaitingPod controller has
// run in this process.
func waitingPodReconciles() float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "waitingpod" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
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

		table := kubectlOK("get", "waitingpods", "-A", "-o", "wide")
		Expect(table).To(ContainSubstring("POD"))
		Expect(table).To(MatchRegexp(`%s\s+train-0\s+train-0\s+%s\s+approvals\s+ManualApproval\s+True\s+\d{4}-\d\d-\d\dT\S+\s+\S+\n`, ns, wp.Status.NodeName))

		Expect(kubectlOK("approve", "waitingpod/train-0", "-n", ns, "--reason", "capacity reviewed")).To(Equal(fmt.Sprintf("waitingpod/train-0 approved (pod UID %s, profile approvals)\n", pod.UID)))
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
		// Pending again, the pod holds nothing on the node it waited on.
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "train-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wp.Status.NodeName).To(BeEmpty())
			g.Expect(wp.Status.PendingPlugins).To(BeEmpty())
			g.Expect(wp.Status.Expires).To(BeNil())
		}).Should(Succeed())
		Expect(kubectlOK("get", "waitingpod/train-1", "-n", ns, "-o", "wide")).To(MatchRegexp(`\ntrain-1\s+train-1\s+approvals\s`), "no node is shown")
	})

	It("expires a pod whose window ends, and an approval afterwards binds it at once", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "late", "short-window", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "late", schedulingv1alpha1.WaitingPodExpired)).Should(haveCondition(metav1.ConditionTrue, "Timeout"))
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "late")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wp.Status.NodeName).To(BeEmpty())
		}).Should(Succeed())
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

	It("keeps a decision made for a pod that was replaced, marked, and does not let the new pod through", func() {
		ns := namespace()
		gated := poolPod(ns, "reborn", "approvals", "approvals", "1", "1Gi")
		gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		earlier := createPod(gated)
		Expect(kubectlOK("approve", "pod/reborn", "-n", ns)).To(ContainSubstring("approved ahead of Permit (pod UID " + string(earlier.UID)))
		ahead, err := getWaitingPod(ns, "reborn")
		Expect(err).NotTo(HaveOccurred())

		// The pod is replaced under its name, and the new one is held.
		Expect(k8sClient.Delete(ctx, earlier, client.GracePeriodSeconds(0))).To(Succeed())
		later := createPod(poolPod(ns, "reborn", "approvals", "approvals", "1", "1Gi"))
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "reborn")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wp.UID).To(Equal(ahead.UID))
			g.Expect(wp.Spec).To(Equal(ahead.Spec))
			c := meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodPodMismatch)
			g.Expect(c).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonOtherPodDecided))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("The decision is for pod UID %s, which no pod of this name has now: the pod of this name, UID %s, is held at Permit", earlier.UID, later.UID)))
		}).Should(Succeed())
		Eventually(eventNotes("Pod", ns, "reborn", schedulingv1alpha1.ReasonOtherPodDecided)).Should(ContainElement(ContainSubstring(string(earlier.UID))))

		// Removed like a WaitingPod whose pod is gone, it gives way to the
		// held pod's own, undecided one: the approval never followed it.
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "reborn")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wp.Spec.PodUID).To(Equal(later.UID))
			g.Expect(wp.Spec.Decision).To(BeEmpty())
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable)).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		}).Should(Succeed())
		Expect(scheduledPodNode(later)).To(BeEmpty())
		kubectlOK("approve", "reborn", "-n", ns, "--pod-uid", string(later.UID))
		Expect(boundNode(later)).To(HavePrefix("approvals-"))
	})

	It("refuses with --pod-uid to decide a pod replaced under the name reviewed", func() {
		ns := namespace()
		reviewed := createPod(poolPod(ns, "swapped", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "swapped", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		Expect(k8sClient.Delete(ctx, reviewed, client.GracePeriodSeconds(0))).To(Succeed())
		later := createPod(poolPod(ns, "swapped", "approvals", "approvals", "1", "1Gi"))
		Eventually(func() types.UID {
			wp, err := getWaitingPod(ns, "swapped")
			if err != nil || meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable) == nil {
				return ""
			}
			return wp.Status.PodUID
		}).Should(Equal(later.UID))

		r, err := kubectl.Run("approve", "swapped", "-n", ns, "--pod-uid", string(reviewed.UID))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(HavePrefix(fmt.Sprintf("error: waitingpod %s/swapped is for pod UID %s, not %s (--pod-uid): nothing was approved\n", ns, later.UID, reviewed.UID)))
		Consistently(func() string { return scheduledPodNode(later) }, "1s").Should(BeEmpty())
		wp, err := getWaitingPod(ns, "swapped")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Spec.Decision).To(BeEmpty())
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

	It("leaves a rejected pod's WaitingPod alone while the pod stays pending, and removes it when the pod goes", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "parked", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "parked", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))
		kubectlOK("reject", "pod/parked", "-n", ns)
		Eventually(waitingCondition(ns, "parked", schedulingv1alpha1.WaitingPodRejected)).Should(Not(BeNil()))

		// Once the writes that follow the rejection are reconciled, a pod
		// that stays pending costs no reconcile: no timer re-reads it (at
		// 10k rejected pods, one would be hundreds of reads a second).
		var settled float64
		Eventually(func() bool {
			before := waitingPodReconciles()
			time.Sleep(retention + time.Second)
			settled = waitingPodReconciles()
			return settled == before
		}, "30s").Should(BeTrue())
		Consistently(waitingPodReconciles, 3*retention).Should(Equal(settled))
		_, err := getWaitingPod(ns, "parked")
		Expect(err).NotTo(HaveOccurred())

		// The pod's deletion, not a timer, brings the WaitingPod back, and
		// it was resolved longer ago than the retention: it goes at once.
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool { _, err := getWaitingPod(ns, "parked"); return apierrors.IsNotFound(err) }, "5s").Should(BeTrue())
	})

	It("puts back a status someone else wrote, and audits a decision from its own record", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "forged", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "forged", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		wp, err := getWaitingPod(ns, "forged")
		Expect(err).NotTo(HaveOccurred())
		node := wp.Status.NodeName

		// Someone with write access to the status claims another node and
		// an approval that never happened.
		forge := func() {
			GinkgoHelper()
			Eventually(func() error {
				wp, err := getWaitingPod(ns, "forged")
				if err != nil {
					return err
				}
				wp.Status.NodeName = "forged-node"
				meta.SetStatusCondition(&wp.Status.Conditions, metav1.Condition{
					Type: schedulingv1alpha1.WaitingPodApproved, Status: metav1.ConditionTrue, Reason: "Delivered", Message: "Approved by nobody",
				})
				return k8sClient.Status().Update(ctx, wp)
			}).Should(Succeed())
		}
		forge()
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "forged")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wp.Status.NodeName).To(Equal(node))
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodApproved)).To(BeNil())
		}).Should(Succeed())
		Eventually(eventNotes("WaitingPod", ns, "forged", "StatusRestored")).ShouldNot(BeEmpty())
		Expect(scheduledPodNode(pod)).To(BeEmpty())

		// A forged Approved condition does not pass for a decision already
		// carried out: the approval is delivered and audited.
		forge()
		kubectlOK("approve", "waitingpod/forged", "-n", ns)
		Expect(boundNode(pod)).To(Equal(node))
		Eventually(eventNotes("Pod", ns, "forged", "Approved")).Should(ContainElement(ContainSubstring("Approved by admin")))
	})

	It("shows a decision and the end of the wait it caused side by side", func() {
		ns := namespace()
		pod := createPod(poolPod(ns, "both", "approvals", "approvals", "1", "1Gi"))
		Eventually(waitingCondition(ns, "both", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))
		kubectlOK("approve", "waitingpod/both", "-n", ns)
		Expect(boundNode(pod)).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			wp, err := getWaitingPod(ns, "both")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodApproved)).To(haveCondition(metav1.ConditionTrue, "Delivered"))
			g.Expect(meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting)).To(haveCondition(metav1.ConditionFalse, "Allowed"))
			g.Expect(wp.Status.NodeName).To(Equal(scheduledPodNode(pod)))
			// One writer: its field manager alone owns the status.
			var managers []string
			for _, f := range wp.ManagedFields {
				if f.Subresource == "status" {
					managers = append(managers, f.Manager)
				}
			}
			g.Expect(managers).To(HaveLen(1))
		}, retention).Should(Succeed())
	})

	AfterAll(func() {
		for _, name := range []string{"approvals", "short-window"} {
			kubectlOK("delete", "schedulingprofile", name)
		}
	})
})

// testGateName is a Permit plugin of these tests that stands for a gang or
// quota plugin: it holds pods labelled test-gate=hold, and only its own
// code (here, the test) may release them.
const testGateName = "TestGate"

type testGate struct{}

var _ framework.PermitPlugin = testGate{}

func (testGate) Name() string { return testGateName }

func (testGate) Permit(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, _ string) (*framework.Status, time.Duration) {
	if pod.Labels["test-gate"] != "hold" {
		return nil, 0
	}
	return framework.NewStatus(framework.Wait), 10 * time.Minute
}

// registerTestGate adds TestGate to a registry.
func registerTestGate(r runtime.Registry) error {
	return r.Register(testGateName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return testGate{}, nil
	}, runtime.ArgsSpec{})
}

var _ = Describe("Decisions answer ManualApproval only", Ordered, func() {
	BeforeAll(func() {
		stopOperator()
		startOperator(registerTestGate)
		nodes("gated", 2, "4", "8Gi")
		apply("gated", profileManifest("gated", `plugins:
  multiPoint:
    enabled:
    - name: ManualApproval
    - name: TestGate
pluginConfig:
- name: ManualApproval
  args:
    podSelector:
      matchLabels:
        needs-approval: "true"`))
		serving("gated")
	})

	// gatedPod creates a pod of the gated profile; gate: TestGate holds it,
	// approval: ManualApproval does.
	gatedPod := func(ns, name string, gate, approval bool) *corev1.Pod {
		GinkgoHelper()
		pod := poolPod(ns, name, "gated", "gated", "100m", "128Mi")
		pod.Labels = map[string]string{}
		if gate {
			pod.Labels["test-gate"] = "hold"
		}
		if approval {
			pod.Labels["needs-approval"] = "true"
		}
		return createPod(pod)
	}
	pendingPlugins := func(pod *corev1.Pod) func() []string {
		return func() []string {
			held, _ := op.Profiles.GetWaitingPod(pod.UID)
			if held == nil {
				return nil
			}
			return held.GetPendingPlugins()
		}
	}

	It("does not release a pod only another Permit plugin holds, and says so", func() {
		ns := namespace()
		pod := gatedPod(ns, "gang-0", true, false)
		Eventually(waitingCondition(ns, "gang-0", schedulingv1alpha1.WaitingPodDecidable)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonHeldByOtherPlugins),
			HaveField("Message", "Held by TestGate, not by ManualApproval; a decision does not release the pod from them"),
		))
		wp, err := getWaitingPod(ns, "gang-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Status.PendingPlugins).To(HaveExactElements(HaveField("Name", testGateName)))

		r, err := kubectl.Run("approve", "gang-0", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("was not approved: it is held by TestGate, not ManualApproval"))

		// Even a decision written past kubectl releases nothing.
		kubectlOK("patch", "waitingpod", "gang-0", "-n", ns, "--type", "merge",
			"-p", fmt.Sprintf(`{"spec":{"decision":"Approve","decidedBy":"admin","podUID":%q}}`, pod.UID))
		Eventually(waitingCondition(ns, "gang-0", schedulingv1alpha1.WaitingPodApproved)).Should(And(
			haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonHeldByOtherPlugins),
			HaveField("Message", ContainSubstring("the pod was not released: it is held by TestGate")),
		))
		Consistently(func() string { return scheduledPodNode(pod) }, "2s").Should(BeEmpty())
		Expect(pendingPlugins(pod)()).To(Equal([]string{testGateName}))
	})

	It("allows ManualApproval only for a pod that another plugin holds too", func() {
		ns := namespace()
		pod := gatedPod(ns, "both", true, true)
		Eventually(waitingCondition(ns, "both", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		Expect(pendingPlugins(pod)()).To(Equal([]string{"ManualApproval", testGateName}))

		r, err := kubectl.Run("approve", "both", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(fmt.Sprintf("waitingpod/both approved (pod UID %s, profile gated)\n", pod.UID)))
		Expect(r.Stderr).To(Equal("Warning: waitingpod/both is still held by TestGate, which an approval does not release\n"))
		Eventually(pendingPlugins(pod)).Should(Equal([]string{testGateName}))
		Consistently(func() string { return scheduledPodNode(pod) }, "2s").Should(BeEmpty())

		// Once TestGate itself lets go, the approved pod binds.
		held, _ := op.Profiles.GetWaitingPod(pod.UID)
		held.Allow(testGateName)
		Expect(boundNode(pod)).To(HavePrefix("gated-"))
	})

	It("rejects at ManualApproval a pod that another plugin holds too", func() {
		ns := namespace()
		pod := gatedPod(ns, "both-rejected", true, true)
		Eventually(waitingCondition(ns, "both-rejected", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		kubectlOK("reject", "both-rejected", "-n", ns, "--reason", "over budget")
		Eventually(scheduledCondition(pod)).Should(And(
			Not(BeNil()),
			HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", ContainSubstring("rejected at Permit by admin: over budget")),
		))
	})

	It("still binds a pod that only ManualApproval holds on approval", func() {
		ns := namespace()
		pod := gatedPod(ns, "approval-only", false, true)
		Eventually(waitingCondition(ns, "approval-only", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		Expect(kubectlOK("approve", "approval-only", "-n", ns)).To(Equal(fmt.Sprintf("waitingpod/approval-only approved (pod UID %s, profile gated)\n", pod.UID)))
		Expect(boundNode(pod)).To(HavePrefix("gated-"))
	})

	AfterAll(func() {
		kubectlOK("delete", "schedulingprofile", "gated")
		stopOperator()
		startOperator()
	})
})
