package kubectl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
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
		if wp.Status.Profile == "" {
			wp.Status.Profile = manualProfile
		}
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
	// uid is the pod the WaitingPod name is for.
	uid := func(name string) types.UID {
		GinkgoHelper()
		return get(name).Spec.PodUID
	}

	It("approves a WaitingPod in the caller's name, with the reason", func() {
		held("web-0", nil)
		out := run("alice", "approve", "waitingpod/web-0", "-n", ns, "--reason", "capacity reviewed")
		Expect(out).To(Equal(decidedLine("waitingpod/web-0", "approved", uid("web-0"))))
		Expect(get("web-0").Spec).To(Equal(schedulingv1alpha1.WaitingPodSpec{
			PodUID: get("web-0").Spec.PodUID, Decision: schedulingv1alpha1.DecisionApprove,
			Reason: "capacity reviewed", DecidedBy: "alice",
		}))
	})

	It("rejects by pod name and accepts several names", func() {
		held("a", nil)
		held("b", nil)
		out := run("alice", "reject", "pod/a", "b", "--namespace", ns, "--reason", "not now")
		Expect(out).To(Equal(decidedLine("waitingpod/a", "rejected", uid("a")) + decidedLine("waitingpod/b", "rejected", uid("b"))))
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
		Expect(out).To(Equal(decidedLine("waitingpod/batch-0", "approved", uid("batch-0")) + decidedLine("waitingpod/batch-1", "approved", uid("batch-1"))))
		Expect(get("web-0").Spec.Decision).To(BeEmpty())
	})

	It("changes nothing with --dry-run and --dry-run=server", func() {
		held("dry", nil)
		Expect(run("alice", "approve", "waitingpod/dry", "-n", ns, "--dry-run")).To(Equal(decidedLine("waitingpod/dry", "approved", uid("dry"), "dry run")))
		Expect(run("alice", "approve", "waitingpod/dry", "-n", ns, "--dry-run=server")).To(Equal(decidedLine("waitingpod/dry", "approved", uid("dry"), "server dry run")))
		Expect(get("dry").Spec.Decision).To(BeEmpty())
	})

	It("records an approval ahead for a pending pod that is not held yet", func() {
		pod := pendingPod(ns, "early", map[string]string{"app": "early"})
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		out := run("alice", "approve", "pod/early", "-n", ns)
		Expect(out).To(Equal(fmt.Sprintf("pod/early approved ahead of Permit (pod UID %s): it is not held yet, the decision applies when it is\n", pod.UID)))
		wp := get("early")
		Expect(wp.Spec.PodUID).To(Equal(pod.UID))
		Expect(wp.Spec.DecidedBy).To(Equal("alice"))
		Expect(wp.Labels).To(Equal(pod.Labels))
		Expect(wp.OwnerReferences).To(ConsistOf(HaveField("UID", pod.UID)))
	})

	It("explains unknown pods, pods not waiting and decisions already made", func() {
		r := kubectlAs("alice", "approve", "waitingpod/ghost", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(Equal(fmt.Sprintf("error: waitingpod \"ghost\" not found in namespace %s (no WaitingPod and no Pod of that name)\nerror: 1 of 1 not approved: ghost\n", ns)))

		bound := pendingPod(ns, "bound", nil)
		bound.Spec.NodeName = "node-1"
		Expect(adminClient.Create(ctx, bound)).To(Succeed())
		r = kubectlAs("alice", "approve", "pod/bound", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(ContainSubstring(fmt.Sprintf("pod %s/bound is not waiting at Permit: it is bound to node node-1", ns)))

		held("twice", nil)
		run("alice", "approve", "twice", "-n", ns)
		r = kubectlAs("alice", "reject", "twice", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(ContainSubstring(fmt.Sprintf("waitingpod %s/twice was already approved by alice; a decision cannot be changed, and an approval cannot be undone\n", ns)))
		Expect(get("twice").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		// A rejection cannot change either, but it can be undone: whoever
		// decides again is told how, and the command told works.
		held("vetoed", nil)
		run("alice", "reject", "vetoed", "-n", ns)
		undo := fmt.Sprintf("kubectl reject --undo waitingpod/vetoed -n %s", ns)
		for _, verb := range []string{"approve", "reject"} {
			r = kubectlAs("alice", verb, "vetoed", "-n", ns)
			Expect(r.Code).To(Equal(1), verb)
			Expect(r.Stdout).To(BeEmpty(), verb)
			Expect(r.Stderr).To(HavePrefix(fmt.Sprintf("error: waitingpod %s/vetoed was already rejected by alice; a decision cannot be changed, but a rejection can be undone: "+
				"%s schedules the pod again, to be held for a new decision\n", ns, undo)), verb)
		}
		Expect(run("alice", strings.Fields(undo)[1:]...)).To(Equal("waitingpod/vetoed: rejection by alice undone; the pod is scheduled again for a new decision\n"))
		err := adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vetoed"}, &schedulingv1alpha1.WaitingPod{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the rejection was not undone")

		r = kubectlAs("alice", "approve", "deployment/web", "-n", ns)
		Expect(r.Code).To(Equal(2))
		Expect(r.Stderr).To(ContainSubstring(`"deployment/web": only waitingpod/NAME, pod/NAME and podgroup/NAME can be decided`))
	})

	It("refuses to decide a pod that only other Permit plugins hold, and says so", func() {
		holdBy(held("gang-0", nil), "Coscheduling")
		for verb, done := range map[string]string{"approve": "approved", "reject": "rejected"} {
			r := kubectlAs("alice", verb, "waitingpod/gang-0", "-n", ns)
			Expect(r.Code).To(Equal(1))
			Expect(r.Stdout).To(BeEmpty())
			Expect(r.Stderr).To(Equal(fmt.Sprintf("error: waitingpod %s/gang-0 was not %s: it is held by Coscheduling, not ManualApproval, and a decision does not release it\nerror: 1 of 1 not %[2]s: gang-0\n", ns, done)))
		}
		Expect(get("gang-0").Spec.Decision).To(BeEmpty())
	})

	It("skips pods only other Permit plugins hold under --all, with a warning", func() {
		holdBy(held("gang-0", map[string]string{"app": "batch"}), "Coscheduling")
		holdBy(held("batch-0", map[string]string{"app": "batch"}), "ManualApproval")
		r := kubectlAs("alice", "approve", "--all", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/batch-0", "approved", uid("batch-0"), "profile manual")))
		Expect(r.Stderr).To(Equal("Warning: waitingpod/gang-0 skipped: it is held by Coscheduling, not ManualApproval, and a decision does not release it\n"))
		Expect(get("gang-0").Spec.Decision).To(BeEmpty())
		Expect(get("batch-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		r = kubectlAs("alice", "approve", "--all", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("no undecided WaitingPods held by ManualApproval in namespace " + ns))
	})

	It("warns on stderr which other plugins still hold a pod it approves", func() {
		holdBy(held("both", nil), "Quota", "ManualApproval")
		warning := "Warning: waitingpod/both is still held by Quota, which an approval does not release\n"
		r := kubectlAs("alice", "approve", "both", "-n", ns, "--dry-run")
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/both", "approved", uid("both"), "profile manual", "dry run")))
		Expect(r.Stderr).To(Equal(warning))

		r = kubectlAs("alice", "approve", "both", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/both", "approved", uid("both"), "profile manual")))
		Expect(r.Stderr).To(Equal(warning))
		Expect(get("both").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		// A rejection does release the pod from ManualApproval's hold
		// and sends it back to pending, so it carries no such warning.
		holdBy(held("both-rejected", nil), "Quota", "ManualApproval")
		r = kubectlAs("alice", "reject", "both-rejected", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/both-rejected", "rejected", uid("both-rejected"), "profile manual")))
		Expect(r.Stderr).To(BeEmpty())
	})

	It("prints the pods decided on stdout and each failure on stderr, with names", func() {
		held("ok-0", nil)
		holdBy(held("gang-0", nil), "Coscheduling")
		held("ok-1", nil)
		r := kubectlAs("alice", "approve", "ok-0", "gang-0", "ghost", "pod/ok-1", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/ok-0", "approved", uid("ok-0")) + decidedLine("waitingpod/ok-1", "approved", uid("ok-1"))))
		Expect(r.Stderr).To(Equal(fmt.Sprintf(
			"error: waitingpod %[1]s/gang-0 was not approved: it is held by Coscheduling, not ManualApproval, and a decision does not release it\n"+
				"error: waitingpod \"ghost\" not found in namespace %[1]s (no WaitingPod and no Pod of that name)\n"+
				"error: 2 of 4 not approved: gang-0, ghost\n", ns)))
		Expect(get("ok-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))
		Expect(get("ok-1").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))
	})

	It("prints the pods decided under --all on stdout, and skips and failures on stderr", func() {
		holdBy(held("batch-0", nil), "ManualApproval")
		holdBy(held("gang-0", nil), "Coscheduling")
		// A WaitingPod that names no pod and has no Pod of its name: it
		// cannot be decided.
		Expect(adminClient.Create(ctx, &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}})).To(Succeed())
		r := kubectlAs("alice", "reject", "--all", "-n", ns, "--reason", "not now")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/batch-0", "rejected", uid("batch-0"), "profile manual")))
		Expect(r.Stderr).To(Equal(fmt.Sprintf(
			"Warning: waitingpod/gang-0 skipped: it is held by Coscheduling, not ManualApproval, and a decision does not release it\n"+
				"error: pod %s/orphan is gone; there is nothing to decide\n"+
				"error: 1 of 2 not rejected: orphan\n", ns)))
		Expect(get("batch-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionReject))
		Expect(get("orphan").Spec.Decision).To(BeEmpty())
	})

	It("passes the API server's warnings on to stderr, as kubectl does", func() {
		// A policy in Warn mode on this namespace's WaitingPods. Admission
		// runs for server dry runs too, so the warning comes back while
		// nothing is decided.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "warn-" + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{schedulingv1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"waitingpods"},
						},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.spec.decision)", Message: "decisions in this namespace are audited"}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
				}},
			},
		}
		for _, obj := range []client.Object{policy, binding} {
			Expect(adminClient.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(adminClient.Delete(context.Background(), obj)).To(Succeed()) })
		}
		held("audited", nil)
		Eventually(func(g Gomega) {
			r := kubectlAs("alice", "approve", "audited", "-n", ns, "--dry-run=server")
			g.Expect(r.Code).To(BeZero(), r.Stderr)
			g.Expect(r.Stdout).To(Equal(decidedLine("waitingpod/audited", "approved", uid("audited"), "server dry run")))
			g.Expect(r.Stderr).To(HavePrefix("Warning: "))
			g.Expect(r.Stderr).To(ContainSubstring("decisions in this namespace are audited"))
		}).Should(Succeed())
		Expect(get("audited").Spec.Decision).To(BeEmpty())
	})

	It("fills in the pod's UID on a WaitingPod that does not name it", func() {
		pod := pendingPod(ns, "unnamed", nil)
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		Expect(adminClient.Create(ctx, &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unnamed"}})).To(Succeed())
		Expect(run("alice", "approve", "unnamed", "-n", ns)).To(Equal(decidedLine("waitingpod/unnamed", "approved", pod.UID)))
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
	// member creates a pending pod of PodGroup group and its WaitingPod,
	// with the status the operator writes for it while plugins hold it.
	member := func(name, group string, plugins ...string) *schedulingv1alpha1.WaitingPod {
		GinkgoHelper()
		wp := held(name, map[string]string{podgroupv1alpha1.PodGroupLabel: group})
		wp.Status.PodGroup = group
		wp.Status.Profile = gangsProfile
		holdBy(wp, plugins...)
		return wp
	}

	It("decides every member of a podgroup at once, each in the caller's name, with the reason", func() {
		members := []*schedulingv1alpha1.WaitingPod{
			member("train-0", "train", "ManualApproval"),
			member("train-1", "train", "Coscheduling", "ManualApproval"),
			// Held by a plugin besides the gang's, which an approval
			// does not release and nothing says ever will.
			member("train-2", "train", "Coscheduling", "ManualApproval", "Quota"),
		}
		member("other-0", "other", "ManualApproval")
		// Labelled as a member but not shown in the group by the operator:
		// labels are whatever the WaitingPod's creator gave it.
		held("labelled", map[string]string{podgroupv1alpha1.PodGroupLabel: "train"})

		r := kubectlAs("alice", "approve", "podgroup/train", "-n", ns, "--reason", "gang reviewed")
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(
			decidedLine("waitingpod/train-0", "approved", uid("train-0"), "profile gangs") +
				decidedLine("waitingpod/train-1", "approved", uid("train-1"), "profile gangs") +
				decidedLine("waitingpod/train-2", "approved", uid("train-2"), "profile gangs") +
				"podgroup/train: 3 of 3 members approved; Coscheduling releases them once the group is complete\n"))
		// The gang's quorum is Coscheduling's to release: the approval
		// reaches ManualApproval only, and the gang goes by itself once
		// complete, which is no cause for a warning. Another plugin's
		// hold is.
		Expect(r.Stderr).To(Equal(
			"Warning: waitingpod/labelled skipped: the scheduler shows no profile holding it; it is no member of podgroup/train and was not approved\n" +
				"Warning: waitingpod/train-2 is still held by Quota, which an approval does not release\n"))
		// Each decision is pinned to the profile holding its pod.
		profile := &schedulingv1alpha1.SchedulingProfile{}
		Expect(adminClient.Get(ctx, client.ObjectKey{Name: gangsProfile}, profile)).To(Succeed())
		for _, wp := range members {
			Expect(get(wp.Name).Spec).To(Equal(schedulingv1alpha1.WaitingPodSpec{
				PodUID: wp.Spec.PodUID, Decision: schedulingv1alpha1.DecisionApprove, Reason: "gang reviewed", DecidedBy: "alice",
				ProfileUID: profile.UID,
			}), wp.Name)
		}
		Expect(get("other-0").Spec.Decision).To(BeEmpty())
		Expect(get("labelled").Spec.Decision).To(BeEmpty())

		// Run again, as for members that reach Permit later: those with
		// this decision already are reported, the new one is decided.
		member("train-3", "train", "Coscheduling", "ManualApproval")
		r = kubectlAs("alice", "approve", "podgroup/train", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(
			decidedLine("waitingpod/train-0", "already approved", uid("train-0"), "profile gangs") +
				decidedLine("waitingpod/train-1", "already approved", uid("train-1"), "profile gangs") +
				decidedLine("waitingpod/train-2", "already approved", uid("train-2"), "profile gangs") +
				decidedLine("waitingpod/train-3", "approved", uid("train-3"), "profile gangs") +
				"podgroup/train: 1 of 1 members approved, 3 already were; Coscheduling releases them once the group is complete\n"))

		// The opposite decision: as for a single decision, nothing changes.
		r = kubectlAs("alice", "reject", "pg/train", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal("podgroup/train: 0 of 4 members rejected\n"))
		Expect(r.Stderr).To(HaveSuffix("error: 4 of 4 not rejected: train-0, train-1, train-2, train-3\n"))
		Expect(r.Stderr).To(ContainSubstring(fmt.Sprintf("waitingpod %s/train-1 was already approved by alice; a decision cannot be changed", ns)))
	})

	It("says of a gang member approved alone that its gang releases it once complete", func() {
		wp := member("solo-0", "solo", "Coscheduling", "ManualApproval")
		note := ": Coscheduling releases it once podgroup/solo is complete\n"
		for _, dryRun := range []string{"--dry-run", "--dry-run=server"} {
			r := kubectlAs("alice", "approve", "waitingpod/solo-0", "-n", ns, dryRun)
			Expect(r.Code).To(BeZero(), r.Stderr)
			details := map[string]string{"--dry-run": "dry run", "--dry-run=server": "server dry run"}[dryRun]
			Expect(r.Stdout).To(Equal(strings.TrimSuffix(decidedLine("waitingpod/solo-0", "approved", wp.Spec.PodUID, "profile gangs", details), "\n") + note))
			Expect(r.Stderr).To(BeEmpty())
		}
		r := kubectlAs("alice", "approve", "waitingpod/solo-0", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(strings.TrimSuffix(decidedLine("waitingpod/solo-0", "approved", wp.Spec.PodUID, "profile gangs"), "\n") + note))
		Expect(r.Stderr).To(BeEmpty())
		Expect(get("solo-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))

		// A rejection ends the gang's hold too: nothing to add.
		wp = member("solo-1", "solo", "Coscheduling", "ManualApproval")
		Expect(run("alice", "reject", "waitingpod/solo-1", "-n", ns)).To(Equal(decidedLine("waitingpod/solo-1", "rejected", wp.Spec.PodUID, "profile gangs")))
	})

	It("rejects every member of a podgroup, named pg/NAME or podgroups/NAME, and dry-runs", func() {
		member("gang-0", "gang", "ManualApproval")
		member("gang-1", "gang", "Coscheduling", "ManualApproval")
		Expect(run("alice", "reject", "pg/gang", "-n", ns, "--dry-run")).To(Equal(
			decidedLine("waitingpod/gang-0", "rejected", uid("gang-0"), "profile gangs", "dry run") +
				decidedLine("waitingpod/gang-1", "rejected", uid("gang-1"), "profile gangs", "dry run") +
				"podgroup/gang: 2 of 2 members rejected (dry run)\n"))
		Expect(run("alice", "reject", "podgroups/gang", "-n", ns, "--dry-run=server")).To(Equal(
			decidedLine("waitingpod/gang-0", "rejected", uid("gang-0"), "profile gangs", "server dry run") +
				decidedLine("waitingpod/gang-1", "rejected", uid("gang-1"), "profile gangs", "server dry run") +
				"podgroup/gang: 2 of 2 members rejected (server dry run)\n"))
		Expect(get("gang-0").Spec.Decision).To(BeEmpty())

		r := kubectlAs("alice", "reject", "podgroup/gang", "-n", ns, "--reason", "over budget")
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(
			decidedLine("waitingpod/gang-0", "rejected", uid("gang-0"), "profile gangs") +
				decidedLine("waitingpod/gang-1", "rejected", uid("gang-1"), "profile gangs") +
				"podgroup/gang: 2 of 2 members rejected\n"))
		Expect(r.Stderr).To(BeEmpty())
		for _, n := range []string{"gang-0", "gang-1"} {
			Expect(get(n).Spec).To(HaveField("Decision", schedulingv1alpha1.DecisionReject))
			Expect(get(n).Spec).To(HaveField("Reason", "over budget"))
			Expect(get(n).Spec).To(HaveField("DecidedBy", "alice"))
		}
	})

	It("fails for a podgroup with no member held, and says so", func() {
		// A pod of the group not held yet has no WaitingPod to show it.
		Expect(adminClient.Create(ctx, pendingPod(ns, "late-0", map[string]string{podgroupv1alpha1.PodGroupLabel: "late"}))).To(Succeed())
		for verb, done := range map[string]string{"approve": "approved", "reject": "rejected"} {
			r := kubectlAs("alice", verb, "podgroup/late", "-n", ns)
			Expect(r.Code).To(Equal(1), verb)
			Expect(r.Stdout).To(BeEmpty(), verb)
			Expect(r.Stderr).To(Equal(fmt.Sprintf(
				"error: podgroup/late has no members held at Permit in namespace %s: no WaitingPod shows that group\n"+
					"error: 1 of 1 not %s: podgroup/late\n", ns, done)), verb)
		}
		err := adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late-0"}, &schedulingv1alpha1.WaitingPod{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a WaitingPod was made for a pod not held")
	})

	It("decides the other members of a podgroup but fails for one only other Permit plugins hold", func() {
		member("mixed-0", "mixed", "Coscheduling", "ManualApproval")
		member("mixed-1", "mixed", "Coscheduling")
		// The approved member goes with its gang; a rejected one does not
		// wait for it.
		gangNote := map[string]string{"approve": "; Coscheduling releases them once the group is complete", "reject": ""}
		for verb, done := range map[string]string{"approve": "approved", "reject": "rejected"} {
			r := kubectlAs("alice", verb, "podgroup/mixed", "-n", ns, "--dry-run=server")
			Expect(r.Code).To(Equal(1), verb)
			Expect(r.Stdout).To(Equal(decidedLine("waitingpod/mixed-0", done, uid("mixed-0"), "profile gangs", "server dry run")+
				fmt.Sprintf("podgroup/mixed: 1 of 2 members %s (server dry run)%s\n", done, gangNote[verb])), verb)
			Expect(r.Stderr).To(HaveSuffix(fmt.Sprintf(
				"error: waitingpod %s/mixed-1 was not %s: it is held by Coscheduling, not ManualApproval, and a decision does not release it\n"+
					"error: 1 of 2 not %[2]s: mixed-1\n", ns, done)), verb)
		}
		r := kubectlAs("alice", "approve", "podgroup/mixed", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/mixed-0", "approved", uid("mixed-0"), "profile gangs") + "podgroup/mixed: 1 of 2 members approved" + gangNote["approve"] + "\n"))
		Expect(get("mixed-0").Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))
		Expect(get("mixed-1").Spec.Decision).To(BeEmpty())
	})

	It("counts a podgroup's members with the other names it is given", func() {
		member("pair-0", "pair", "ManualApproval")
		member("pair-1", "pair", "ManualApproval")
		held("solo", nil)
		r := kubectlAs("alice", "approve", "podgroup/pair", "solo", "podgroup/none", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal(
			decidedLine("waitingpod/pair-0", "approved", uid("pair-0"), "profile gangs") +
				decidedLine("waitingpod/pair-1", "approved", uid("pair-1"), "profile gangs") +
				"podgroup/pair: 2 of 2 members approved\n" +
				decidedLine("waitingpod/solo", "approved", uid("solo"))))
		Expect(r.Stderr).To(Equal(fmt.Sprintf(
			"error: podgroup/none has no members held at Permit in namespace %s: no WaitingPod shows that group\n"+
				"error: 1 of 4 not approved: podgroup/none\n", ns)))
	})

	It("never decides a pod of another profile that claims a podgroup, and lists it as skipped", func() {
		member("crew-0", "crew", "ManualApproval")
		// A pod of the manual profile, which does not run Coscheduling,
		// whose author labelled it into the crew; its status says so too
		// (as an operator that took the group from the label wrote it).
		rider := held("rider", map[string]string{podgroupv1alpha1.PodGroupLabel: "crew"})
		rider.Status.PodGroup = "crew"
		holdBy(rider, "ManualApproval")

		r := kubectlAs("alice", "approve", "podgroup/crew", "-n", ns)
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(decidedLine("waitingpod/crew-0", "approved", uid("crew-0"), "profile gangs") + "podgroup/crew: 1 of 1 members approved\n"))
		Expect(r.Stderr).To(Equal(`Warning: waitingpod/rider skipped: its profile "manual" does not run Coscheduling, so its pod's group label makes it no member; it is no member of podgroup/crew and was not approved` + "\n"))
		Expect(get("rider").Spec.Decision).To(BeEmpty())
	})

	It("prints the UID decided, and refuses with --pod-uid a pod that is not the one reviewed", func() {
		reviewed := held("pinned", nil)
		holdBy(reviewed, "ManualApproval")
		for verb, done := range map[string]string{"approve": "approved", "reject": "rejected"} {
			r := kubectlAs("alice", verb, "pinned", "-n", ns, "--pod-uid", "0a1b2c3d-not-the-pod")
			Expect(r.Code).To(Equal(1), verb)
			Expect(r.Stdout).To(BeEmpty(), verb)
			Expect(r.Stderr).To(Equal(fmt.Sprintf("error: waitingpod %s/pinned is for pod UID %s, not 0a1b2c3d-not-the-pod (--pod-uid): nothing was %s\nerror: 1 of 1 not %[3]s: pinned\n", ns, reviewed.Spec.PodUID, done)), verb)
		}
		Expect(get("pinned").Spec.Decision).To(BeEmpty())

		// Replaced under the same name before any WaitingPod shows it:
		// the pod of that name now is not the one reviewed.
		early := pendingPod(ns, "replaced", nil)
		Expect(adminClient.Create(ctx, early)).To(Succeed())
		Expect(adminClient.Delete(ctx, early)).To(Succeed())
		later := pendingPod(ns, "replaced", nil)
		Expect(adminClient.Create(ctx, later)).To(Succeed())
		r := kubectlAs("alice", "approve", "pod/replaced", "-n", ns, "--pod-uid", string(early.UID))
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(HavePrefix(fmt.Sprintf("error: pod %s/replaced is now pod UID %s, not %s (--pod-uid): it was replaced, and nothing was approved\n", ns, later.UID, early.UID)))
		err := adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "replaced"}, &schedulingv1alpha1.WaitingPod{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a decision was recorded for a pod not reviewed")

		// The UID reviewed: decided, and printed.
		Expect(run("alice", "approve", "pinned", "-n", ns, "--pod-uid", string(reviewed.Spec.PodUID))).To(
			Equal(decidedLine("waitingpod/pinned", "approved", reviewed.Spec.PodUID, "profile manual")))
		Expect(run("alice", "approve", "pod/replaced", "-n", ns, "--pod-uid", string(later.UID))).To(
			Equal(fmt.Sprintf("pod/replaced approved ahead of Permit (pod UID %s): it is not held yet, the decision applies when it is\n", later.UID)))
	})

	It("does not follow a WaitingPod's pod replaced under the same name", func() {
		wp := held("moved", nil)
		Expect(adminClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moved"}})).To(Succeed())
		later := pendingPod(ns, "moved", nil)
		Expect(adminClient.Create(ctx, later)).To(Succeed())
		r := kubectlAs("alice", "approve", "moved", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		Expect(r.Stderr).To(HavePrefix(fmt.Sprintf("error: waitingpod %s/moved is for pod UID %s, but the pod of that name now is pod UID %s: nothing was approved\n", ns, wp.Spec.PodUID, later.UID)))
		Expect(get("moved").Spec.Decision).To(BeEmpty())
	})

	It("refuses to decide a pod that no profile running ManualApproval serves, unless --ahead", func() {
		for name, scheduler := range map[string]string{"unserved": "nobody", "guarded": gangsProfile, "default": ""} {
			pod := pendingPod(ns, name, nil)
			pod.Spec.SchedulerName = scheduler
			Expect(adminClient.Create(ctx, pod)).To(Succeed())
		}
		// gangs runs ManualApproval; a profile that does not:
		servedProfile("no-approval", "  percentageOfNodesToScore: 50")
		unguarded := pendingPod(ns, "unguarded-2", nil)
		unguarded.Spec.SchedulerName = "no-approval"
		Expect(adminClient.Create(ctx, unguarded)).To(Succeed())

		for name, msg := range map[string]string{
			"unserved":    `pod %s/unserved is for scheduler "nobody", which no SchedulingProfile serves: ManualApproval never holds it, so nothing was approved; pass --ahead if the decision is meant for a profile still to come`,
			"default":     `pod %s/default is for scheduler "default-scheduler", which no SchedulingProfile serves: ManualApproval never holds it, so nothing was approved; pass --ahead if the decision is meant for a profile still to come`,
			"unguarded-2": `pod %s/unguarded-2 is scheduled by profile "no-approval", which does not run ManualApproval at Permit: a decision would release nothing, so nothing was approved; pass --ahead if ManualApproval is still to be added`,
		} {
			r := kubectlAs("alice", "approve", "pod/"+name, "-n", ns)
			Expect(r.Code).To(Equal(1), name)
			Expect(r.Stdout).To(BeEmpty(), name)
			Expect(r.Stderr).To(Equal(fmt.Sprintf("error: "+msg+"\nerror: 1 of 1 not approved: %s\n", ns, name)), name)
			err := adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &schedulingv1alpha1.WaitingPod{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), name)

			out := run("alice", "approve", "pod/"+name, "-n", ns, "--ahead")
			Expect(out).To(ContainSubstring("pod/" + name + " approved ahead of Permit (pod UID "))
			Expect(get(name).Spec.Decision).To(Equal(schedulingv1alpha1.DecisionApprove))
		}
		// A profile that runs ManualApproval needs no --ahead.
		Expect(run("alice", "approve", "pod/guarded", "-n", ns)).To(ContainSubstring("pod/guarded approved ahead of Permit"))

		r := kubectlAs("alice", "approve", "podgroup/x", "--ahead", "-n", ns)
		Expect(r.Code).To(Equal(2))
		Expect(r.Stderr).To(ContainSubstring(`"podgroup/x": --pod-uid and --ahead take waitingpod/NAME or pod/NAME`))
		r = kubectlAs("alice", "approve", "a", "b", "--pod-uid", "u", "-n", ns)
		Expect(r.Code).To(Equal(2))
		Expect(r.Stderr).To(ContainSubstring("--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME"))
	})

	It("says in its help that members held later are not covered, and undoes no group", func() {
		r := kubectlAs("alice", "approve", "--help")
		Expect(r.Code).To(BeZero())
		Expect(r.Stdout + r.Stderr).To(ContainSubstring("podgroup/NAME"))
		Expect(r.Stdout + r.Stderr).To(ContainSubstring("members that reach Permit after the command are not covered"))

		r = kubectlAs("alice", "reject", "--undo", "podgroup/train", "-n", ns)
		Expect(r.Code).To(Equal(2))
		Expect(r.Stderr).To(ContainSubstring(`"podgroup/train": --undo takes waitingpod/NAME or pod/NAME: name each rejection to undo`))
	})

	It("shows each WaitingPod's group, what its plugins wait for and whether a decision releases it in kubectl get", func() {
		wp := member("cols-0", "cols", "Coscheduling", "ManualApproval")
		wp.Status.PendingPlugins[0].Message = "3/4 members assigned"
		wp.Status.Message = "Coscheduling: 3/4 members assigned"
		Expect(adminClient.Status().Update(ctx, wp)).To(Succeed())
		member("cols-1", "cols", "Coscheduling")
		held("plain", nil)

		out := run("alice", "get", "waitingpods", "-n", ns)
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{
			"NAME", "POD", "PROFILE", "GROUP", "DECIDABLE", "DECISION", "MESSAGE", "AGE"}))
		rows := table(out)
		// Decidable says whether ManualApproval is among the pending
		// plugins, which -o wide lists.
		Expect(rows).To(HaveKeyWithValue("cols-0", And(
			HaveKeyWithValue("GROUP", "cols"),
			HaveKeyWithValue("DECIDABLE", "True"),
			HaveKeyWithValue("MESSAGE", "Coscheduling: 3/4 members assigned"))))
		Expect(rows).To(HaveKeyWithValue("cols-1", HaveKeyWithValue("DECIDABLE", "False")))
		Expect(rows).To(HaveKeyWithValue("plain", And(
			HaveKeyWithValue("GROUP", ""), HaveKeyWithValue("DECIDABLE", ""), HaveKeyWithValue("MESSAGE", ""))))
	})
})

// table reads kubectl's table output into its rows by NAME, each row's
// cells by column header. Cells are cut at the columns' header offsets, as
// kubectl aligns them, so a cell may hold spaces (a condition's message).
func table(out string) map[string]map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	headers := regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1)
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, h := range headers {
			end := len(line)
			if i+1 < len(headers) {
				end = min(headers[i+1][0], len(line))
			}
			row[lines[0][h[0]:h[1]]] = strings.TrimSpace(line[min(h[0], len(line)):end])
		}
		rows[row["NAME"]] = row
	}
	return rows
}

func withDecision(wp *schedulingv1alpha1.WaitingPod, by string) *schedulingv1alpha1.WaitingPod {
	wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
	wp.Spec.DecidedBy = by
	return wp
}

// pendingPod is a pod of the manual profile, which runs ManualApproval.
func pendingPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: manualProfile,
			Containers:    []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
}

// decidedLine is the line kubectl approve and reject print for a pod
// decided: what was done to subject, then the pod's UID and details (the
// profile holding it, a dry run).
func decidedLine(subject, done string, uid types.UID, details ...string) string {
	return fmt.Sprintf("%s %s (%s)\n", subject, done, strings.Join(append([]string{"pod UID " + string(uid)}, details...), ", "))
}

var _ = Describe("kubectl reject --undo", func() {
	ctx := context.Background()
	var ns string

	newNamespace := func() string {
		GinkgoHelper()
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "undo-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		return n.Name
	}
	BeforeEach(func() { ns = newNamespace() })

	// decided creates a pending pod and its WaitingPod in namespace, and has
	// alice decide it with verb ("approve" or "reject"; "" leaves it undecided).
	decided := func(namespace, name, verb string) *schedulingv1alpha1.WaitingPod {
		GinkgoHelper()
		pod := pendingPod(namespace, name, nil)
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		wp := &schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
		}
		Expect(adminClient.Create(ctx, wp)).To(Succeed())
		if verb != "" {
			run("alice", verb, "waitingpod/"+name, "-n", namespace, "--reason", "not now")
		}
		Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(wp), wp)).To(Succeed())
		return wp
	}
	gone := func(namespace, name string) bool {
		err := adminClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &schedulingv1alpha1.WaitingPod{})
		return apierrors.IsNotFound(err)
	}

	It("undoes a rejection by removing the rejected WaitingPod", func() {
		decided(ns, "r", "reject")
		out := run("alice", "reject", "--undo", "pod/r", "-n", ns)
		Expect(out).To(Equal("waitingpod/r: rejection by alice undone; the pod is scheduled again for a new decision\n"))
		Expect(gone(ns, "r")).To(BeTrue())
	})

	It("refuses to undo what is not a rejection, and leaves it", func() {
		decided(ns, "open", "")
		decided(ns, "ok", "approve")
		for name, msg := range map[string]string{
			"open":  fmt.Sprintf("waitingpod %s/open is not decided: there is no rejection to undo", ns),
			"ok":    fmt.Sprintf("waitingpod %s/ok was approved, not rejected: only a rejection can be undone", ns),
			"ghost": fmt.Sprintf("waitingpod %s/ghost not found: there is no rejection to undo", ns),
		} {
			r := kubectlAs("alice", "reject", "--undo", name, "-n", ns)
			Expect(r.Code).To(Equal(1), name)
			Expect(r.Stdout).To(BeEmpty(), name)
			Expect(r.Stderr).To(Equal("error: "+msg+"\nerror: 1 of 1 rejections not undone: "+name+"\n"), name)
		}
		Expect(gone(ns, "open")).To(BeFalse())
		Expect(gone(ns, "ok")).To(BeFalse())
	})

	It("prints the rejections undone on stdout and each failure on stderr", func() {
		decided(ns, "r", "reject")
		decided(ns, "open", "")
		r := kubectlAs("alice", "reject", "--undo", "open", "r", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(Equal("waitingpod/r: rejection by alice undone; the pod is scheduled again for a new decision\n"))
		Expect(r.Stderr).To(Equal(fmt.Sprintf("error: waitingpod %s/open is not decided: there is no rejection to undo\nerror: 1 of 2 rejections not undone: open\n", ns)))
		Expect(gone(ns, "r")).To(BeTrue())
		Expect(gone(ns, "open")).To(BeFalse())
	})

	It("changes nothing with --dry-run and --dry-run=server", func() {
		decided(ns, "dry", "reject")
		Expect(run("alice", "reject", "--undo", "dry", "-n", ns, "--dry-run")).To(Equal("waitingpod/dry: rejection by alice undone; the pod is scheduled again for a new decision (dry run)\n"))
		Expect(run("alice", "reject", "--undo", "dry", "-n", ns, "--dry-run=server")).To(Equal("waitingpod/dry: rejection by alice undone; the pod is scheduled again for a new decision (server dry run)\n"))
		Expect(gone(ns, "dry")).To(BeFalse())
	})

	It("takes names only, records nothing, and is kubectl reject's alone", func() {
		for args, msg := range map[string]string{
			"reject --undo --all":            "--undo takes names, not --all: name each rejection to undo",
			"reject --undo x --reason again": "--reason does not go with --undo: undoing records no decision",
			"approve --undo x":               "unknown flag: --undo",
		} {
			r := kubectlAs("alice", append(strings.Fields(args), "-n", ns)...)
			Expect(r.Code).To(Equal(2), args)
			Expect(r.Stderr).To(ContainSubstring(msg), args)
		}
	})

	It("is allowed by the approver role only where it is bound", func() {
		other := newNamespace()
		decided(ns, "mine", "reject")
		decided(other, "theirs", "reject")
		// carol approves in ns alone: the approver ClusterRole bound in one
		// namespace. The admin acts as her by impersonation.
		run("admin", "create", "rolebinding", "carol-approves", "--clusterrole=approver", "--user=carol", "-n", ns)

		Eventually(func() string {
			return kubectlAs("admin", "reject", "--undo", "mine", "-n", ns, "--as", "carol").Stdout
		}).Should(Equal("waitingpod/mine: rejection by alice undone; the pod is scheduled again for a new decision\n"))
		Expect(gone(ns, "mine")).To(BeTrue())

		for user, args := range map[string][]string{
			"carol": {"reject", "--undo", "theirs", "-n", other, "--as", "carol"},
			"bob":   {"reject", "--undo", "theirs", "-n", other},
		} {
			as := "admin"
			if user == "bob" {
				as = "bob"
			}
			r := kubectlAs(as, args...)
			Expect(r.Code).To(Equal(1), user)
			Expect(r.Stdout+r.Stderr).To(ContainSubstring("forbidden"), user)
		}
		Expect(gone(other, "theirs")).To(BeFalse())
	})
})

// With the operator running: the undone rejection sends the pod back to
// ManualApproval at once, not after the unschedulable pool's five-minute
// flush, and the new hold can be decided like the first; and kubectl get
// shows from the profiles' status why one is not accepted.
var _ = Describe("kubectl with the operator running", Ordered, func() {
	ctx := context.Background()

	BeforeAll(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		running, err := testenv.StartOperator(context.Background(), env.Config, testenv.OperatorOptions{
			Manager: ctrl.Options{Scheme: env.Scheme},
			Operator: operator.Options{
				ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
				WaitingPodRetention:    2 * time.Second,
			},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(running.Stop()).To(Succeed()) })

		Expect(testenv.CreateNode(ctx, adminClient, testenv.Node("undo-node", "4", "8Gi", nil))).To(Succeed())
		manifest := filepath.Join(GinkgoT().TempDir(), "profile.yaml")
		Expect(os.WriteFile(manifest, []byte(`apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: undo-approvals
spec:
  plugins:
    multiPoint:
      enabled:
      - name: ManualApproval
`), 0o644)).To(Succeed())
		run("admin", "apply", "-f", manifest)
		Eventually(func() *metav1.Condition {
			sp := &schedulingv1alpha1.SchedulingProfile{}
			if err := adminClient.Get(ctx, client.ObjectKey{Name: "undo-approvals"}, sp); err != nil {
				return nil
			}
			return meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileActive)
		}).Should(HaveField("Status", metav1.ConditionTrue))
	})

	// applyProfile applies a SchedulingProfile with kubectl, as a user would.
	applyProfile := func(name, spec string) {
		GinkgoHelper()
		manifest := filepath.Join(GinkgoT().TempDir(), name+".yaml")
		Expect(os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: %s
spec:
%s
`, name, spec)), 0o644)).To(Succeed())
		run("admin", "apply", "-f", manifest)
		DeferCleanup(func() { run("admin", "delete", "schedulingprofile", name, "--ignore-not-found") })
	}
	accepted := func(name string) func() *metav1.Condition {
		return func() *metav1.Condition {
			sp := &schedulingv1alpha1.SchedulingProfile{}
			if err := adminClient.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil || sp.Status.ObservedGeneration != sp.Generation {
				return nil
			}
			return meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileAccepted)
		}
	}

	It("shows in kubectl get -o wide whether the current generation serves, which does, and why", func() {
		applyProfile("columns-guarded", "  percentageOfNodesToScore: 50")
		Eventually(accepted("columns-guarded")).Should(HaveField("Status", metav1.ConditionTrue))
		// An invalid update: the last valid generation keeps serving.
		applyProfile("columns-guarded", "  plugins:\n    filter:\n      enabled:\n      - name: NoSuchPlugin")
		Eventually(accepted("columns-guarded")).Should(HaveField("Status", metav1.ConditionFalse))
		// Never valid: nothing serves.
		applyProfile("columns-invalid", "  plugins:\n    score:\n      enabled:\n      - name: NoSuchScore")
		Eventually(accepted("columns-invalid")).Should(HaveField("Status", metav1.ConditionFalse))

		out := run("admin", "get", "schedulingprofiles", "undo-approvals", "columns-guarded", "columns-invalid")
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{"NAME", "SCHEDULERNAME", "READY", "ACCEPTED", "ACTIVE", "AGE"}))
		rows := table(out)
		Expect(rows).To(HaveKeyWithValue("undo-approvals", And(
			HaveKeyWithValue("READY", "True"), HaveKeyWithValue("ACCEPTED", "True"), HaveKeyWithValue("ACTIVE", "True"))))
		Expect(rows).To(HaveKeyWithValue("columns-guarded", And(
			HaveKeyWithValue("SCHEDULERNAME", "columns-guarded"), HaveKeyWithValue("READY", "False"), HaveKeyWithValue("ACCEPTED", "False"), HaveKeyWithValue("ACTIVE", "True"))))
		Expect(rows).To(HaveKeyWithValue("columns-invalid", And(
			HaveKeyWithValue("READY", "False"), HaveKeyWithValue("ACCEPTED", "False"), HaveKeyWithValue("ACTIVE", "False"))))

		out = run("admin", "get", "schedulingprofiles", "undo-approvals", "columns-guarded", "columns-invalid", "-o", "wide")
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{
			"NAME", "SCHEDULERNAME", "READY", "ACCEPTED", "ACTIVE", "AGE", "GENERATION", "SERVING", "SHADOWOF", "EVALUATED", "SAMENODE", "REASON", "MESSAGE"}))
		rows = table(out)
		Expect(rows).To(HaveKeyWithValue("undo-approvals", And(
			HaveKeyWithValue("ACCEPTED", "True"), HaveKeyWithValue("ACTIVE", "True"),
			HaveKeyWithValue("GENERATION", "1"), HaveKeyWithValue("SERVING", "1"),
			HaveKeyWithValue("REASON", schedulingv1alpha1.ReasonServing))))
		Expect(rows).To(HaveKeyWithValue("columns-guarded", And(
			HaveKeyWithValue("ACCEPTED", "False"), HaveKeyWithValue("ACTIVE", "True"),
			HaveKeyWithValue("GENERATION", "2"), HaveKeyWithValue("SERVING", "1"),
			HaveKeyWithValue("REASON", schedulingv1alpha1.ReasonInvalidSpec),
			HaveKeyWithValue("MESSAGE", ContainSubstring(`Filter plugin "NoSuchPlugin": no such plugin is registered; generation 1, the last valid one, keeps serving`)))))
		Expect(rows).To(HaveKeyWithValue("columns-invalid", And(
			HaveKeyWithValue("ACCEPTED", "False"), HaveKeyWithValue("ACTIVE", "False"),
			HaveKeyWithValue("GENERATION", "1"), HaveKeyWithValue("SERVING", ""),
			HaveKeyWithValue("REASON", schedulingv1alpha1.ReasonInvalidSpec),
			HaveKeyWithValue("MESSAGE", And(ContainSubstring("NoSuchScore"), HaveSuffix("; no generation of this profile serves"))))))
	})

	// docs/approvals.md shows what `kubectl describe pod` prints of a held
	// pod; the doc's conditions and event lines must be what it prints.
	It("describes a held pod as docs/approvals.md shows", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "describe-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns := n.Name
		pod := testenv.Pod(ns, "train-0", "undo-approvals", "100m", "100Mi")
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		var out string
		Eventually(func(g Gomega) {
			out = run("admin", "describe", "pod", "train-0", "-n", ns)
			g.Expect(out).To(ContainSubstring("WaitingAtPermit"))
			g.Expect(out).To(MatchRegexp(`(?m)^\s+Normal\s+WaitingAtPermit\s`))
		}).Should(Succeed())
		doc := describedHeldPod()
		for _, section := range []string{"Conditions:", "Events:"} {
			want, got := describeSection(doc, section), describeSection(out, section)
			Expect(got).To(HaveLen(len(want)), "%s\ndoc:\n%s\nkubectl describe:\n%s", section, doc, out)
			for i := range want {
				Expect(normalizeDescribeLine(got[i], ns)).To(Equal(normalizeDescribeLine(want[i], "batch")), "%s line %d\ndoc:\n%s\nkubectl describe:\n%s", section, i, doc, out)
			}
		}
	})

	It("holds the pod again for a new decision, which can then bind it", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "undo-op-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns := n.Name
		pod := testenv.Pod(ns, "train-0", "undo-approvals", "1", "1Gi")
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		waitingPod := func() *schedulingv1alpha1.WaitingPod {
			wp := &schedulingv1alpha1.WaitingPod{}
			if err := adminClient.Get(ctx, client.ObjectKeyFromObject(pod), wp); err != nil {
				return nil
			}
			return wp
		}
		isHeld := func(wp *schedulingv1alpha1.WaitingPod) bool {
			return wp != nil && meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting)
		}
		podScheduled := func() *corev1.PodCondition {
			p := &corev1.Pod{}
			if err := adminClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return nil
			}
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.PodScheduled {
					return &p.Status.Conditions[i]
				}
			}
			return nil
		}
		boundTo := func() string {
			p := &corev1.Pod{}
			Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
			return p.Spec.NodeName
		}

		Eventually(waitingPod).Should(Satisfy(isHeld))
		run("alice", "reject", "pod/train-0", "-n", ns, "--reason", "over budget")
		Eventually(podScheduled).Should(HaveField("Message", ContainSubstring("rejected at Permit by alice: over budget")))
		rejected := waitingPod()
		Expect(rejected.Spec.Decision).To(Equal(schedulingv1alpha1.DecisionReject))

		Expect(run("alice", "reject", "--undo", "pod/train-0", "-n", ns)).To(Equal(
			"waitingpod/train-0: rejection by alice undone; the pod is scheduled again for a new decision\n"))
		// Held again under a new, undecided WaitingPod well before the
		// unschedulable pool's five-minute flush would have retried it.
		Eventually(waitingPod, "15s").Should(And(
			Satisfy(isHeld),
			HaveField("UID", Not(Equal(rejected.UID))),
			HaveField("Spec.Decision", BeEmpty()),
			HaveField("Spec.PodUID", Equal(pod.UID)),
		))
		Expect(boundTo()).To(BeEmpty())

		Expect(run("alice", "approve", "pod/train-0", "-n", ns)).To(Equal(decidedLine("waitingpod/train-0", "approved", pod.UID, "profile undo-approvals")))
		Eventually(boundTo).Should(Equal("undo-node"))
	})

	It("adds the node, the deadline and every pending plugin in kubectl get -o wide", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wide-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns := n.Name
		applyProfile("wide-columns", "  plugins:\n    multiPoint:\n      enabled:\n      - name: Coscheduling\n      - name: ManualApproval\n"+
			"    queueSort:\n      enabled:\n      - name: Coscheduling\n      disabled:\n      - name: \"*\"")
		Eventually(accepted("wide-columns")).Should(HaveField("Status", metav1.ConditionTrue))
		// Both members are held by ManualApproval, so neither counts toward
		// the gang's quorum yet: Coscheduling holds both too.
		Expect(adminClient.Create(ctx, &podgroupv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pair"},
			Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: 2},
		})).To(Succeed())
		for _, name := range []string{"pair-0", "pair-1"} {
			pod := testenv.Pod(ns, name, "wide-columns", "100m", "100Mi")
			pod.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "pair"}
			Expect(adminClient.Create(ctx, pod)).To(Succeed())
		}
		Eventually(func() []schedulingv1alpha1.PendingPlugin {
			wp := &schedulingv1alpha1.WaitingPod{}
			_ = adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pair-0"}, wp)
			return wp.Status.PendingPlugins
		}).Should(HaveLen(2))

		out := run("alice", "get", "waitingpods", "-n", ns)
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).NotTo(ContainElements("NODE", "PLUGINS", "EXPIRES"))
		// Each status write of the mirror adds what it has seen so far.
		Eventually(func(g Gomega) {
			out := run("alice", "get", "waitingpods", "-n", ns, "-o", "wide")
			g.Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{
				"NAME", "POD", "NODE", "PROFILE", "GROUP", "PLUGINS", "DECIDABLE", "DECISION", "EXPIRES", "MESSAGE", "AGE"}))
			g.Expect(table(out)).To(HaveKeyWithValue("pair-0", And(
				HaveKeyWithValue("NODE", "undo-node"),
				HaveKeyWithValue("PLUGINS", "Coscheduling,ManualApproval"),
				HaveKeyWithValue("DECIDABLE", "True"),
				HaveKeyWithValue("EXPIRES", MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)))), out)
		}).Should(Succeed())

		// Rejecting a member rejects its gang: nothing holds either pod,
		// and nothing of what held them stays in the columns.
		Expect(run("alice", "reject", "pair-1", "-n", ns, "--reason", "columns")).To(ContainSubstring("rejected"))
		Eventually(func(g Gomega) {
			out := run("alice", "get", "waitingpods", "-n", ns, "-o", "wide")
			for _, name := range []string{"pair-0", "pair-1"} {
				g.Expect(table(out)).To(HaveKeyWithValue(name, And(
					HaveKeyWithValue("PLUGINS", ""), HaveKeyWithValue("EXPIRES", ""))), out)
			}
		}).Should(Succeed())
	})

	It("shows no group for pods of a profile without Coscheduling, and approving the group releases none", func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "group-op-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns := n.Name
		// The group exists; the pods' author labelled them into it, but
		// their profile runs ManualApproval only, so no gang holds them.
		Expect(adminClient.Create(ctx, &podgroupv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"},
			Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: 2},
		})).To(Succeed())
		var pods []*corev1.Pod
		for _, name := range []string{"gang-0", "gang-1"} {
			pod := testenv.Pod(ns, name, "undo-approvals", "100m", "100Mi")
			pod.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "gang"}
			Expect(adminClient.Create(ctx, pod)).To(Succeed())
			pods = append(pods, pod)
		}
		for _, pod := range pods {
			Eventually(func() schedulingv1alpha1.WaitingPodStatus {
				wp := &schedulingv1alpha1.WaitingPod{}
				_ = adminClient.Get(ctx, client.ObjectKeyFromObject(pod), wp)
				return wp.Status
			}).Should(And(
				HaveField("Profile", "undo-approvals"),
				HaveField("PodGroup", ""),
				HaveField("Conditions", ContainElement(And(
					HaveField("Type", schedulingv1alpha1.WaitingPodDecidable), HaveField("Status", metav1.ConditionTrue))))))
		}

		r := kubectlAs("alice", "approve", "podgroup/gang", "-n", ns, "--reason", "gang reviewed")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stdout).To(BeEmpty())
		skipped := `Warning: waitingpod/%s skipped: its profile "undo-approvals" does not run Coscheduling, so its pod's group label makes it no member; it is no member of podgroup/gang and was not approved` + "\n"
		Expect(r.Stderr).To(Equal(fmt.Sprintf(skipped, "gang-0") + fmt.Sprintf(skipped, "gang-1") + fmt.Sprintf(
			"error: podgroup/gang has no members held at Permit in namespace %s: no WaitingPod shows that group\nerror: 1 of 1 not approved: podgroup/gang\n", ns)))
		for _, pod := range pods {
			Consistently(func() string {
				p := &corev1.Pod{}
				Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
				return p.Spec.NodeName
			}, "1s").Should(BeEmpty(), pod.Name)
		}
		// Each is still decided on its own.
		Expect(run("alice", "approve", "gang-0", "-n", ns)).To(Equal(decidedLine("waitingpod/gang-0", "approved", pods[0].UID, "profile undo-approvals")))
	})
})

// describedHeldPod is the `kubectl describe pod` output docs/approvals.md
// shows for a held pod.
func describedHeldPod() string {
	GinkgoHelper()
	return docBlock(docFile("approvals.md"), "$ kubectl describe pod train-0 -n batch\n", "Events:")
}

// describeSection is the lines of section ("Conditions:", "Events:") in
// kubectl describe output, up to the next section or an elision ("...").
func describeSection(out, section string) []string {
	var lines []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == section:
			in = true
		case !in:
		case line == "..." || line == "" || !strings.HasPrefix(line, " "):
			return lines
		default:
			lines = append(lines, line)
		}
	}
	return lines
}

// normalizeDescribeLine is the fields of a kubectl describe line with what
// differs between runs (ages, times, the namespace) made alike.
func normalizeDescribeLine(line, ns string) []string {
	line = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(line, "TIME")
	fields := strings.Fields(strings.ReplaceAll(line, ns, "NAMESPACE"))
	for i, f := range fields {
		if regexp.MustCompile(`^(\d+[smhd])+$`).MatchString(f) {
			fields[i] = "AGE"
		}
	}
	return fields
}
