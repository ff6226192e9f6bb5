package operator_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/controllers"
	"github.com/schedprofiles/profile-scheduler/scheduler"
)

// workloadGang creates a Workload of name, unless workload is "", and a
// scheduling.k8s.io PodGroup of name with a gang of minCount naming it.
func workloadGang(ns, name, workload string, minCount int32) {
	GinkgoHelper()
	policy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}
	if workload != "" {
		Expect(k8sClient.Create(ctx, &schedulingv1beta1.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: workload},
			Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{
				{Name: "workers", SchedulingPolicy: policy},
			}},
		})).To(Succeed())
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: policy},
	}
	if workload != "" {
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: workload, TemplateName: "workers"}
	}
	Expect(k8sClient.Create(ctx, pg)).To(Succeed())
}

// workloadMember is pod i of the scheduling.k8s.io PodGroup group, by its
// own spec.schedulingGroup.
func workloadMember(ns, group string, i int, schedulerName, pool string) *corev1.Pod {
	pod := poolPod(ns, fmt.Sprintf("%s-%d", group, i), schedulerName, pool, "1", "")
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return pod
}

// boundPods counts the bound pods among names in ns.
func boundPods(ns string, names ...string) func() int {
	return func() int {
		n := 0
		for _, name := range names {
			p := &corev1.Pod{}
			if k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p) == nil && p.Spec.NodeName != "" {
				n++
			}
		}
		return n
	}
}

// pendingPlugins are the Permit plugins the WaitingPod ns/name shows.
func pendingPlugins(ns, name string) func() []string {
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

var _ = Describe("Workload-aware gangs held for approval", Ordered, func() {
	const profile, pool = "approved-workload-gangs", "wl-approve"
	BeforeAll(func() {
		apply(profile, profileManifest(profile, `plugins:
  multiPoint:
    enabled:
    - name: GangScheduling
    - name: ManualApproval`))
		serving(profile)
		nodes(pool, 4, "4", "8Gi")
	})

	It("shows the group on its WaitingPods, tells its PodGroup and Workload how to decide, and binds the gang only when the approval completing minCount comes", func() {
		ns := gangNamespace()
		workloadGang(ns, "train", "train-job", 3)
		names := []string{"train-0", "train-1", "train-2"}
		// A fourth member, beyond minCount, that nobody approves: it must
		// neither be released with the others nor keep them back.
		for i := range 4 {
			createPod(workloadMember(ns, "train", i, profile, pool))
		}
		for _, name := range append(names, "train-3") {
			Eventually(func(g Gomega) {
				wp, err := getWaitingPod(ns, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(wp.Status.PodGroup).To(Equal("podgroup.scheduling.k8s.io/train"))
				g.Expect(wp.Status.Plugins).To(Equal("GangScheduling,ManualApproval"))
			}).Should(Succeed())
			Eventually(waitingCondition(ns, name, schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
			Eventually(permitCondition(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).Should(
				HaveField("Message", HaveSuffix(": decide the gang with kubectl approve|reject podgroup/train")))
		}

		decide := fmt.Sprintf("kubectl approve podgroup/train -n %s", ns)
		Eventually(eventNotes("PodGroup", ns, "train", controllers.ReasonWaitingForApproval)).Should(ContainElement(ContainSubstring(decide)))
		Eventually(eventNotes("Workload", ns, "train-job", controllers.ReasonWaitingForApproval)).Should(ContainElement(ContainSubstring(decide)))

		By("approving two of three: GangScheduling keeps holding them")
		for _, name := range names[:2] {
			r, err := kubectl.Run("approve", "waitingpod/"+name, "-n", ns)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Code).To(BeZero(), r.Stderr)
			Expect(r.Stdout).To(HaveSuffix(": GangScheduling releases it once podgroup.scheduling.k8s.io/train is complete\n"))
			Expect(r.Stderr).To(BeEmpty())
			Eventually(pendingPlugins(ns, name)).Should(Equal([]string{"GangScheduling"}))
		}
		Consistently(boundPods(ns, names...), "2s").Should(BeZero())
		Eventually(func() string {
			wp, err := getWaitingPod(ns, "train-0")
			if err != nil {
				return ""
			}
			return wp.Status.Message
		}).Should(Equal("GangScheduling: waiting for minCount pods from a gang to be scheduled: 2 of minCount 3 counted, 2 more held by other Permit plugins"))

		By("approving the third: the three go together, the fourth stays held")
		kubectlOK("approve", "waitingpod/train-2", "-n", ns)
		Eventually(boundPods(ns, names...)).Should(Equal(3))
		Expect(bindSpread(ns, "train")).To(BeNumerically("<", 900*time.Millisecond), "members of train were not bound together")
		Consistently(boundPods(ns, "train-3"), "1s").Should(BeZero())
		Expect(pendingPlugins(ns, "train-3")()).To(Equal([]string{"GangScheduling", "ManualApproval"}))
	})

	It("releases a held gang back to the queue when its Workload is deleted, and says why", func() {
		ns := gangNamespace()
		workloadGang(ns, "doomed", "doomed-job", 2)
		names := []string{"doomed-0", "doomed-1"}
		for i := range 2 {
			createPod(workloadMember(ns, "doomed", i, profile, pool))
		}
		for _, name := range names {
			Eventually(waitingCondition(ns, name, schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))
		}
		Expect(k8sClient.Delete(ctx, &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed-job"}})).To(Succeed())
		why := fmt.Sprintf("Workload %s/doomed-job was deleted while PodGroup doomed was held at Permit", ns)
		// Back in the queue, they are scheduled again as upstream does
		// (it does not read Workloads), and held again for a decision.
		for _, name := range names {
			Eventually(eventNotes("Pod", ns, name, "FailedScheduling")).Should(ContainElement(ContainSubstring(why)))
		}
		Eventually(eventNotes("PodGroup", ns, "doomed", scheduler.ReasonWorkloadDeleted)).Should(ContainElement(
			Equal(why + ": 2 held pods released back to the queue")))
		Consistently(boundPods(ns, names...), "1s").Should(BeZero())
	})

	It("warns on a PodGroup naming a missing Workload, and schedules its gang as upstream does", func() {
		ns := gangNamespace()
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"},
			Spec: schedulingv1beta1.PodGroupSpec{
				WorkloadRef:      &schedulingv1beta1.WorkloadReference{WorkloadName: "ghost", TemplateName: "workers"},
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
			},
		}
		Expect(k8sClient.Create(ctx, pg)).To(Succeed())
		Eventually(eventNotes("PodGroup", ns, "orphan", scheduler.ReasonWorkloadNotFound)).Should(ContainElement(
			fmt.Sprintf(`PodGroup %s/orphan references Workload "ghost" (template "workers"), which does not exist in namespace %s; its pods are scheduled without it`, ns, ns)))
		createPod(workloadMember(ns, "orphan", 0, profile, pool))
		Eventually(pendingPlugins(ns, "orphan-0")).Should(Equal([]string{"GangScheduling", "ManualApproval"}))
	})
})
