package kubectl_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

var _ = Describe("kubectl approve and kubectl reject", func() {
	ctx := context.Background()
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "approvals-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns = n.Name
	})

	// held creates a pending pod and the WaitingPod the scheduler would
	// mirror for it.
	held := func(name string, podLabels map[string]string) *schedulingv1alpha1.WaitingPod {
		GinkgoHelper()
		pod := pendingPod(ns, name, podLabels)
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		wp := &schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels},
			Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
		}
		Expect(adminClient.Create(ctx, wp)).To(Succeed())
		return wp
	}
	// holdBy writes the status the operator's mirror writes for a pod held
	// by plugins.
	holdBy := func(wp *schedulingv1alpha1.WaitingPod, plugins ...string) {
		GinkgoHelper()
		wp.Status.PodUID = wp.Spec.PodUID
		wp.Status.PendingPlugins = nil
		decidable := metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins, Message: "Held by other plugins"}
		for _, p := range plugins {
			wp.Status.PendingPlugins = append(wp.Status.PendingPlugins, schedulingv1alpha1.PendingPlugin{Name: p})
			if p == "ManualApproval" {
				decidable = metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision, Message: "ManualApproval holds the pod"}
			}
		}
		meta.SetStatusCondition(&wp.Status.Conditions, decidable)
		Expect(adminClient.Status().Update(ctx, wp)).To(Succeed())
	}
	get := func(name string) *schedulingv1alpha1.WaitingPod {
		GinkgoHelper()
		wp := &schedulingv1alpha1.WaitingPod{}
		Expect(adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wp)).To(Succeed())
		return wp
	}

	It("approves a WaitingPod in the caller's name, with the reason", func() {
		held("web-0", nil)
		out := run("alice", "approve", "waitingpod/web-0", "-n", ns, "--reason", "capacity reviewed")
		Expect(out).To(Equal("waitingpod/web-0 approved\n"))
		Expect(get("web-0").Spec).To(Equal(schedulingv1alpha1.WaitingPodSpec{
			PodUID: get("web-0").Spec.PodUID, Decision: schedulingv1alpha1.DecisionApprove,
			Reason: "capacity reviewed", DecidedBy: "alice",
		}))
	})

	It("rejects by pod name and accepts several names", func() {
		held("a", nil)
		held("b", nil)
		out := run("alice", "reject", "pod/a", "b", "--namespace", ns, "--reason", "not now")
		Expect(out).To(Equal("waitingpod/a rejected\nwaitingpod/b rejected\n"))
		for _, n := range []string{"a", "b"} {
			Expect(get(n).Spec.Decision).To(Equal(schedulingv1alpha1.DecisionReject))
			Expect(get(n).Spec.Reason).To(Equal("not now"))
		}
	})

	It("decides every undecided WaitingPod matching --all -l", func() {
		held("batch-0", map[string]string{"app": "batch"})
		held("batch-1", map[string]string{"app": "batch"})
		held("web-0", map[string]string{"app": "web"})
		out := run("alice", "approve", "--all", "-l", "app=batch", "-n", ns)
		Expect(out).To(Equal("waitingpod/batch-0 approved\nwaitingpod/batch-1 approved\n"))
		Expect(get("web-0").Spec.Decision).To(BeEmpty())
	})

	It("changes nothing with --dry-run and --dry-run=server", func() {
		held("dry", nil)
		Expect(run("alice", "approve", "waitingpod/dry", "-n", ns, "--dry-run")).To(Equal("waitingpod/dry approved (dry run)\n"))
		Expect(run("alice", "approve", "waitingpod/dry", "-n", ns, "--dry-run=server")).To(Equal("waitingpod/dry approved (server dry run)\n"))
		Expect(get("dry").Spec.Decision).To(BeEmpty())
	})

	It("records an approval ahead for a pending pod that is not held yet", func() {
		pod := pendingPod(ns, "early", map[string]string{"app": "early"})
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		out := run("alice", "approve", "pod/early", "-n", ns)
		Expect(out).To(ContainSubstring("pod/early approved ahead of Permit"))
		wp := get("early")
		Expect(wp.Spec.PodUID).To(Equal(pod.UID))
		Expect(wp.Spec.DecidedBy).To(Equal("alice"))
		Expect(wp.Labels).To(Equal(pod.Labels))
		Expect(wp.OwnerReferences).To(ConsistOf(HaveField("UID", pod.UID)))
	})

	It("explains unknown pods, pods not waiting and decisions already made", func() {
		r := kubectlAs("alice", "approve", "waitingpod/ghost", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(ContainSubstring(fmt.Sprintf(`waitingpod "ghost" not found in namespace %s`, ns)))

		bound := pendingPod(ns, "bound", nil)
		bound.Spec.NodeName = "node-1"
		Expect(adminClient.Create(ctx, bound)).To(Succeed())
		r = kubectlAs("alice", "approve", "pod/bound", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(ContainSubstring(fmt.Sprintf("pod %s/bound is not waiting at Permit: it is bound to node node-1", ns)))

		held("twice", nil)
		run("alice", "approve", "twice", "-n", ns)
		r = kubectlAs("alice", "reject", "twice", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(ContainSubstring(fmt.Sprintf("waitingpod %s/twice was already approved by alice; a decision cannot be changed", ns)))
		Expect(get("twice").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		r = kubectlAs("alice", "approve", "deployment/web", "-n", ns)
		Expect(r.Code).To(Equal(2))
		Expect(r.Stderr).To(ContainSubstring(`"deployment/web": only waitingpod/NAME and pod/NAME can be decided`))
	})

	It("refuses to decide a pod that only other Permit plugins hold, and says so", func() {
		holdBy(held("gang-0", nil), "Coscheduling")
		for verb, done := range map[string]string{"approve": "approved", "reject": "rejected"} {
			r := kubectlAs("alice", verb, "waitingpod/gang-0", "-n", ns)
			Expect(r.Code).To(Equal(1))
			Expect(r.Stdout).To(ContainSubstring(fmt.Sprintf("waitingpod %s/gang-0 was not %s: it is held by Coscheduling, not ManualApproval, and a decision does not release it", ns, done)))
			Expect(r.Stderr).To(ContainSubstring("error: 1 of 1 not"))
		}
		Expect(get("gang-0").Spec.Decision).To(BeEmpty())
	})

	It("skips pods only other Permit plugins hold under --all, with a warning", func() {
		holdBy(held("gang-0", map[string]string{"app": "batch"}), "Coscheduling")
		holdBy(held("batch-0", map[string]string{"app": "batch"}), "ManualApproval")
		r := kubectlAs("alice", "approve", "--all", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal("waitingpod/batch-0 approved\n"))
		Expect(r.Stderr).To(Equal("Warning: waitingpod/gang-0 skipped: it is held by Coscheduling, not ManualApproval, and a decision does not release it\n"))
		Expect(get("gang-0").Spec.Decision).To(BeEmpty())
		Expect(get("batch-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		r = kubectlAs("alice", "approve", "--all", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("no undecided WaitingPods held by ManualApproval in namespace " + ns))
	})

	It("says which other plugins still hold a pod it approves", func() {
		holdBy(held("both", nil), "Coscheduling", "ManualApproval")
		Expect(run("alice", "approve", "both", "-n", ns)).To(Equal("waitingpod/both approved; still held by Coscheduling, which an approval does not release\n"))
		Expect(get("both").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))
	})

	It("fills in the pod's UID on a WaitingPod that does not name it", func() {
		pod := pendingPod(ns, "unnamed", nil)
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		Expect(adminClient.Create(ctx, &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unnamed"}})).To(Succeed())
		Expect(run("alice", "approve", "unnamed", "-n", ns)).To(Equal("waitingpod/unnamed approved\n"))
		Expect(get("unnamed").Spec.PodUID).To(Equal(pod.UID))
	})

	It("is refused to users without the approver role", func() {
		held("guarded", nil)
		r := kubectlAs("bob", "approve", "waitingpod/guarded", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout + r.Stderr).To(ContainSubstring("forbidden"))
		Expect(get("guarded").Spec.Decision).To(BeEmpty())
	})

	It("refuses, by admission policy, a decision signed with someone else's name", func() {
		wp := held("forged", nil)
		Eventually(func() error {
			forged := get("forged")
			forged.Spec.Decision = schedulingv1alpha1.DecisionApprove
			forged.Spec.DecidedBy = "mallory"
			return aliceClient.Update(ctx, forged)
		}).Should(MatchError(ContainSubstring("spec.decidedBy must be alice, the user who sets the decision")))
		Expect(apierrors.IsForbidden(aliceClient.Update(ctx, withDecision(get(wp.Name), "mallory")))).To(BeTrue())

		// Signed with her own name, alice's decision goes through.
		Expect(aliceClient.Update(ctx, withDecision(get(wp.Name), "alice"))).To(Succeed())
	})
})

func withDecision(wp *schedulingv1alpha1.WaitingPod, by string) *schedulingv1alpha1.WaitingPod {
	wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
	wp.Spec.DecidedBy = by
	return wp
}

func pendingPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}
