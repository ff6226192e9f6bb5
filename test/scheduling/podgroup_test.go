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
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
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
		Expect(publishGangProfile(ctx, profileName).WorkloadAware()).To(BeTrue())

		gang := func(name string, pods int) []string {
			newGang(ctx, ns, name, 4, "")
			var names []string
			for i := range pods {
				names = append(names, addMember(ctx, ns, name, i))
			}
			return names
		}

		By("binding a gang of 4 with its 4 pods")
		full := gang("full", 4)
		Eventually(nodesOf(ctx, ns, full...)).ShouldNot(ContainElement(""))
		Eventually(podGroupConditions(ctx, ns, "full")).Should(ContainElement(And(
			HaveField("Type", schedulingv1beta1.PodGroupInitiallyScheduled),
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", "Scheduled"))))

		By("holding a gang of 4 with only 3 pods")
		partial := gang("partial", 3)
		Consistently(nodesOf(ctx, ns, partial...)).WithTimeout(3 * time.Second).Should(HaveEach(""))
		By("telling the PodGroup how many of minCount pods exist")
		Eventually(eventNotes(ctx, ns, "partial", "WaitingForPods")).Should(ContainElement(
			"waiting for minCount pods from a gang to appear in scheduling queue: 3 of minCount 4 pods exist"))

		By("binding it whole once the 4th pod arrives")
		partial = append(partial, addMember(ctx, ns, "partial", 3))
		Eventually(nodesOf(ctx, ns, partial...)).ShouldNot(ContainElement(""))
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
		publishGangProfile(ctx, "gangs")
		publishGangProfile(ctx, "other-gangs")
		newGang(ctx, ns, "mixed", 4, "")
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
		Eventually(podGroupConditions(ctx, ns, "mixed")).Should(ContainElement(And(
			HaveField("Type", schedulingv1beta1.PodGroupInitiallyScheduled),
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1beta1.PodGroupReasonSchedulerError),
			HaveField("Message", ContainSubstring(reason)))))

		By("binding the gang whole once the stranger is replaced by a pod of the gang's profile")
		zero := int64(0)
		Expect(cs.CoreV1().Pods(ns).Delete(ctx, stranger, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
		members = append(members, addMember(ctx, ns, "mixed", 4))
		Eventually(nodesOf(ctx, ns, members...)).WithTimeout(30 * time.Second).ShouldNot(ContainElement(""))
	})
})

// publishGangProfile builds a workload-aware profile name enabling
// GangScheduling, after starting the PodGroup informer as the reconciler
// does, and has it serve until the spec ends.
func publishGangProfile(ctx context.Context, name string) framework.Framework {
	Expect(sched.StartPodGroupInformer(ctx)).To(Succeed())
	p := &configv1.KubeSchedulerProfile{
		SchedulerName: ptr.To(name),
		Plugins:       &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}}}},
	}
	fwk, err := profilebuild.Builder(sched)(ctx, p, runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true}))
	Expect(err).NotTo(HaveOccurred())
	sched.Profiles().Publish(name, fwk)
	DeferCleanup(func() { sched.Profiles().Remove(name, "spec ended") })
	return fwk
}

// newGang creates the PodGroup name of ns, a gang of minCount pods of
// priority class pc ("" for none), and returns it as the API server
// stored it.
func newGang(ctx context.Context, ns, name string, minCount int32, pc string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			PriorityClassName: pc,
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
		},
	}
	pg, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return pg
}

// podGroupConditions returns the status conditions of the PodGroup name
// of ns.
func podGroupConditions(ctx context.Context, ns, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		pg, err := cs.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return pg.Status.Conditions, nil
	}
}

// nodesOf returns the nodes the pods names of ns are bound to, "" for
// one not bound.
func nodesOf(ctx context.Context, ns string, names ...string) func() ([]string, error) {
	return func() ([]string, error) {
		var out []string
		for _, n := range names {
			pod, err := getPod(ctx, ns, n)()
			if err != nil {
				return nil, err
			}
			out = append(out, pod.Spec.NodeName)
		}
		return out, nil
	}
}

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
