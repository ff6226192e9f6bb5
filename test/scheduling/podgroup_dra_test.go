package scheduling_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var _ = Describe("A gang sharing a ResourceClaim", func() {
	It("binds whole, the claim allocated once in its pod-group cycle and reserved for every member", func(ctx SpecContext) {
		// The members' pod-group cycle reserves them one after the other
		// before any is bound: the later members reuse the allocation the
		// first one's Reserve made, as upstream, instead of waiting for it
		// to be written, which would never happen for a gang.
		ns := newNamespace(ctx)
		DeferCleanup(cleanUp, ns)
		newNode(ctx, "shared-claim-node-0", "4")
		newNode(ctx, "shared-claim-node-1", "4")
		publishGangProfile(ctx, "gangs")
		devicesOn(ctx, "shared-claim-node-0", "gang-"+ns+".example.com")

		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name:    "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gang-" + ns + ".example.com"},
			}}}},
		}
		_, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newGang(ctx, ns, "shared", 3, "")
		var members []string
		for i := range 3 {
			pod := podSpec(ns, fmt.Sprintf("shared-%d", i), "gangs", "1")
			pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("shared")}
			pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
			members = append(members, newPod(ctx, pod).Name)
		}

		By("binding every member where the device is")
		Eventually(nodesOf(ctx, ns, members...)).Should(HaveEach("shared-claim-node-0"))
		By("allocating the claim once and reserving it for every member")
		Eventually(func(g Gomega) {
			c, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Status.Allocation).NotTo(BeNil())
			g.Expect(c.Status.Allocation.Devices.Results).To(ConsistOf(HaveField("Device", "gpu-0")))
			var reservedFor []string
			for _, r := range c.Status.ReservedFor {
				reservedFor = append(reservedFor, r.Name)
			}
			g.Expect(reservedFor).To(ConsistOf(members))
		}).Should(Succeed())
	})
})

// devicesOn publishes one device, gpu-0, of driver on node, and a
// DeviceClass named after the driver that selects the driver's devices;
// both go when the spec ends.
func devicesOn(ctx context.Context, node, driver string) {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	_, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(cs.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{})).To(Succeed())
	})
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{{Name: "gpu-0"}},
		},
	}
	_, err = cs.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(cs.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{})).To(Succeed())
	})
}
