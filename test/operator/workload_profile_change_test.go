package operator_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// A profile edited to become, or stop being, workload-aware while members
// of a pod group wait at Permit in its previous instance.
var _ = Describe("A profile whose workload-awareness changes while pod group members are held", func() {
	It("schedules a group it held pod by pod as a unit once GangScheduling is added", func() {
		const profile, pool = "becomes-workload-aware", "wl-becomes"
		apply(profile, profileManifest(profile, `plugins:
  multiPoint:
    enabled:
    - name: ManualApproval`))
		serving(profile)
		nodes(pool, 3, "4", "8Gi")
		ns := gangNamespace()
		workloadGang(ns, "late", "", 3)
		names := []string{"late-0", "late-1", "late-2"}
		for i := range 3 {
			createPod(workloadMember(ns, "late", i, profile, pool))
		}
		By("holding each member on its own, without GangScheduling")
		for _, name := range names {
			Eventually(pendingPlugins(ns, name)).Should(Equal([]string{"ManualApproval"}))
		}

		By("adding GangScheduling: the held members are held again as a group")
		apply(profile, profileManifest(profile, `plugins:
  multiPoint:
    enabled:
    - name: GangScheduling
    - name: ManualApproval`))
		serving(profile)
		for _, name := range names {
			Eventually(func(g Gomega) {
				wp, err := getWaitingPod(ns, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(wp.Status.PodGroup).To(Equal("podgroup.scheduling.k8s.io/late"))
				g.Expect(wp.Status.Plugins).To(Equal("GangScheduling,ManualApproval"))
			}).Should(Succeed())
		}

		By("approving two of three: none binds before the third")
		for _, name := range names[:2] {
			kubectlOK("approve", "waitingpod/"+name, "-n", ns)
			Eventually(pendingPlugins(ns, name)).Should(Equal([]string{"GangScheduling"}))
		}
		Consistently(boundPods(ns, names...), "2s").Should(BeZero())
		kubectlOK("approve", "waitingpod/"+names[2], "-n", ns)
		Eventually(boundPods(ns, names...)).Should(Equal(3))
		Expect(bindSpread(ns, "late")).To(BeNumerically("<", 900*time.Millisecond), "members of late were not bound together")
	})

	It("lets the members GangScheduling held as a group go on their own once it is removed", func() {
		const profile, pool = "stops-workload-aware", "wl-stops"
		apply(profile, profileManifest(profile, `plugins:
  multiPoint:
    enabled:
    - name: GangScheduling
    - name: ManualApproval`))
		serving(profile)
		nodes(pool, 3, "4", "8Gi")
		ns := gangNamespace()
		workloadGang(ns, "short", "", 3)
		names := []string{"short-0", "short-1", "short-2"}
		for i := range 3 {
			createPod(workloadMember(ns, "short", i, profile, pool))
		}
		By("holding the members as a group")
		for _, name := range names {
			Eventually(pendingPlugins(ns, name)).Should(ConsistOf("GangScheduling", "ManualApproval"))
		}

		By("removing GangScheduling: each member is held on its own, and one approval binds one pod")
		apply(profile, profileManifest(profile, `plugins:
  multiPoint:
    enabled:
    - name: ManualApproval`))
		serving(profile)
		for _, name := range names {
			Eventually(func(g Gomega) {
				wp, err := getWaitingPod(ns, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(wp.Status.PodGroup).To(BeEmpty())
				g.Expect(wp.Status.Plugins).To(Equal("ManualApproval"))
			}).Should(Succeed())
		}
		kubectlOK("approve", "waitingpod/"+names[0], "-n", ns)
		Eventually(boundPods(ns, names[0])).Should(Equal(1))
		Consistently(boundPods(ns, names[1:]...), "1s").Should(BeZero())
	})
})
