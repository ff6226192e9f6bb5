package dra_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

var _ = Describe("Dynamic Resource Allocation", func() {
	It("makes a template's claim for the pod, allocates it on the pod's node and deletes it with the pod", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		gpuNodes := createNodes(ctx, "gpu", 1, &gpus80)
		createNodes(ctx, "cpu", 2, nil)
		createTemplate(ctx, ns, "one-gpu", gpuRequest("gpu", 1))
		pod := createPod(ctx, gpuPod(ns, "train", defaultProfile, claimSource{template: "one-gpu"}))
		// The resource claim controller makes the claim whatever the
		// scheduler does; the pod is placed once it exists.
		claim := claimOf(ctx, pod)
		Expect(claim.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Pod"), HaveField("Name", pod.Name), HaveField("UID", pod.UID))))
		Expect(claim.Annotations).To(HaveKeyWithValue("resource.kubernetes.io/pod-claim-name", "gpus"))

		pod = running(ctx, pod)
		Expect(pod.Spec.NodeName).To(Equal(gpuNodes[0]))
		claim = claimOf(ctx, pod)
		expectAllocatedOn(claim, gpuNodes[0], "gpu", 1, pod)
		Expect(eventNotes(ctx, pod, "Scheduled")()).To(ContainElement(fmt.Sprintf("Successfully assigned %s/%s to %s", ns, pod.Name, gpuNodes[0])))

		Expect(c.Delete(ctx, pod)).To(Succeed())
		Eventually(gone(ctx, claim)).Should(BeTrue(), "the garbage collector deletes the claim made for a deleted pod")
	})

	It("allocates exactly the count asked for, refuses more than is free and places the pod once devices are freed", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		node := createNodes(ctx, "gpu", 1, &gpus80)[0]
		createTemplate(ctx, ns, "three", gpuRequest("gpu", 3))
		createTemplate(ctx, ns, "two", gpuRequest("gpu", 2))
		first := running(ctx, createPod(ctx, gpuPod(ns, "three", defaultProfile, claimSource{template: "three"})))
		expectAllocatedOn(claimOf(ctx, first), node, "gpu", 3, first)

		second := createPod(ctx, gpuPod(ns, "two", defaultProfile, claimSource{template: "two"}))
		Eventually(pendingMessage(ctx, second)).Should(Equal(unschedulableMessage(1, reasonCannotAllocate)))
		Eventually(eventNotes(ctx, second, "FailedScheduling")).Should(ContainElement(unschedulableMessage(1, reasonCannotAllocate)))

		Expect(c.Delete(ctx, first)).To(Succeed())
		second = running(ctx, second)
		expectAllocatedOn(claimOf(ctx, second), node, "gpu", 2, second)
	})

	It("allocates every matching device of one node in All mode", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "gpu", 2, &gpus40)
		all := gpuRequest("gpu", 0)
		all.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
		createTemplate(ctx, ns, "all", all)
		createTemplate(ctx, ns, "one", gpuRequest("gpu", 1))

		first := running(ctx, createPod(ctx, gpuPod(ns, "all-0", defaultProfile, claimSource{template: "all"})))
		expectAllocatedOn(claimOf(ctx, first), first.Spec.NodeName, "gpu", gpus40.Count, first)
		second := running(ctx, createPod(ctx, gpuPod(ns, "all-1", defaultProfile, claimSource{template: "all"})))
		Expect(second.Spec.NodeName).NotTo(Equal(first.Spec.NodeName))
		Expect([]string{first.Spec.NodeName, second.Spec.NodeName}).To(ConsistOf(nodes))
		expectAllocatedOn(claimOf(ctx, second), second.Spec.NodeName, "gpu", gpus40.Count, second)

		third := createPod(ctx, gpuPod(ns, "one", defaultProfile, claimSource{template: "one"}))
		Eventually(pendingMessage(ctx, third)).Should(Equal(unschedulableMessage(2, reasonCannotAllocate)))
	})

	It("places pods by CEL selectors on their devices' attributes and capacity", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		big := createNodes(ctx, "big", 1, &gpus80)[0]
		small := createNodes(ctx, "small", 1, &gpus40)[0]
		createTemplate(ctx, ns, "by-memory", gpuRequest("gpu", 2,
			`device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0`))
		createTemplate(ctx, ns, "by-model", gpuRequest("gpu", 2,
			`device.attributes["gpu.example.com"].model == "sim-40g"`, `device.attributes["gpu.example.com"].index >= 2`))
		createTemplate(ctx, ns, "none", gpuRequest("gpu", 1, `device.attributes["gpu.example.com"].model == "sim-160g"`))

		byMemory := running(ctx, createPod(ctx, gpuPod(ns, "by-memory", defaultProfile, claimSource{template: "by-memory"})))
		Expect(byMemory.Spec.NodeName).To(Equal(big))
		expectAllocatedOn(claimOf(ctx, byMemory), big, "gpu", 2, byMemory)

		byModel := running(ctx, createPod(ctx, gpuPod(ns, "by-model", defaultProfile, claimSource{template: "by-model"})))
		Expect(byModel.Spec.NodeName).To(Equal(small))
		claim := claimOf(ctx, byModel)
		expectAllocatedOn(claim, small, "gpu", 2, byModel)
		Expect(allocatedDevices(claim)).To(ConsistOf(HaveField("Device", "gpu-2"), HaveField("Device", "gpu-3")))

		none := createPod(ctx, gpuPod(ns, "none", defaultProfile, claimSource{template: "none"}))
		Eventually(pendingMessage(ctx, none)).Should(Equal(unschedulableMessage(2, reasonCannotAllocate)))
	})

	It("falls back to the next subrequest of firstAvailable", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		node := createNodes(ctx, "small", 1, &gpus40)[0]
		sub := func(name string, count int64, model string) resourcev1.DeviceSubRequest {
			return resourcev1.DeviceSubRequest{
				Name: name, DeviceClassName: localcluster.SimulatedGPUClassName,
				Selectors:      celSelectors([]string{fmt.Sprintf(`device.attributes["gpu.example.com"].model == %q`, model)}),
				AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
			}
		}
		createTemplate(ctx, ns, "prefer-big", resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
			sub("big", 1, "sim-80g"), sub("small", 2, "sim-40g"),
		}})
		pod := running(ctx, createPod(ctx, gpuPod(ns, "train", defaultProfile, claimSource{template: "prefer-big"})))
		expectAllocatedOn(claimOf(ctx, pod), node, "gpu/small", 2, pod)
	})

	It("keeps pods off devices tainted by a DeviceTaintRule unless they tolerate it, and evicts on NoExecute", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "gpu", 2, &gpus80)
		taint := func(name, pool string, effect resourcev1.DeviceTaintEffect) {
			Expect(c.Create(ctx, &resourcev1.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.DeviceTaintRuleSpec{
					DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(localcluster.SimulatedDRADriverName), Pool: ptr.To(pool)},
					Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Value: "true", Effect: effect},
				},
			})).To(Succeed())
		}
		taint("maintenance-0", nodes[0], resourcev1.DeviceTaintEffectNoSchedule)
		createTemplate(ctx, ns, "four", gpuRequest("gpu", 4))
		tolerating := gpuRequest("gpu", 4)
		tolerating.Exactly.Tolerations = []resourcev1.DeviceToleration{{
			Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpEqual, Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule,
		}}
		createTemplate(ctx, ns, "four-tolerating", tolerating)

		plain := running(ctx, createPod(ctx, gpuPod(ns, "plain", defaultProfile, claimSource{template: "four"})))
		Expect(plain.Spec.NodeName).To(Equal(nodes[1]), "the untolerated devices of %s are not allocated", nodes[0])
		// Every free device is tainted now: only a pod that tolerates the
		// taint gets them.
		refused := createPod(ctx, gpuPod(ns, "refused", defaultProfile, claimSource{template: "four"}))
		Eventually(pendingMessage(ctx, refused)).Should(Equal(unschedulableMessage(2, reasonCannotAllocate)))
		tolerant := running(ctx, createPod(ctx, gpuPod(ns, "tolerant", defaultProfile, claimSource{template: "four-tolerating"})))
		Expect(tolerant.Spec.NodeName).To(Equal(nodes[0]))
		expectAllocatedOn(claimOf(ctx, tolerant), nodes[0], "gpu", 4, tolerant)

		// The device taint eviction controller evicts the pod using
		// devices that gain a NoExecute taint it does not tolerate.
		taint("drain-1", nodes[1], resourcev1.DeviceTaintEffectNoExecute)
		Eventually(gone(ctx, plain)).Should(BeTrue(), "pod %s on NoExecute-tainted devices is evicted", plain.Name)
		Consistently(func() (string, error) {
			p := &corev1.Pod{}
			err := c.Get(ctx, client.ObjectKeyFromObject(tolerant), p)
			return string(p.Status.Phase), err
		}).Should(Equal(string(corev1.PodRunning)))
	})

	It("places two pods sharing a claim on its devices' node and reserves it for both", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "gpu", 3, &gpus80)
		createClaim(ctx, ns, "shared", gpuRequest("gpu", 2))
		first := running(ctx, createPod(ctx, gpuPod(ns, "first", defaultProfile, claimSource{claim: "shared"})))
		second := running(ctx, createPod(ctx, gpuPod(ns, "second", defaultProfile, claimSource{claim: "shared"})))
		Expect(second.Spec.NodeName).To(Equal(first.Spec.NodeName))
		expectAllocatedOn(claimOf(ctx, second), first.Spec.NodeName, "gpu", 2, first, second)

		// When one goes, the resource claim controller drops it from
		// reservedFor; the allocation stays for the other.
		Expect(c.Delete(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			claim := &resourcev1.ResourceClaim{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shared"}, claim)).To(Succeed())
			g.Expect(claim.Status.ReservedFor).To(ConsistOf(HaveField("UID", second.UID)))
			g.Expect(claim.Status.Allocation).NotTo(BeNil())
		}).Should(Succeed())
	})

	It("pins a pod to the node of its allocated claim, and deallocates the claim in PostFilter once no pod uses it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "gpu", 3, &gpus80)
		createClaim(ctx, ns, "pinned", gpuRequest("gpu", 1))
		holder := running(ctx, createPod(ctx, gpuPod(ns, "holder", defaultProfile, claimSource{claim: "pinned"})))
		pinnedNode := holder.Spec.NodeName

		// Kept off the claim's node by its affinity, the pod fits nowhere:
		// the claim is allocated there, and reserved for another pod, so
		// PostFilter may not deallocate it.
		elsewhere := gpuPod(ns, "elsewhere", defaultProfile, claimSource{claim: "pinned"})
		elsewhere.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{pinnedNode},
			}}}},
		}}}
		createPod(ctx, elsewhere)
		Eventually(pendingMessage(ctx, elsewhere)).Should(HavePrefix(
			"0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 " + reasonNotAvailable + "."))
		Consistently(func(g Gomega) {
			claim := &resourcev1.ResourceClaim{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pinned"}, claim)).To(Succeed())
			expectAllocatedOn(claim, pinnedNode, "gpu", 1, holder)
		}).Should(Succeed())

		// Once the holder is gone the claim is allocated but unused:
		// PostFilter deallocates it and the next attempt allocates it
		// where the pod may go.
		Expect(c.Delete(ctx, holder)).To(Succeed())
		elsewhere = running(ctx, elsewhere)
		Expect(elsewhere.Spec.NodeName).NotTo(Equal(pinnedNode))
		expectAllocatedOn(claimOf(ctx, elsewhere), elsewhere.Spec.NodeName, "gpu", 1, elsewhere)
	})

	It("releases every device of a GPU gang that times out, leaking none", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "gpu", 2, &gpus80)
		createTemplate(ctx, ns, "four", gpuRequest("gpu", 4))
		Expect(c.Create(ctx, &podgroupv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainers"},
			Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: ptr.To[int32](3)},
		})).To(Succeed())
		// Three members of four GPUs each on two nodes of four: two are
		// held at Permit with their devices, the third fits nowhere.
		var members []*corev1.Pod
		for i := range 3 {
			pod := gpuPod(ns, fmt.Sprintf("trainer-%d", i), gangProfile, claimSource{template: "four"})
			pod.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "trainers"}
			members = append(members, createPod(ctx, pod))
		}
		Eventually(func(g Gomega) []string {
			var notes []string
			for _, m := range members {
				notes = append(notes, eventNotes(ctx, m, "FailedScheduling")()...)
			}
			return notes
		}).Should(ContainElement(ContainSubstring("rejected due to timeout after waiting 3s at plugin Coscheduling")))
		for _, m := range members {
			got := &corev1.Pod{}
			Expect(c.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			Expect(got.Spec.NodeName).To(BeEmpty(), "no member of the gang is bound")
		}
		// Held allocations are the scheduler's alone: none reached a claim.
		claims := &resourcev1.ResourceClaimList{}
		Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		for _, claim := range claims.Items {
			Expect(claim.Status.Allocation).To(BeNil(), "claim %s", claim.Name)
		}

		// With the gang gone, both nodes' GPUs are free for other pods:
		// the gang's Unreserve gave back everything it held.
		Expect(c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() ([]resourcev1.ResourceClaim, error) {
			list := &resourcev1.ResourceClaimList{}
			err := c.List(ctx, list, client.InNamespace(ns))
			return list.Items, err
		}).Should(BeEmpty())
		var after []string
		for i := range 2 {
			pod := running(ctx, createPod(ctx, gpuPod(ns, fmt.Sprintf("after-%d", i), defaultProfile, claimSource{template: "four"})))
			expectAllocatedOn(claimOf(ctx, pod), pod.Spec.NodeName, "gpu", 4, pod)
			after = append(after, pod.Spec.NodeName)
		}
		Expect(after[0]).NotTo(Equal(after[1]))
	})

	// Extended resources backed by DRA (upstream's DRAExtendedResource, on
	// by default in 1.37): a pod asking for the class's extended resource
	// gets devices of the class on a node without it as allocatable,
	// through a claim the scheduler creates for the pod in PreBind and
	// names in pod.status.extendedResourceClaimStatus.
	It("serves an extended resource backed by DRA with a claim it creates for the pod", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		gpuNode := createNodes(ctx, "gpu", 1, &gpus80)[0]
		createNodes(ctx, "cpu", 1, nil)
		pod := running(ctx, createPod(ctx, extendedResourcePod(ns, "legacy", 2)))
		Expect(pod.Spec.NodeName).To(Equal(gpuNode))

		status := pod.Status.ExtendedResourceClaimStatus
		Expect(status).NotTo(BeNil(), "pod.status.extendedResourceClaimStatus")
		Expect(status.ResourceClaimName).To(HavePrefix("legacy-extended-resources-"))
		Expect(status.RequestMappings).To(ConsistOf(corev1.ContainerExtendedResourceRequest{
			ContainerName: "app", ResourceName: string(localcluster.SimulatedGPUExtendedResource), RequestName: "container-0-request-0",
		}))
		claim := &resourcev1.ResourceClaim{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: status.ResourceClaimName}, claim)).To(Succeed())
		Expect(claim.Annotations).To(HaveKeyWithValue(resourcev1.ExtendedResourceClaimAnnotation, "true"))
		Expect(claim.OwnerReferences).To(ConsistOf(And(
			HaveField("Kind", "Pod"), HaveField("Name", pod.Name), HaveField("UID", pod.UID), HaveField("Controller", Equal(ptr.To(true))),
		)))
		Expect(claim.Spec.Devices.Requests).To(ConsistOf(And(
			HaveField("Name", "container-0-request-0"),
			HaveField("Exactly.DeviceClassName", localcluster.SimulatedGPUClassName),
			HaveField("Exactly.Count", int64(2)),
		)))
		expectAllocatedOn(claim, gpuNode, "container-0-request-0", 2, pod)

		Expect(c.Delete(ctx, pod)).To(Succeed())
		Eventually(gone(ctx, claim)).Should(BeTrue(), "the garbage collector deletes the claim made for a deleted pod")
	})

	It("shows on a held pod's WaitingPod the devices set aside for its extended resource, which its claim then gets", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		gpuNode := createNodes(ctx, "gpu", 1, &gpus80)[0]
		// Held at Permit until approved: no claim exists for it yet, but
		// its WaitingPod shows its two GPUs.
		pod := extendedResourcePod(ns, "legacy", 2)
		pod.Spec.SchedulerName = approvalProfile
		first := createPod(ctx, pod)
		var shown []schedulingv1alpha1.AllocatedDevice
		Eventually(func(g Gomega) {
			wp := &schedulingv1alpha1.WaitingPod{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(first), wp)).To(Succeed())
			shown = wp.Status.ExtendedResourceDevices
			g.Expect(shown).To(HaveLen(2))
		}).Should(Succeed())
		for _, d := range shown {
			Expect(d).To(And(HaveField("Request", "container-0-request-0"), HaveField("Pool", gpuNode)))
		}
		claims := &resourcev1.ResourceClaimList{}
		Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		Expect(claims.Items).To(BeEmpty(), "the claim is created only once the pod is let through")

		approve := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"decision":"Approve"}}`))
		Expect(c.Patch(ctx, &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Name}}, approve)).To(Succeed())
		first = running(ctx, first)
		claim := &resourcev1.ResourceClaim{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.Status.ExtendedResourceClaimStatus.ResourceClaimName}, claim)).To(Succeed())
		var got []schedulingv1alpha1.AllocatedDevice
		for _, d := range allocatedDevices(claim) {
			got = append(got, schedulingv1alpha1.AllocatedDevice{Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device})
		}
		Expect(got).To(Equal(shown), "the claim gets the devices the WaitingPod showed")
	})

	It("refuses an extended resource backed by DRA beyond what any node has, as upstream", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "gpu", 1, &gpus80)
		createNodes(ctx, "cpu", 1, nil)
		pod := createPod(ctx, extendedResourcePod(ns, "greedy", int64(gpus80.Count)+1))
		Eventually(pendingMessage(ctx, pod)).Should(Equal(unschedulableMessage(2, reasonCannotAllocate)))
		claims := &resourcev1.ResourceClaimList{}
		Expect(c.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		Expect(claims.Items).To(BeEmpty(), "no claim is created for a pod that was not placed")
	})
})
