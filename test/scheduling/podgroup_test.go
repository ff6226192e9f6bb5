package scheduling_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

var _ = Describe("A workload-aware profile", func() {
	const profileName = "gangs"

	It("binds a PodGroup's gang as a unit, and none of it below minCount", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		DeferCleanup(cleanUp, ns)
		for i := range 4 {
			newNode(ctx, fmt.Sprintf("gang-node-%d", i), "4")
		}
		p := &configv1.KubeSchedulerProfile{
			SchedulerName: ptr.To(profileName),
			Plugins:       &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}}}},
		}
		// As the reconciler does before it builds a workload-aware profile.
		Expect(sched.StartPodGroupInformer(ctx)).To(Succeed())
		fwk, err := profilebuild.Builder(sched)(ctx, p, runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true}))
		Expect(err).NotTo(HaveOccurred())
		Expect(fwk.WorkloadAware()).To(BeTrue())
		sched.Profiles().Publish(profileName, fwk)
		DeferCleanup(func() { sched.Profiles().Remove(profileName, "spec ended") })

		gang := func(name string, pods int) []string {
			pg := &schedulingv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}},
			}
			_, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			var names []string
			for i := range pods {
				names = append(names, addMember(ctx, ns, name, i))
			}
			return names
		}
		nodesOf := func(names ...string) func() ([]string, error) {
			return func() ([]string, error) {
				var out []string
				for _, n := range names {
					pod, err := cs.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
					if err != nil {
						return nil, err
					}
					out = append(out, pod.Spec.NodeName)
				}
				return out, nil
			}
		}

		By("binding a gang of 4 with its 4 pods")
		full := gang("full", 4)
		Eventually(nodesOf(full...)).ShouldNot(ContainElement(""))
		Eventually(func() ([]metav1.Condition, error) {
			pg, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, "full", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return pg.Status.Conditions, nil
		}).Should(ContainElement(And(
			HaveField("Type", schedulingv1beta1.PodGroupInitiallyScheduled),
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", "Scheduled"))))

		By("holding a gang of 4 with only 3 pods")
		partial := gang("partial", 3)
		Consistently(nodesOf(partial...)).WithTimeout(3 * time.Second).Should(HaveEach(""))
		By("telling the PodGroup how many of minCount pods exist")
		Eventually(eventNotes(ctx, ns, "partial", "WaitingForPods")).Should(ContainElement(
			"waiting for minCount pods from a gang to appear in scheduling queue: 3 of minCount 4 pods exist"))

		By("binding it whole once the 4th pod arrives")
		partial = append(partial, addMember(ctx, ns, "partial", 3))
		Eventually(nodesOf(partial...)).ShouldNot(ContainElement(""))
	})
})

var _ = Describe("A PodGroup whose pods name different profiles", func() {
	It("binds none of them, says why on the pods and the PodGroup, and binds the gang once the stranger is gone", func(ctx SpecContext) {
		// As upstream with several profiles, the group is scheduled as one
		// and validatePodGroup refuses it whole: no pod of it binds.
		ns := newNamespace(ctx)
		DeferCleanup(cleanUp, ns)
		for i := range 2 {
			newNode(ctx, fmt.Sprintf("mixed-node-%d", i), "4")
		}
		Expect(sched.StartPodGroupInformer(ctx)).To(Succeed())
		for _, name := range []string{"gangs", "other-gangs"} {
			p := &configv1.KubeSchedulerProfile{
				SchedulerName: ptr.To(name),
				Plugins:       &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}}}},
			}
			fwk, err := profilebuild.Builder(sched)(ctx, p, runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true}))
			Expect(err).NotTo(HaveOccurred())
			sched.Profiles().Publish(name, fwk)
			DeferCleanup(func() { sched.Profiles().Remove(name, "spec ended") })
		}
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mixed"},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}},
		}
		_, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var members []string
		for i := range 3 {
			members = append(members, addMember(ctx, ns, "mixed", i))
		}
		// A pod author names the gang's PodGroup from another profile,
		// which makes up its minCount.
		stranger := addMemberOf(ctx, ns, "mixed", 3, "other-gangs")

		const reason = "all pods in a single pod group should have the same .spec.schedulerName set"
		conditionOf := func(name string) func() (*v1.PodCondition, error) {
			return func() (*v1.PodCondition, error) {
				pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				if pod.Spec.NodeName != "" {
					return nil, fmt.Errorf("pod %s is bound to %s", name, pod.Spec.NodeName)
				}
				return podScheduledCondition(pod), nil
			}
		}
		By("holding every pod of the group with upstream's reason")
		for _, name := range append(slices.Clone(members), stranger) {
			Eventually(conditionOf(name)).Should(And(Not(BeNil()),
				HaveField("Status", v1.ConditionFalse), HaveField("Message", ContainSubstring(reason))))
		}
		Eventually(func() ([]metav1.Condition, error) {
			pg, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, "mixed", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return pg.Status.Conditions, nil
		}).Should(ContainElement(And(
			HaveField("Type", schedulingv1beta1.PodGroupInitiallyScheduled),
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1beta1.PodGroupReasonSchedulerError),
			HaveField("Message", ContainSubstring(reason)))))

		By("binding the gang whole once the stranger is replaced by a pod of the gang's profile")
		zero := int64(0)
		Expect(cs.CoreV1().Pods(ns).Delete(ctx, stranger, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
		members = append(members, addMember(ctx, ns, "mixed", 4))
		Eventually(func() ([]string, error) {
			var out []string
			for _, n := range members {
				pod, err := cs.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				out = append(out, pod.Spec.NodeName)
			}
			return out, nil
		}).WithTimeout(30 * time.Second).ShouldNot(ContainElement(""))
	})
})

// addMember creates pod i of PodGroup group, asking for 1 CPU, and returns its name.
func addMember(ctx context.Context, ns, group string, i int) string {
	return addMemberOf(ctx, ns, group, i, "gangs")
}

// addMemberOf is addMember for a pod of profile schedulerName.
func addMemberOf(ctx context.Context, ns, group string, i int, schedulerName string) string {
	pod := podSpec(ns, fmt.Sprintf("%s-%d", group, i), schedulerName, "1")
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return newPod(ctx, pod).Name
}
