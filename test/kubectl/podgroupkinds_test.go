package kubectl_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
)

// The API server serves two kinds named PodGroup: scheduler-plugins' CRD
// (scheduling.x-k8s.io, Coscheduling) and the Workload API's built-in one
// (scheduling.k8s.io/v1beta1, GangScheduling). What kubectl makes of the
// names, and what kubectl approve and reject decide for each.
var _ = Describe("the two PodGroup kinds", Ordered, func() {
	ctx := context.Background()
	var ns string

	BeforeAll(func() {
		servedProfile(workloadsProfile, "  plugins:\n    multiPoint:\n      enabled:\n      - name: GangScheduling\n      - name: ManualApproval",
			gangscheduling.Name, manualapproval.Name)
	})

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "podgroups-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		ns = n.Name
	})

	coschedulingGroup := func(name string) {
		GinkgoHelper()
		Expect(adminClient.Create(ctx, &podgroupv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: 1},
		})).To(Succeed())
	}
	workloadGroup := func(name string) {
		GinkgoHelper()
		Expect(adminClient.Create(ctx, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1},
			}},
		})).To(Succeed())
	}
	// heldAs creates pod name, changed by edit, and the WaitingPod the
	// operator's mirror writes while profile holds it at ManualApproval,
	// showing group.
	heldAs := func(name, profile, group string, edit func(*corev1.Pod)) *corev1.Pod {
		GinkgoHelper()
		pod := pendingPod(ns, name, nil)
		pod.Spec.SchedulerName = profile
		edit(pod)
		Expect(adminClient.Create(ctx, pod)).To(Succeed())
		wp := &schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: pod.Labels},
			Spec:       schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
		}
		Expect(adminClient.Create(ctx, wp)).To(Succeed())
		wp.Status = schedulingv1alpha1.WaitingPodStatus{
			PodUID: pod.UID, Profile: profile, PodGroup: group,
			PendingPlugins: []schedulingv1alpha1.PendingPlugin{{Name: manualapproval.Name}},
		}
		meta.SetStatusCondition(&wp.Status.Conditions, metav1.Condition{Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision, Message: "ManualApproval holds the pod"})
		Expect(adminClient.Status().Update(ctx, wp)).To(Succeed())
		return pod
	}
	coschedulingMember := func(name, group string) *corev1.Pod {
		GinkgoHelper()
		return heldAs(name, gangsProfile, group, func(p *corev1.Pod) { p.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: group} })
	}
	workloadMember := func(name, profile, group string) *corev1.Pod {
		GinkgoHelper()
		// The operator shows the group only for a pod an instance running
		// GangScheduling holds.
		shown := ""
		if profile == workloadsProfile {
			shown = approval.WorkloadPodGroup(group)
		}
		return heldAs(name, profile, shown, func(p *corev1.Pod) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		})
	}
	decision := func(name string) schedulingv1alpha1.Decision {
		GinkgoHelper()
		wp := &schedulingv1alpha1.WaitingPod{}
		Expect(adminClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wp)).To(Succeed())
		return wp.Spec.Decision
	}

	It("are told apart by kubectl: podgroups is the Workload API's, pg scheduler-plugins'", func() {
		coschedulingGroup("plugins")
		workloadGroup("builtin")
		Expect(run("admin", "get", "podgroups", "-n", ns, "-o", "name")).To(Equal("podgroup.scheduling.k8s.io/builtin\n"))
		Expect(run("admin", "get", "podgroup/builtin", "-n", ns, "-o", "name")).To(Equal("podgroup.scheduling.k8s.io/builtin\n"))
		Expect(run("admin", "get", "pg", "-n", ns, "-o", "name")).To(Equal("podgroup.scheduling.x-k8s.io/plugins\n"))
		Expect(run("admin", "get", "podgroups.scheduling.x-k8s.io", "-n", ns, "-o", "name")).To(Equal("podgroup.scheduling.x-k8s.io/plugins\n"))
		r := kubectlAs("admin", "get", "podgroup/plugins", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(`podgroups.scheduling.k8s.io "plugins" not found`))
	})

	It("decide the Workload API's group by podgroup/NAME when only it has the name, and never a stranger", func() {
		workloadGroup("trainer")
		a := workloadMember("trainer-0", workloadsProfile, "trainer")
		b := workloadMember("trainer-1", workloadsProfile, "trainer")
		// Held by a profile without GangScheduling: its spec names the
		// group, but no gang holds it.
		workloadMember("stranger", manualProfile, "trainer")
		workloadMember("elsewhere", workloadsProfile, "other")

		r := kubectlAs("alice", "approve", "podgroup/trainer", "-n", ns, "--reason", "reviewed")
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(Equal(
			decidedLine("waitingpod/trainer-0", "approved", a.UID, "profile workloads") +
				decidedLine("waitingpod/trainer-1", "approved", b.UID, "profile workloads") +
				"podgroup.scheduling.k8s.io/trainer: 2 of 2 members approved\n"))
		Expect(r.Stderr).To(Equal(`Warning: waitingpod/stranger skipped: its profile "manual" does not run GangScheduling, so its pod's spec.schedulingGroup makes it no member; it is no member of podgroup.scheduling.k8s.io/trainer and was not approved` + "\n"))
		Expect(decision("stranger")).To(BeEmpty())
		Expect(decision("elsewhere")).To(BeEmpty())
	})

	It("refuse podgroup/NAME when both kinds have the name, and decide the one a qualified name selects", func() {
		coschedulingGroup("shared")
		workloadGroup("shared")
		cos := coschedulingMember("plugins-0", "shared")
		wl := workloadMember("builtin-0", workloadsProfile, "shared")

		for _, verb := range []string{"approve", "reject"} {
			r := kubectlAs("alice", verb, "podgroup/shared", "-n", ns)
			Expect(r.Code).To(Equal(1))
			Expect(r.Stdout).To(BeEmpty())
			done := map[string]string{"approve": "approved", "reject": "rejected"}[verb]
			Expect(r.Stderr).To(Equal(fmt.Sprintf("error: podgroup/shared is ambiguous in namespace %[1]s: a PodGroup of each API has that name; name the one to decide, "+
				"podgroup.scheduling.k8s.io/shared (the Workload API's, GangScheduling) or podgroup.scheduling.x-k8s.io/shared (scheduler-plugins', Coscheduling); nothing was %[2]s\n"+
				"error: 1 of 1 not %[2]s: podgroup/shared\n", ns, done)))
		}
		Expect(decision("plugins-0")).To(BeEmpty())
		Expect(decision("builtin-0")).To(BeEmpty())

		Expect(run("alice", "approve", "podgroup.scheduling.k8s.io/shared", "-n", ns)).To(Equal(
			decidedLine("waitingpod/builtin-0", "approved", wl.UID, "profile workloads") +
				"podgroup.scheduling.k8s.io/shared: 1 of 1 members approved\n"))
		Expect(decision("plugins-0")).To(BeEmpty())
		Expect(run("alice", "reject", "podgroups.scheduling.x-k8s.io/shared", "-n", ns)).To(Equal(
			decidedLine("waitingpod/plugins-0", "rejected", cos.UID, "profile gangs") +
				"podgroup/shared: 1 of 1 members rejected\n"))
		Expect(decision("builtin-0")).To(Equal(schedulingv1alpha1.DecisionApprove))
	})

	It("refuse podgroup/NAME when no PodGroup of that name exists but members of both kinds are held", func() {
		coschedulingMember("plugins-0", "gone")
		workloadMember("builtin-0", workloadsProfile, "gone")
		r := kubectlAs("alice", "approve", "podgroup/gone", "-n", ns)
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring("podgroup/gone is ambiguous in namespace " + ns + ": members of a PodGroup of each API by that name are held"))
		Expect(decision("plugins-0")).To(BeEmpty())
		Expect(decision("builtin-0")).To(BeEmpty())
	})
})

// workloadsProfile runs GangScheduling and ManualApproval.
const workloadsProfile = "workloads"
