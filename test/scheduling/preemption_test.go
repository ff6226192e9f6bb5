package scheduling_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	configv1 "k8s.io/kube-scheduler/config/v1"
)

// DefaultPreemption of the default profile against the real API server:
// what the preempting pod is told, and which victims go. No kubelet runs,
// so victims stay terminating until the spec finishes their deletion.
var _ = Describe("DefaultPreemption", func() {
	var (
		ns        string
		low, high string
	)

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
		low, high = newPriorityClass(ctx, "preempt-low-"+ns, 1), newPriorityClass(ctx, "preempt-high-"+ns, 100)
	})

	// placed creates a pod already bound to node, of priority class pc.
	placed := func(ctx context.Context, name, node, pc string, labels map[string]string) *v1.Pod {
		p := podSpec(ns, name, "unused", "1")
		p.Labels = labels
		p.Spec.NodeName, p.Spec.PriorityClassName = node, pc
		return newPod(ctx, p)
	}
	terminating := func(ctx context.Context, name string) func() bool {
		return func() bool {
			p, err := getPod(ctx, ns, name)()
			return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
		}
	}
	// finishDeletion does what the kubelet would once the containers stop.
	finishDeletion := func(ctx context.Context, names ...string) {
		zero := int64(0)
		for _, name := range names {
			err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if !apierrors.IsNotFound(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
	}

	It("tells the preempting pod where it makes room and how many victims go, as kube-scheduler 1.37", func(ctx SpecContext) {
		publish(ctx, profile("preempt-message"))
		newNode(ctx, "preempt-1", "2")
		placed(ctx, "low-0", "preempt-1", low, nil)
		placed(ctx, "low-1", "preempt-1", low, nil)

		p := podSpec(ns, "preemptor", "preempt-message", "2")
		p.Spec.PriorityClassName = high
		newPod(ctx, p)

		const want = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node preempt-1, preempting 2 victims"
		Eventually(getPod(ctx, ns, "preemptor")).Should(And(
			WithTransform(podScheduledCondition, And(
				Not(BeNil()),
				HaveField("Status", v1.ConditionFalse),
				HaveField("Reason", v1.PodReasonUnschedulable),
				HaveField("Message", want),
			)),
			HaveField("Status.NominatedNodeName", "preempt-1"),
		))
		Eventually(eventNotes(ctx, ns, "preemptor", "FailedScheduling")).Should(ContainElement(want))
		Eventually(terminating(ctx, "low-0")).Should(BeTrue())
		Eventually(terminating(ctx, "low-1")).Should(BeTrue())

		finishDeletion(ctx, "low-0", "low-1")
		Eventually(getPod(ctx, ns, "preemptor")).Should(WithTransform(nodeName, Equal("preempt-1")))
	})

	// A victim whose binding cycle waits in PreBind (VolumeBinding waiting
	// for its volumes, here a test plugin) has not been bound: as
	// kube-scheduler, preemption cancels its binding cycle in memory
	// instead of deleting it, also when the preemptor belongs to another
	// profile (upstream's instances share the pods in PreBind). The victim
	// gives its room back (Unreserve, its assumption forgotten) and goes
	// back to the queue, where it no longer fits; the preemptor is
	// requeued at once, since no deletion event will come, and takes the
	// node.
	for _, otherProfile := range []bool{false, true} {
		name := "cancels a victim in PreBind in memory instead of deleting it"
		if otherProfile {
			name += ", for a preemptor of another profile"
		}
		It(name, func(ctx SpecContext) {
			pr := profile("preempt-prebind")
			pr.Plugins.MultiPoint.Enabled = append(pr.Plugins.MultiPoint.Enabled, configv1.Plugin{Name: slowPreBindName})
			publish(ctx, pr)
			preemptorProfile := "preempt-prebind"
			if otherProfile {
				preemptorProfile = "preempt-prebind-other"
				publish(ctx, profile(preemptorProfile))
			}
			newNode(ctx, "preempt-prebind-1", "2")

			v := podSpec(ns, "victim", "preempt-prebind", "2")
			v.Labels = map[string]string{"prebind": "slow"}
			v.Spec.PriorityClassName = low
			victim := newPod(ctx, v)
			Eventually(func() bool { return slowPreBinds.hasEntered(victim.UID) }).Should(BeTrue())

			p := podSpec(ns, "preemptor", preemptorProfile, "2")
			p.Spec.PriorityClassName = high
			preemptor := newPod(ctx, p)

			Eventually(getPod(ctx, ns, "preemptor")).Should(WithTransform(nodeName, Equal("preempt-prebind-1")))
			Eventually(eventNotes(ctx, ns, "victim", "Preempted")).Should(ConsistOf(
				fmt.Sprintf("Preempted by pod %s on node preempt-prebind-1 (in kube-scheduler memory).", preemptor.UID)))
			const failure = `running PreBind plugin "TestSlowPreBind": preempted by DefaultPreemption`
			Eventually(eventNotes(ctx, ns, "victim", "FailedScheduling")).Should(ContainElement(failure))
			got, err := getPod(ctx, ns, "victim")()
			Expect(err).NotTo(HaveOccurred())
			Expect(got.UID).To(Equal(victim.UID))
			Expect(got.DeletionTimestamp).To(BeNil())
			// Back in the queue, the victim finds the node taken.
			Eventually(getPod(ctx, ns, "victim")).Should(WithTransform(podScheduledCondition, And(
				Not(BeNil()),
				HaveField("Reason", v1.PodReasonUnschedulable),
			)))
			Consistently(getPod(ctx, ns, "victim")).WithTimeout(time.Second).Should(And(
				HaveField("DeletionTimestamp", BeNil()),
				WithTransform(nodeName, BeEmpty()),
			))
		})
	}

	// The 1.37 rule that a victim stops using up budgets at the first one
	// it violates cannot be pinned here: upstream walks the budgets in the
	// informer's list order, which is unordered, and for every situation
	// some order gives 1.36's verdict. The unit tests pin it with a fixed
	// order; this spec pins what the budget changes on a real cluster.
	It("evicts an unprotected pod before one whose PodDisruptionBudget allows no disruption", func(ctx SpecContext) {
		publish(ctx, profile("preempt-pdb"))
		newNode(ctx, "preempt-pdb-1", "2")
		one := intstr.FromInt32(1)
		// With no disruption controller, its status allows 0 disruptions.
		_, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: &one,
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Without the budget, "guarded" (the lower priority) would go.
		placed(ctx, "guarded", "preempt-pdb-1", low, map[string]string{"app": "guarded"})
		mid := newPriorityClass(ctx, "preempt-mid-"+ns, 2)
		placed(ctx, "free", "preempt-pdb-1", mid, nil)

		p := podSpec(ns, "preemptor", "preempt-pdb", "1")
		p.Spec.PriorityClassName = high
		newPod(ctx, p)

		const want = "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential placement for pod on node preempt-pdb-1, preempting 1 victims"
		Eventually(eventNotes(ctx, ns, "preemptor", "FailedScheduling")).Should(ContainElement(want))
		Eventually(terminating(ctx, "free")).Should(BeTrue())
		Expect(getPod(ctx, ns, "guarded")()).To(HaveField("DeletionTimestamp", BeNil()))

		finishDeletion(ctx, "free")
		Eventually(getPod(ctx, ns, "preemptor")).Should(WithTransform(nodeName, Equal("preempt-pdb-1")))
		Expect(getPod(ctx, ns, "guarded")()).To(HaveField("DeletionTimestamp", BeNil()))
	})
})
