package operator_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The default profile's cluster-wide plugins, end to end: preemption,
// inter-pod anti-affinity and topology spreading.
var _ = Describe("Default profile, cluster-wide plugins", Ordered, func() {
	BeforeAll(func() {
		apply("cluster-wide", profileManifest("cluster-wide", "{}"))
		serving("cluster-wide")
	})
	AfterAll(func() {
		kubectlOK("delete", "schedulingprofile", "cluster-wide")
	})

	It("preempts a lower-priority pod and binds the preemptor to the nominated node", func() {
		for name, value := range map[string]int32{"bench-low": 10, "bench-high": 1000} {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
			Expect(k8sClient.Create(ctx, pc)).To(Succeed())
		}
		nodes("preempt", 1, "2", "8Gi")
		ns := namespace()
		var victims []*corev1.Pod
		for i := range 2 {
			pod := poolPod(ns, fmt.Sprintf("low-%d", i), "cluster-wide", "preempt", "1", "1Gi")
			pod.Spec.PriorityClassName = "bench-low"
			Expect(boundNode(createPod(pod))).To(Equal("preempt-0"))
			victims = append(victims, pod)
		}

		high := poolPod(ns, "high", "cluster-wide", "preempt", "1", "1Gi")
		high.Spec.PriorityClassName = "bench-high"
		createPod(high)
		Eventually(func() string {
			p := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(high), p)).To(Succeed())
			return p.Status.NominatedNodeName
		}).Should(Equal("preempt-0"))

		// Exactly one victim is evicted, with the DisruptionTarget condition.
		var evicted *corev1.Pod
		Eventually(func() int {
			evicted = nil
			n := 0
			for _, v := range victims {
				p := &corev1.Pod{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(v), p); err != nil || p.DeletionTimestamp != nil {
					n++
					if err == nil {
						evicted = p
					}
				}
			}
			return n
		}).Should(Equal(1))
		if evicted != nil {
			Expect(evicted.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.DisruptionTarget), HaveField("Status", corev1.ConditionTrue))))
			// No kubelet runs here: finish the graceful deletion as it would.
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, evicted, client.GracePeriodSeconds(0)))).To(Succeed())
		}
		Eventually(eventNotes("Pod", ns, "high", "Scheduled")).ShouldNot(BeEmpty())
		Expect(boundNode(high)).To(Equal("preempt-0"))
	})

	It("spreads a Deployment-like set with required anti-affinity one pod per node", func() {
		nodes("anti", 3, "4", "8Gi")
		ns := namespace()
		antiAffine := func(name string) *corev1.Pod {
			pod := poolPod(ns, name, "cluster-wide", "anti", "100m", "128Mi")
			pod.Labels = map[string]string{"app": "web"}
			pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					TopologyKey:   corev1.LabelHostname,
				}},
			}}
			return pod
		}
		used := map[string]bool{}
		for i := range 3 {
			used[boundNode(createPod(antiAffine(fmt.Sprintf("web-%d", i))))] = true
		}
		Expect(used).To(HaveLen(3))

		extra := createPod(antiAffine("web-3"))
		Eventually(scheduledCondition(extra)).Should(And(
			Not(BeNil()),
			HaveField("Reason", "Unschedulable"),
			HaveField("Message", ContainSubstring("node(s) didn't match pod anti-affinity rules")),
		), func() string { return fmt.Sprintf("web-3 is on %q, web-0..2 on %v", scheduledPodNode(extra), used) })
	})

	It("keeps a zone spread constraint at skew 1 across three zones", func() {
		nodes("spread", 3, "8", "16Gi") // one node in each of zone-a, zone-b, zone-c
		ns := namespace()
		perZone := map[string]int{}
		for i := range 7 {
			pod := poolPod(ns, fmt.Sprintf("spread-%d", i), "cluster-wide", "spread", "100m", "128Mi")
			pod.Labels = map[string]string{"app": "spread"}
			pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew:           1,
				TopologyKey:       corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
			}}
			node := boundNode(createPod(pod))
			n := &corev1.Node{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			perZone[n.Labels[corev1.LabelTopologyZone]]++

			lo, hi := 1<<30, 0
			for _, zone := range []string{"zone-a", "zone-b", "zone-c"} {
				lo, hi = min(lo, perZone[zone]), max(hi, perZone[zone])
			}
			Expect(hi-lo).To(BeNumerically("<=", 1), "pods per zone after %d pods: %v", i+1, perZone)
		}
		Expect(perZone).To(HaveLen(3))
	})
})
