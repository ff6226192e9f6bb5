package dra_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Upstream's reasons (dynamicresources.go).
const (
	reasonCannotAllocate = "cannot allocate all claims"
	reasonNotAvailable   = "resourceclaim not available on the node"
)

// unschedulableMessage is kube-scheduler 1.37.2's message for a pod every
// node refuses for reason, with DefaultPreemption's verdict on it.
func unschedulableMessage(nodes int, reason string) string {
	return fmt.Sprintf("0/%[1]d nodes are available: %[1]d %[2]s. preemption: 0/%[1]d nodes are available: %[1]d Preemption is not helpful for scheduling.", nodes, reason)
}

// The simulated GPUs of the specs' nodes: two models told apart by their
// model attribute and memory capacity.
var (
	gpus80 = localcluster.SimulatedGPUs{Count: 4, Model: "sim-80g", Memory: "80Gi"}
	gpus40 = localcluster.SimulatedGPUs{Count: 4, Model: "sim-40g", Memory: "40Gi"}
)

// newNamespace returns a namespace of the spec, emptied after it together
// with every node, so specs do not see each other's devices.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dra-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cleanUp, ns.Name)
	return ns.Name
}

// cleanUp deletes the spec's pods and claims, every DeviceTaintRule and
// every node, and waits until the simulated driver withdrew the nodes'
// devices. Pods go at once (the simulated kubelet confirms deletions).
func cleanUp(ctx context.Context, ns string) {
	zero := int64(0)
	Expect(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.ResourceV1().DeviceTaintRules().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Eventually(func(g Gomega) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).To(BeEmpty())
		slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(slices.Items).To(BeEmpty())
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}).Should(Succeed())
}

// createNodes creates nodes named prefix-0…, each with gpus (none when
// nil), and waits until the simulated driver published their devices.
func createNodes(ctx context.Context, prefix string, count int, gpus *localcluster.SimulatedGPUs) []string {
	GinkgoHelper()
	var names []string
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		node := testenv.Node(name, "8", "32Gi", nil)
		if gpus != nil {
			localcluster.AddSimulatedGPUs(node, *gpus)
		}
		Expect(testenv.CreateNode(ctx, c, node)).To(Succeed())
		names = append(names, name)
	}
	if gpus != nil {
		for _, name := range names {
			Eventually(func() error {
				_, err := cs.ResourceV1().ResourceSlices().Get(ctx, name+"-"+localcluster.SimulatedDRADriverName, metav1.GetOptions{})
				return err
			}).Should(Succeed())
		}
	}
	return names
}

// gpuRequest asks for count simulated GPUs matching the CEL selectors.
func gpuRequest(name string, count int64, selectors ...string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: localcluster.SimulatedGPUClassName,
		Selectors:       celSelectors(selectors),
		AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
		Count:           count,
	}}
}

func celSelectors(expressions []string) []resourcev1.DeviceSelector {
	var out []resourcev1.DeviceSelector
	for _, e := range expressions {
		out = append(out, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return out
}

// createTemplate creates a ResourceClaimTemplate of requests.
func createTemplate(ctx context.Context, ns, name string, requests ...resourcev1.DeviceRequest) {
	GinkgoHelper()
	Expect(c.Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}},
	})).To(Succeed())
}

// createClaim creates a ResourceClaim of requests, for pods to share.
func createClaim(ctx context.Context, ns, name string, requests ...resourcev1.DeviceRequest) {
	GinkgoHelper()
	Expect(c.Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}},
	})).To(Succeed())
}

// claimSource is where a pod's claim comes from: a template, or a claim
// of that name.
type claimSource struct {
	template, claim string
}

// gpuPod is a pod of profile with one pod claim "gpus" from source, used
// by its container.
func gpuPod(ns, name, profile string, source claimSource) *corev1.Pod {
	pod := testenv.Pod(ns, name, profile, "100m", "")
	podClaim := corev1.PodResourceClaim{Name: "gpus"}
	if source.template != "" {
		podClaim.ResourceClaimTemplateName = ptr.To(source.template)
	} else {
		podClaim.ResourceClaimName = ptr.To(source.claim)
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{podClaim}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	return pod
}

// extendedResourcePod is a pod of the default profile whose container asks
// for count of the simulated GPUs' extended resource, as a pod written for
// a device plugin does.
func extendedResourcePod(ns, name string, count int64) *corev1.Pod {
	quantity := *resource.NewQuantity(count, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: defaultProfile, Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{localcluster.SimulatedGPUExtendedResource: quantity},
				Limits:   corev1.ResourceList{localcluster.SimulatedGPUExtendedResource: quantity},
			},
		}}},
	}
}

func createPod(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(c.Create(ctx, pod)).To(Succeed())
	return pod
}

// running waits until the simulated kubelet runs pod, which it does only
// once its claims are allocated and reserved for it, and returns the pod.
func running(ctx context.Context, pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	got := &corev1.Pod{}
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "pod %s: %v", pod.Name, got.Status.Conditions)
	}).Should(Succeed())
	return got
}

// claimOf returns the claim of pod's pod claim "gpus", the one made from
// its template or the one it names.
func claimOf(ctx context.Context, pod *corev1.Pod) *resourcev1.ResourceClaim {
	GinkgoHelper()
	claim := &resourcev1.ResourceClaim{}
	Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		name, _, err := resourceclaim.Name(got, &got.Spec.ResourceClaims[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(name).NotTo(BeNil())
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: *name}, claim)).To(Succeed())
	}).Should(Succeed())
	return claim
}

// allocatedDevice is a device of an allocation result.
type allocatedDevice struct {
	Request, Driver, Pool, Device string
}

// allocatedDevices are the devices allocated to claim.
func allocatedDevices(claim *resourcev1.ResourceClaim) []allocatedDevice {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []allocatedDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		out = append(out, allocatedDevice{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	return out
}

// expectAllocatedOn checks that claim is allocated count devices of
// request on node (the driver publishes one pool per node, named after
// it), restricted to that node, and reserved for exactly pods.
func expectAllocatedOn(claim *resourcev1.ResourceClaim, node, request string, count int, pods ...*corev1.Pod) {
	GinkgoHelper()
	Expect(claim.Status.Allocation).NotTo(BeNil(), "claim %s is not allocated", claim.Name)
	devices := allocatedDevices(claim)
	Expect(devices).To(HaveLen(count))
	Expect(devices).To(HaveEach(And(
		HaveField("Request", request),
		HaveField("Driver", localcluster.SimulatedDRADriverName),
		HaveField("Pool", node),
		HaveField("Device", MatchRegexp(`^gpu-\d$`)),
	)))
	seen := map[string]bool{}
	for _, d := range devices {
		Expect(seen).NotTo(HaveKey(d.Device), "device %s allocated twice", d.Device)
		seen[d.Device] = true
	}
	Expect(claim.Status.Allocation.NodeSelector).NotTo(BeNil())
	Expect(claim.Status.Allocation.NodeSelector.NodeSelectorTerms).To(ConsistOf(HaveField("MatchFields", ConsistOf(And(
		HaveField("Key", "metadata.name"), HaveField("Operator", corev1.NodeSelectorOpIn), HaveField("Values", ConsistOf(node)),
	)))))
	var reserved []resourcev1.ResourceClaimConsumerReference
	for _, p := range pods {
		reserved = append(reserved, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	Expect(claim.Status.ReservedFor).To(ConsistOf(reserved))
}

// pendingMessage is the PodScheduled=False message of pod once the
// scheduler reported it unschedulable.
func pendingMessage(ctx context.Context, pod *corev1.Pod) func(Gomega) string {
	return func(g Gomega) string {
		got := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Spec.NodeName).To(BeEmpty())
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return cond.Message
			}
		}
		return ""
	}
}

// eventNotes are the notes of the events of reason about the pod.
func eventNotes(ctx context.Context, pod *corev1.Pod, reason string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
			return nil
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod.Name && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}

// gone says whether obj no longer exists.
func gone(ctx context.Context, obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
}
