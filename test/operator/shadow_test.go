package operator_test

import (
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// shadowing waits until the named profile is accepted and runs in shadow.
func shadowing(name string) {
	GinkgoHelper()
	Eventually(profileCondition(name, schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt))
	Eventually(profileCondition(name, schedulingv1alpha1.ProfileActive)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonShadowing))
}

// shadowEvaluated waits until the shadow's status counts n evaluations,
// and returns it.
func shadowEvaluated(name string, n int64) *schedulingv1alpha1.ShadowStatus {
	GinkgoHelper()
	var st *schedulingv1alpha1.ShadowStatus
	Eventually(func() int64 {
		st = getProfile(name).Status.Shadow
		if st == nil {
			return -1
		}
		return st.Evaluated
	}).Should(Equal(n))
	return st
}

// shadowNotes are the notes of the shadows' disagreement events on pod
// ns/name.
func shadowNotes(ns, name string) []string {
	GinkgoHelper()
	var events eventsv1.EventList
	Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		if e.Reason == schedulingv1alpha1.ReasonShadowDisagreement && e.Regarding.Name == name {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// shadowSeries is the value of each outcome's series of the shadow's
// scheduler_shadow_evaluations_total.
func shadowSeries(name string) map[string]float64 {
	GinkgoHelper()
	families, err := metricsRegistry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "scheduler_shadow_evaluations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["profile"] == name {
				out[labels["result"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// leastLoaded are the nodes with the fewest of the pods placed so far:
// where LeastAllocated puts an equal pod on equal nodes, sorted.
func leastLoaded(nodeNames []string, placed map[string]int) []string {
	fewest := placed[nodeNames[0]]
	for _, n := range nodeNames {
		fewest = min(fewest, placed[n])
	}
	var out []string
	for _, n := range nodeNames {
		if placed[n] == fewest {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

var _ = Describe("Shadow profiles", func() {
	It("evaluate a serving profile's placements, hold and bind nothing, and agree where a tie allows", func() {
		nodes("shadow", 3, "4", "8Gi")
		nodeNames := []string{"shadow-0", "shadow-1", "shadow-2"}
		apply("shadow-serving", profileManifest("shadow-serving", fitScoring("MostAllocated")))
		serving("shadow-serving")
		// Spreads where the serving profile packs, and would hold every
		// pod at Permit, were Permit run in a shadow.
		apply("shadow-spread", profileManifest("shadow-spread", `shadowOf: shadow-serving
plugins:
  score:
    disabled:
    - name: "*"
    enabled:
    - name: NodeResourcesFit
  permit:
    enabled:
    - name: ManualApproval
pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: LeastAllocated`))
		shadowing("shadow-spread")
		sp := getProfile("shadow-spread")
		Expect(sp.Status.SchedulerName).To(BeEmpty(), "a shadow claims no schedulerName")
		Expect(sp.Status.Plugins.Permit).To(ContainElement(HaveField("Name", "ManualApproval")))
		Expect(op.Profiles.Get("shadow-spread")).To(BeNil(), "a shadow serves nothing")

		ns := namespace()
		placed := map[string]int{}
		var wantSame, wantOther int64
		var lastDisagreement *corev1.Pod
		for i := range 5 {
			pod := createPod(poolPod(ns, fmt.Sprintf("p-%d", i), "shadow-serving", "shadow", "500m", "512Mi"))
			node := boundNode(pod)
			// The serving profile placed it; the shadow evaluates it
			// on the nodes as they were before, where LeastAllocated
			// prefers the least loaded.
			best := leastLoaded(nodeNames, placed)
			if slices.Contains(best, node) {
				wantSame++
			} else {
				wantOther++
				lastDisagreement = pod
			}
			placed[node]++
			// One at a time, so that each is evaluated on the nodes as
			// the serving profile saw them.
			shadowEvaluated("shadow-spread", int64(i+1))
		}
		Expect(wantOther).To(BeNumerically(">", 0), "packing and spreading must disagree after the first pod")

		st := shadowEvaluated("shadow-spread", 5)
		Expect(st.Of).To(Equal("shadow-serving"))
		Expect([]int64{st.SameNode, st.OtherNode, st.NoNode, st.Errors, st.Dropped}).To(Equal([]int64{wantSame, wantOther, 0, 0, 0}))
		Expect(st.SpecHash).To(Equal(profilebuild.SpecHash(&getProfile("shadow-spread").Spec)))
		// The pod is named in an event in its own namespace, not in status.
		Eventually(func() []string { return shadowNotes(ns, lastDisagreement.Name) }).Should(ContainElement(
			HavePrefix("A shadow of schedulerName shadow-serving would have placed the pod on ")))
		Expect(shadowSeries("shadow-spread")).To(Equal(map[string]float64{
			"same_node": float64(wantSame), "other_node": float64(wantOther), "no_node": 0, "error": 0,
		}))

		// Nothing was held, and the shadow said nothing on the pods.
		var held schedulingv1alpha1.WaitingPodList
		Expect(k8sClient.List(ctx, &held, client.InNamespace(ns))).To(Succeed())
		Expect(held.Items).To(BeEmpty())
		var events eventsv1.EventList
		Expect(k8sClient.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(BeEmpty())
		for _, e := range events.Items {
			if e.ReportingController == "shadow-spread" {
				Expect(e.Reason).To(Equal(schedulingv1alpha1.ReasonShadowDisagreement), "event %s/%s: %s", e.Reason, e.Regarding.Name, e.Note)
			}
		}
		Expect(kubectlOK("get", "schedulingprofile", "shadow-spread", "-o", "wide")).To(MatchRegexp(`shadow-spread\s+(<none>\s+)?True\s+True\s+False\s+\S+\s+1\s+(<none>\s+)?shadow-serving\s+5\s+%d\s+Shadowing\s`, wantSame))

		// Deleting the shadow removes its series; the serving profile
		// goes on.
		Expect(k8sClient.Delete(ctx, getProfile("shadow-spread"))).To(Succeed())
		Eventually(func() map[string]float64 { return shadowSeries("shadow-spread") }).Should(BeEmpty())
		Expect(boundNode(createPod(poolPod(ns, "after", "shadow-serving", "shadow", "500m", "512Mi")))).To(HavePrefix("shadow-"))
	})

	It("evaluate the placements of another scheduler, as when moving off kube-scheduler", func() {
		nodes("migrate", 2, "4", "8Gi")
		apply("shadow-migrate", profileManifest("shadow-migrate", fitScoring("LeastAllocated")+`
shadowOf: default-scheduler`))
		shadowing("shadow-migrate")

		// The other scheduler is the test: it binds pods of
		// default-scheduler itself.
		ns := namespace()
		bind := func(name, cpu, node string) *corev1.Pod {
			GinkgoHelper()
			pod := createPod(poolPod(ns, name, corev1.DefaultSchedulerName, "migrate", cpu, "512Mi"))
			Expect(k8sClient.SubResource("binding").Create(ctx, pod, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			})).To(Succeed())
			return pod
		}
		// Empty nodes: a tie, which includes the node chosen.
		bind("first", "1", "migrate-0")
		shadowEvaluated("shadow-migrate", 1)
		// LeastAllocated would take the empty node.
		second := bind("second", "1", "migrate-0")
		shadowEvaluated("shadow-migrate", 2)
		// Fits no node, though the other scheduler bound it.
		third := bind("third", "10", "migrate-1")
		st := shadowEvaluated("shadow-migrate", 3)

		Expect([]int64{st.SameNode, st.OtherNode, st.NoNode}).To(Equal([]int64{1, 1, 1}))
		Eventually(func() []string { return shadowNotes(ns, third.Name) }).Should(ContainElement(And(
			ContainSubstring("would have found no node for the pod, which is on migrate-1"), ContainSubstring("Insufficient cpu"))))
		Eventually(func() []string { return shadowNotes(ns, second.Name) }).Should(ContainElement(
			"A shadow of schedulerName default-scheduler would have placed the pod on migrate-1, not on migrate-0"))
		Expect(k8sClient.Delete(ctx, getProfile("shadow-migrate"))).To(Succeed())
	})

	It("never counts for the schedulerName conflict, and refuses an invalid spec as any profile", func() {
		// Older, and named like the schedulerName the serving profile
		// claims: counted, it would keep that profile from serving.
		apply("shadow-claim", profileManifest("shadow-claim", "shadowOf: default-scheduler"))
		shadowing("shadow-claim")
		apply("shadow-claimant", profileManifest("shadow-claimant", "schedulerName: shadow-claim"))
		serving("shadow-claimant")

		apply("shadow-claim", profileManifest("shadow-claim", `shadowOf: default-scheduler
plugins:
  multiPoint:
    enabled:
    - name: NoSuchPlugin`))
		Eventually(profileCondition("shadow-claim", schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec))
		Expect(profileCondition("shadow-claim", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonShadowing),
			"the last valid generation keeps shadowing")
		Expect(getProfile("shadow-claim").Status.Shadow).To(HaveField("Generation", int64(1)))
		for _, name := range []string{"shadow-claim", "shadow-claimant"} {
			Expect(k8sClient.Delete(ctx, getProfile(name))).To(Succeed())
		}
	})
})
