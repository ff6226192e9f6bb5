package scheduling_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
)

// Pod-group preemption (DefaultPreemption's PodGroupPostFilter) in a
// workload-aware profile against the real API server. No kubelet runs, so
// victims stay terminating until the spec finishes their deletion.
var _ = Describe("Pod-group preemption", func() {
	const profileName = "gang-preemption"
	var (
		ns        string
		low, high string
	)

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
		low, high = newPriorityClass(ctx, "gang-low-"+ns, 1), newPriorityClass(ctx, "gang-high-"+ns, 100)
		fwk := publishGangProfile(ctx, profileName)
		Expect(pluginNames(fwk.ListPlugins().PodGroupPostFilter.Enabled)).To(Equal([]string{"DynamicResources", "DefaultPreemption"}))
	})

	// placed creates a low-priority pod bound to node, asking for 1 CPU,
	// started at start as a kubelet would report it: the earlier, the more
	// important a victim.
	placed := func(ctx context.Context, name, node, pc string, start time.Time) {
		p := podSpec(ns, name, "unused", "1")
		p.Spec.NodeName, p.Spec.PriorityClassName = node, pc
		p = newPod(ctx, p)
		p.Status.StartTime = &metav1.Time{Time: start}
		_, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// gang creates a high-priority PodGroup of n pods, all of them its
	// gang's minCount, each asking for cpu, and returns their names.
	gang := func(ctx context.Context, name string, n int, cpu string) []string {
		pg := newGang(ctx, ns, name, int32(n), high)
		Expect(pg.Spec.Priority).To(HaveValue(BeEquivalentTo(100)), "the API server resolves the PodGroup's priority")
		var members []string
		for i := range n {
			pod := podSpec(ns, fmt.Sprintf("%s-%d", name, i), profileName, cpu)
			pod.Spec.PriorityClassName = high
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
			members = append(members, newPod(ctx, pod).Name)
		}
		return members
	}
	// deleted returns the names of the pods of ns being deleted or gone,
	// among names.
	deleted := func(ctx context.Context, names ...string) func() ([]string, error) {
		return func() ([]string, error) {
			var out []string
			for _, name := range names {
				p, err := getPod(ctx, ns, name)()
				switch {
				case apierrors.IsNotFound(err):
					out = append(out, name)
				case err != nil:
					return nil, err
				case p.DeletionTimestamp != nil:
					out = append(out, name)
				}
			}
			return out, nil
		}
	}
	// members returns what each of names shows of its scheduling: nominated
	// node, bound node.
	type placement struct{ Nominated, Bound string }
	membersOf := func(ctx context.Context, names ...string) func() ([]placement, error) {
		return func() ([]placement, error) {
			var out []placement
			for _, name := range names {
				p, err := getPod(ctx, ns, name)()
				if err != nil {
					return nil, err
				}
				out = append(out, placement{Nominated: p.Status.NominatedNodeName, Bound: p.Spec.NodeName})
			}
			return out, nil
		}
	}

	It("evicts the least important lower-priority pods the gang needs, then binds the gang as a unit", func(ctx SpecContext) {
		origin := time.Now().Add(-time.Hour)
		var lows []string
		for i := range 3 {
			node := fmt.Sprintf("gang-victims-%d", i)
			newNode(ctx, node, "3")
			// On each node, a is the earliest started, so the one
			// reprieved: the gang's 2 CPU leave room for one of the three.
			for j, suffix := range []string{"a", "b", "c"} {
				name := fmt.Sprintf("low-%d%s", i, suffix)
				placed(ctx, name, node, low, origin.Add(time.Duration(j)*time.Minute))
				lows = append(lows, name)
			}
		}
		// A node held by a pod of higher priority than the gang's.
		newNode(ctx, "gang-guarded", "3")
		placed(ctx, "guard", "gang-guarded", newPriorityClass(ctx, "gang-top-"+ns, 1000), origin)

		members := gang(ctx, "workers", 3, "2")

		By("nominating every member once the victims are chosen")
		Eventually(membersOf(ctx, members...)).Should(HaveEach(HaveField("Nominated", HavePrefix("gang-victims-"))))
		nominated, err := membersOf(ctx, members...)()
		Expect(err).NotTo(HaveOccurred())
		nodes := sets.New[string]()
		for _, m := range nominated {
			nodes.Insert(m.Nominated)
		}
		Expect(nodes.Len()).To(Equal(3), "one member per node: %v", nominated)

		By("evicting the two least important low-priority pods of each node, and no other pod")
		want := []string{"low-0b", "low-0c", "low-1b", "low-1c", "low-2b", "low-2c"}
		Eventually(deleted(ctx, append(lows, "guard")...)).Should(ConsistOf(want))
		Consistently(deleted(ctx, append(lows, "guard")...)).WithTimeout(2 * time.Second).Should(ConsistOf(want))
		Consistently(membersOf(ctx, members...)).WithTimeout(time.Second).Should(HaveEach(HaveField("Bound", "")),
			"the gang waits for its victims to be gone")

		By("binding the whole gang on the nodes it was nominated to once the victims are gone")
		zero := int64(0)
		for _, name := range want {
			Expect(cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
		}
		Eventually(membersOf(ctx, members...)).Should(HaveEach(HaveField("Bound", HavePrefix("gang-victims-"))))
		bound, err := membersOf(ctx, members...)()
		Expect(err).NotTo(HaveOccurred())
		for i, m := range bound {
			Expect(m.Bound).To(Equal(nominated[i].Nominated), "member %s", members[i])
		}
		Expect(deleted(ctx, append(lows, "guard")...)()).To(ConsistOf(want))
	})

	It("leaves a gang that no preemption can place pending, and evicts nothing", func(ctx SpecContext) {
		origin := time.Now().Add(-time.Hour)
		var lows []string
		for i := range 2 {
			node := fmt.Sprintf("gang-small-%d", i)
			newNode(ctx, node, "2")
			name := fmt.Sprintf("low-%d", i)
			placed(ctx, name, node, low, origin)
			lows = append(lows, name)
		}

		// Three members of 2 CPU on two nodes of 2 CPU: even without every
		// lower-priority pod, one member has no node.
		members := gang(ctx, "too-big", 3, "2")

		// The member tried first is told why it fits nowhere, as a pod
		// alone is before PostFilter; the group's algorithm stops there,
		// and the others are told why the gang cannot be placed.
		messages := func() ([]string, error) {
			var out []string
			for _, m := range members {
				p, err := getPod(ctx, ns, m)()
				if err != nil {
					return nil, err
				}
				if c := podScheduledCondition(p); c != nil && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
					out = append(out, c.Message)
				}
			}
			return out, nil
		}
		const cannot = "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"
		Eventually(messages).Should(ConsistOf("0/2 nodes are available: 2 Insufficient cpu.", cannot, cannot))
		Eventually(podGroupConditions(ctx, ns, "too-big")).Should(ContainElement(And(
			HaveField("Type", schedulingv1beta1.PodGroupInitiallyScheduled),
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1beta1.PodGroupReasonUnschedulable),
			// DynamicResources, first at podGroupPostFilter, had no claim
			// to free; without the lower-priority pods, two members fit
			// and the third does not.
			HaveField("Message", cannot+", deallocation and deletion of ResourceClaims completed, pod group preemption: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"))))
		Consistently(deleted(ctx, lows...)).WithTimeout(3 * time.Second).Should(BeEmpty())
		Consistently(membersOf(ctx, members...)).WithTimeout(time.Second).Should(HaveEach(placement{}))
	})
})

func pluginNames(plugins []configv1.Plugin) []string {
	var out []string
	for _, p := range plugins {
		out = append(out, p.Name)
	}
	return out
}
