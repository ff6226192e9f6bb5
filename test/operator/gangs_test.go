package operator_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// gangProfile runs Coscheduling as scheduler-plugins' sample configuration
// does (its QueueSort instead of PrioritySort), with args, plus the extra
// multiPoint plugins.
func gangProfile(name, args string, extra ...string) string {
	plugins := "    - name: Coscheduling\n"
	for _, p := range extra {
		plugins += "    - name: " + p + "\n"
	}
	return profileManifest(name, fmt.Sprintf(`plugins:
  multiPoint:
    enabled:
%s  queueSort:
    enabled:
    - name: Coscheduling
    disabled:
    - name: "*"
pluginConfig:
- name: Coscheduling
  args:
%s`, plugins, indent(args, 4)))
}

// podGroup creates a PodGroup of minMember, with an optional timeout.
func podGroup(ns, name string, minMember int32, timeoutSeconds *int32) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &podgroupv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: timeoutSeconds},
	})).To(Succeed())
}

// member is pod i of group, for schedulerName, fitting only nodes of pool.
func member(ns, group string, i int, schedulerName, pool, cpu string) *corev1.Pod {
	pod := poolPod(ns, fmt.Sprintf("%s-%d", group, i), schedulerName, pool, cpu, "")
	pod.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: group}
	return pod
}

// boundMembers counts the bound pods of each group in ns.
func boundMembers(ns string) map[string]int {
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	out := map[string]int{}
	for _, p := range pods.Items {
		if g := p.Labels[podgroupv1alpha1.PodGroupLabel]; g != "" && p.Spec.NodeName != "" {
			out[g]++
		}
	}
	return out
}

// noPartialGang fails when a group of ns has some but fewer than minMember
// members bound.
func noPartialGang(ns string, minMember int) func(Gomega) {
	return func(g Gomega) {
		for group, n := range boundMembers(ns) {
			g.Expect(n).To(Or(BeZero(), BeNumerically(">=", minMember)), "group %s has %d of %d members bound", group, n, minMember)
		}
	}
}

// gangNamespace is a fresh namespace whose pods are deleted when the spec
// ends, so that gangs that can never complete stop retrying.
func gangNamespace() string {
	GinkgoHelper()
	ns := namespace()
	DeferCleanup(func() {
		Expect(k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
	})
	return ns
}

// heldNodes returns the nodes of the pods of ns (of group, if given) that
// hold a node without being bound: those waiting at Permit.
func heldNodes(ns string, group ...string) []string {
	var list schedulingv1alpha1.WaitingPodList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, wp := range list.Items {
		if (len(group) == 0 || wp.Status.PodGroup == group[0]) && wp.Status.NodeName != "" &&
			meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting) {
			out = append(out, wp.Status.NodeName)
		}
	}
	return out
}

// bindSpread is the time between the first and the last binding of the
// members of group, from the scheduler's Scheduled events.
func bindSpread(ns, group string) time.Duration {
	GinkgoHelper()
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var first, last time.Time
	for _, e := range list.Items {
		if e.Reason != "Scheduled" || !strings.HasPrefix(e.Regarding.Name, group+"-") {
			continue
		}
		t := e.EventTime.Time
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(first)
}

// gpuNode publishes four devices of driver on node, in a pool of its name,
// and a DeviceClass of driver's name selecting them, as a DRA driver and
// its installation would; both go when the spec ends.
func gpuNode(driver, node string) {
	GinkgoHelper()
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := range 4 {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	for _, obj := range []client.Object{class, slice} {
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		DeferCleanup(k8sClient.Delete, ctx, obj)
	}
}

// gpuMember is member i of group on nodes of pool, whose ResourceClaim,
// made here, asks for two devices of class.
func gpuMember(ns, group string, i int, schedulerName, pool, class string) *corev1.Pod {
	GinkgoHelper()
	pod := member(ns, group, i, schedulerName, pool, "1")
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name + "-gpus"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2,
			},
		}}}},
	}
	Expect(k8sClient.Create(ctx, claim)).To(Succeed())
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	return pod
}

// heldDevices returns, once every named WaitingPod shows its pod held and
// awaiting a decision, the devices each shows for its claim "gpus", as
// pool/device; nil before.
func heldDevices(ns string, names ...string) map[string][]string {
	out := map[string][]string{}
	for _, name := range names {
		wp, err := getWaitingPod(ns, name)
		if err != nil || !meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable) ||
			len(wp.Status.Claims) != 1 || wp.Status.Claims[0].Name != "gpus" {
			return nil
		}
		for _, d := range wp.Status.Claims[0].Devices {
			out[name] = append(out[name], d.Pool+"/"+d.Device)
		}
	}
	return out
}

// allocatedDevices returns the devices written to a claim's status, as
// pool/device, and the pods it is reserved for.
func allocatedDevices(ns, name string) ([]string, []string) {
	GinkgoHelper()
	claim := &resourceapi.ResourceClaim{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim)).To(Succeed())
	var devices, pods []string
	if claim.Status.Allocation != nil {
		for _, r := range claim.Status.Allocation.Devices.Results {
			devices = append(devices, r.Pool+"/"+r.Device)
		}
	}
	for _, ref := range claim.Status.ReservedFor {
		pods = append(pods, ref.Name)
	}
	return devices, pods
}

func getPodGroup(ns, name string) *podgroupv1alpha1.PodGroup {
	pg := &podgroupv1alpha1.PodGroup{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil {
		return nil
	}
	return pg
}

var _ = Describe("Gangs", Ordered, func() {
	BeforeAll(func() {
		apply("gangs", gangProfile("gangs", "permitWaitingTimeSeconds: 30"))
		serving("gangs")
		// Members keep their nodes while the rest of the gang waits for
		// room, until the timeout, instead of being released when a
		// member does not fit.
		apply("holding-gangs", gangProfile("holding-gangs", "permitWaitingTimeSeconds: 30\npodGroupRejectPercentage: 100"))
		serving("holding-gangs")
		apply("approved-gangs", gangProfile("approved-gangs", "permitWaitingTimeSeconds: 30\npodGroupRejectPercentage: 100", "ManualApproval"))
		serving("approved-gangs")
	})

	It("holds the members visibly until the gang is complete, then binds them all", func() {
		ns := gangNamespace()
		nodes("gang-fit", 4, "4", "8Gi")
		podGroup(ns, "train", 4, nil)
		for i := range 3 {
			createPod(member(ns, "train", i, "holding-gangs", "gang-fit", "3"))
		}
		// The last member fits only a node that is not ready for it yet.
		last := member(ns, "train", 3, "holding-gangs", "gang-fit", "3")
		last.Spec.NodeSelector["gang"] = "train"
		createPod(last)
		for i := range 3 {
			name := fmt.Sprintf("train-%d", i)
			Eventually(func(g Gomega) {
				wp, err := getWaitingPod(ns, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(wp.Status.PodGroup).To(Equal("train"))
				g.Expect(wp.Status.Message).To(Equal("Coscheduling: 3/4 members assigned"))
				g.Expect(wp.Status.NodeName).NotTo(BeEmpty())
			}).Should(Succeed())
			Eventually(permitCondition(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).Should(And(
				havePodCondition(corev1.ConditionTrue, "HeldByCoscheduling"),
				HaveField("Message", HaveSuffix(": see kubectl get waitingpod/"+name)),
			))
		}
		Expect(kubectlOK("get", "waitingpods", "-n", ns)).To(ContainSubstring("Coscheduling: 3/4 members assigned"))
		Eventually(func() string { return kubectlOK("get", "pg", "-n", ns) }).Should(MatchRegexp(`train\s+Scheduling\s+4\s+3\s`))
		Consistently(func() map[string]int { return boundMembers(ns) }, "2s").Should(BeEmpty())

		// A node becomes ready for the last member: the gang is complete.
		var free string
		for i := range 4 {
			name := fmt.Sprintf("gang-fit-%d", i)
			if !slices.Contains(heldNodes(ns), name) {
				free = name
			}
		}
		kubectlOK("label", "node", free, "gang=train")
		Eventually(func() map[string]int { return boundMembers(ns) }).Should(Equal(map[string]int{"train": 4}))
		// The members let through with the last one are released on
		// their pods too.
		for i := range 3 {
			held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("train-%d", i)}}
			Eventually(permitCondition(held)).Should(havePodCondition(corev1.ConditionFalse, "Allowed"))
		}
		Eventually(func(g Gomega) {
			pg := getPodGroup(ns, "train")
			g.Expect(pg).NotTo(BeNil())
			g.Expect(pg.Status.Scheduled).To(BeEquivalentTo(4))
			g.Expect(meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled)).To(haveCondition(metav1.ConditionTrue, podgroupv1alpha1.ReasonQuorumReached))
		}).Should(Succeed())
	})

	It("binds none of a gang that does not fit and releases what its members held", func() {
		ns := gangNamespace()
		nodes("gang-short", 3, "4", "8Gi")
		podGroup(ns, "big", 4, nil)
		for i := range 4 {
			createPod(member(ns, "big", i, "gangs", "gang-short", "3"))
		}
		// Three members fit one node each; the fourth does not, and its
		// failure releases the three.
		Eventually(func() []string {
			var notes []string
			for i := range 4 {
				notes = append(notes, eventNotes("Pod", ns, fmt.Sprintf("big-%d", i), "FailedScheduling")()...)
			}
			return notes
		}).Should(And(
			ContainElement(MatchRegexp(`PodGroup %s/big gets rejected due to Pod big-\d is unschedulable even after PostFilter`, ns)),
			ContainElement(ContainSubstring("optimistic rejection in PostFilter"))))
		Consistently(func() map[string]int { return boundMembers(ns) }, "3s").Should(BeEmpty())
		// What the gang held is free: an ordinary pod that needs a whole
		// node's worth of what a member asks fits.
		other := namespace()
		ordinary := createPod(poolPod(other, "ordinary", "gangs", "gang-short", "3", ""))
		boundNode(ordinary)
		Consistently(func() map[string]int { return boundMembers(ns) }, "2s").Should(BeEmpty())
	})

	It("holds a whole gang for one decision, and an approval never bypasses the quorum", func() {
		ns := gangNamespace()
		nodes("gang-approve", 3, "4", "8Gi")

		// A complete gang: the quorum is reached, ManualApproval holds
		// every member, and one decision releases them all.
		podGroup(ns, "whole", 3, nil)
		for i := range 3 {
			createPod(member(ns, "whole", i, "approved-gangs", "gang-approve", "1"))
		}
		for i := range 3 {
			name := fmt.Sprintf("whole-%d", i)
			Eventually(waitingCondition(ns, name, schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
			// Each member's pod points at the command that decides the
			// whole gang, in the form that names scheduler-plugins' kind.
			Eventually(permitCondition(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).Should(And(
				havePodCondition(corev1.ConditionTrue, "HeldByCoschedulingAndManualApproval"),
				HaveField("Message", HaveSuffix(": decide the gang with kubectl approve|reject pg/whole")),
			))
		}
		Consistently(func() map[string]int { return boundMembers(ns) }, "1s").Should(BeEmpty())
		// Coscheduling still holds every member, and lets the gang go once
		// the approvals complete it: a success, said as one.
		r, err := kubectl.Run("approve", "podgroup/whole", "-n", ns, "--reason", "reviewed")
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), r.Stderr)
		Expect(r.Stdout).To(HaveSuffix("podgroup/whole: 3 of 3 members approved; Coscheduling releases them once the group is complete\n"))
		Expect(r.Stderr).To(BeEmpty())
		Eventually(func() map[string]int { return boundMembers(ns) }).Should(Equal(map[string]int{"whole": 3}))

		// An incomplete gang: approving its members decides ManualApproval
		// only; the quorum holds them until the last one is placed.
		podGroup(ns, "part", 3, nil)
		for i := range 2 {
			createPod(member(ns, "part", i, "approved-gangs", "gang-approve", "1"))
		}
		last := member(ns, "part", 2, "approved-gangs", "gang-approve", "1")
		last.Spec.NodeSelector["gang"] = "part"
		createPod(last)
		for i := range 2 {
			Eventually(waitingCondition(ns, fmt.Sprintf("part-%d", i), schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))
		}
		kubectlOK("approve", "podgroup/part", "-n", ns)
		Eventually(func() []string {
			wp, err := getWaitingPod(ns, "part-0")
			if err != nil {
				return nil
			}
			var names []string
			for _, p := range wp.Status.PendingPlugins {
				names = append(names, p.Name)
			}
			return names
		}).Should(Equal([]string{"Coscheduling"}))
		Consistently(func() int { return boundMembers(ns)["part"] }, "2s").Should(BeZero())
		kubectlOK("label", "node", "gang-approve-0", "gang=part")
		Eventually(waitingCondition(ns, "part-2", schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		// All three are placed, but part-2 awaits its approval: it does
		// not count yet, and the two approved ones stay held with it.
		Eventually(func() string {
			wp, err := getWaitingPod(ns, "part-0")
			if err != nil {
				return ""
			}
			return wp.Status.Message
		}).Should(Equal("Coscheduling: 2/3 members assigned, 1 more held by other Permit plugins"))
		Consistently(func() int { return boundMembers(ns)["part"] }, "2s").Should(BeZero())
		Expect(kubectlOK("approve", "podgroup/part", "-n", ns)).To(ContainSubstring("waitingpod/part-2 approved (pod UID "))
		Eventually(func() int { return boundMembers(ns)["part"] }).Should(Equal(3))
		Expect(bindSpread(ns, "part")).To(BeNumerically("<", 900*time.Millisecond), "members of part were not bound together")
	})

	It("binds no member of a gang whose last member is rejected after the others were approved", func() {
		ns := gangNamespace()
		nodes("gang-reject", 3, "4", "8Gi")
		podGroup(ns, "vetoed", 3, nil)
		for i := range 3 {
			createPod(member(ns, "vetoed", i, "approved-gangs", "gang-reject", "1"))
		}
		for i := range 3 {
			Eventually(waitingCondition(ns, fmt.Sprintf("vetoed-%d", i), schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision))
		}
		kubectlOK("approve", "waitingpod/vetoed-0", "-n", ns, "--reason", "reviewed")
		kubectlOK("approve", "waitingpod/vetoed-1", "-n", ns, "--reason", "reviewed")
		Consistently(func() map[string]int { return boundMembers(ns) }, "2s").Should(BeEmpty())
		kubectlOK("reject", "waitingpod/vetoed-2", "-n", ns, "--reason", "not this one")
		// The rejection takes the approved members back too.
		for i := range 2 {
			Eventually(eventNotes("Pod", ns, fmt.Sprintf("vetoed-%d", i), "FailedScheduling")).Should(ContainElement(ContainSubstring("rejection in Unreserve")))
		}
		Consistently(func() map[string]int { return boundMembers(ns) }, "3s").Should(BeEmpty())
	})

	It("holds each GPU member's devices, shown on its WaitingPod, and gives back every one when a member is rejected", func() {
		ns := gangNamespace()
		nodes("gang-gpu", 1, "4", "8Gi")
		const class = "gang-gpu.example.com"
		gpuNode(class, "gang-gpu-0")
		// Two members of two GPUs each take all four of the node.
		podGroup(ns, "gpus", 2, nil)
		for i := range 2 {
			createPod(gpuMember(ns, "gpus", i, "approved-gangs", "gang-gpu", class))
		}
		// Each member holds two, and no device is held for both.
		distinctFourGPUs := WithTransform(func(held map[string][]string) []string {
			var all []string
			for _, devices := range held {
				if len(devices) != 2 {
					return nil
				}
				all = append(all, devices...)
			}
			return all
		}, ConsistOf("gang-gpu-0/gpu-0", "gang-gpu-0/gpu-1", "gang-gpu-0/gpu-2", "gang-gpu-0/gpu-3"))
		Eventually(func() map[string][]string { return heldDevices(ns, "gpus-0", "gpus-1") }).Should(distinctFourGPUs)
		// Held, nothing is written to the claims.
		for i := range 2 {
			devices, pods := allocatedDevices(ns, fmt.Sprintf("gpus-%d-gpus", i))
			Expect(devices).To(BeEmpty())
			Expect(pods).To(BeEmpty())
		}

		kubectlOK("reject", "waitingpod/gpus-1", "-n", ns, "--reason", "not these GPUs")
		Eventually(eventNotes("Pod", ns, "gpus-0", "FailedScheduling")).Should(ContainElement(ContainSubstring("rejection in Unreserve")))
		// Taken back, the rejection lets both members be held again only
		// if every device of the first hold was given back: together they
		// need all four.
		kubectlOK("reject", "--undo", "waitingpod/gpus-1", "-n", ns)
		var held map[string][]string
		Eventually(func() map[string][]string { held = heldDevices(ns, "gpus-0", "gpus-1"); return held }).Should(distinctFourGPUs)
		Expect(kubectlOK("approve", "podgroup/gpus", "-n", ns)).To(ContainSubstring("podgroup/gpus: 2 of 2 members approved"))
		Eventually(func() map[string]int { return boundMembers(ns) }).Should(Equal(map[string]int{"gpus": 2}))
		// Bound, each claim has the devices its WaitingPod showed.
		for i := range 2 {
			pod := fmt.Sprintf("gpus-%d", i)
			devices, pods := allocatedDevices(ns, pod+"-gpus")
			Expect(devices).To(ConsistOf(held[pod]))
			Expect(pods).To(Equal([]string{pod}))
		}
	})

	It("with the gpu-gangs sample, gives the devices of a gang that cannot complete to others instead of holding them again", func() {
		// The sample as shipped, under a name of this test's.
		sample, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "gpu-gangs.yaml"))
		Expect(err).NotTo(HaveOccurred())
		const profile = "sample-gpu-gangs"
		apply(profile, strings.Replace(string(sample), "name: gpu-gangs\n", "name: "+profile+"\n", 1))
		serving(profile)
		DeferCleanup(func() { kubectlOK("delete", "schedulingprofile", profile) })

		ns := gangNamespace()
		nodes("gang-sample", 1, "4", "8Gi")
		const class = "gang-sample.example.com"
		gpuNode(class, "gang-sample-0")
		podGroup(ns, "vetoed", 2, nil)
		for i := range 2 {
			createPod(gpuMember(ns, "vetoed", i, profile, "gang-sample", class))
		}
		Eventually(func() map[string][]string { return heldDevices(ns, "vetoed-0", "vetoed-1") }).Should(HaveLen(2))

		// A rejected member keeps the gang from ever completing. Its
		// sibling, held again after the rejection, is released as soon
		// as the rejected one fails to be placed, and the gang backs off.
		kubectlOK("reject", "waitingpod/vetoed-1", "-n", ns, "--reason", "not these GPUs")
		Eventually(eventNotes("Pod", ns, "vetoed-0", "FailedScheduling")).Should(ContainElement(ContainSubstring("optimistic rejection in PostFilter")))

		// Meanwhile all four GPUs are free for a pod that needs them.
		other := namespace()
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "all-gpus"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpus",
				Exactly: &resourceapi.ExactDeviceRequest{
					DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4,
				},
			}}}},
		}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())
		pod := poolPod(other, "trainer", "gangs", "gang-sample", "1", "")
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
		Expect(boundNode(createPod(pod))).To(Equal("gang-sample-0"))
	})

	It("does not count a pod that carries the label but was bound elsewhere", func() {
		ns := gangNamespace()
		nodes("gang-forged", 2, "4", "8Gi")
		podGroup(ns, "solo", 2, nil)
		// A pod created on a node with the group's label, as a pod author
		// may write it: no scheduler of this operator placed it.
		forged := poolPod(ns, "forged", "other-scheduler", "gang-forged", "1", "")
		forged.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "solo"}
		forged.Spec.NodeName = "gang-forged-0"
		createPod(forged)
		createPod(member(ns, "solo", 0, "holding-gangs", "gang-forged", "1"))
		Eventually(func() string {
			wp, err := getWaitingPod(ns, "solo-0")
			if err != nil {
				return ""
			}
			return wp.Status.Message
		}).Should(Equal("Coscheduling: 1/2 members assigned"))
		Consistently(func() string {
			return scheduledPodNode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo-0"}})
		}, "2s").Should(BeEmpty())
		// A real second member completes the gang.
		createPod(member(ns, "solo", 1, "holding-gangs", "gang-forged", "1"))
		Eventually(func() map[string]int { return boundMembers(ns) }).Should(Equal(map[string]int{"solo": 3}))
	})

	It("never lets a pod of another profile ride a gang's approval by its label", func() {
		apply("riders", approvalProfile("riders", "10m"))
		serving("riders")
		ns := gangNamespace()
		nodes("gang-ride", 3, "4", "8Gi")
		podGroup(ns, "crew", 2, nil)
		var crew []*corev1.Pod
		for i := range 2 {
			crew = append(crew, createPod(member(ns, "crew", i, "approved-gangs", "gang-ride", "1")))
		}
		// Its author labels a pod of a ManualApproval-only profile into
		// the crew.
		rider := poolPod(ns, "rider", "riders", "gang-ride", "1", "")
		rider.Labels = map[string]string{podgroupv1alpha1.PodGroupLabel: "crew"}
		createPod(rider)
		for _, name := range []string{"crew-0", "crew-1", "rider"} {
			Eventually(waitingCondition(ns, name, schedulingv1alpha1.WaitingPodDecidable)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonAwaitingDecision), name)
		}
		for _, pod := range crew {
			Eventually(func() string { wp, _ := getWaitingPod(ns, pod.Name); return wp.Status.PodGroup }).Should(Equal("crew"), pod.Name)
		}
		wp, err := getWaitingPod(ns, "rider")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Status.Profile).To(Equal("riders"))
		Expect(wp.Status.PodGroup).To(BeEmpty(), "a pod no instance running Coscheduling holds is shown in a gang")

		r, err := kubectl.Run("approve", "podgroup/crew", "-n", ns, "--reason", "crew reviewed")
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), r.Stderr)
		for _, pod := range crew {
			Expect(r.Stdout).To(ContainSubstring(fmt.Sprintf("waitingpod/%s approved (pod UID %s, profile approved-gangs)\n", pod.Name, pod.UID)))
		}
		Expect(r.Stdout).To(HaveSuffix("podgroup/crew: 2 of 2 members approved; Coscheduling releases them once the group is complete\n"))
		Expect(r.Stderr).To(ContainSubstring(`Warning: waitingpod/rider skipped: its profile "riders" does not run Coscheduling`))
		for _, pod := range crew {
			boundNode(pod)
		}
		Consistently(func() string { return scheduledPodNode(rider) }, "2s").Should(BeEmpty())
		wp, err = getWaitingPod(ns, "rider")
		Expect(err).NotTo(HaveOccurred())
		Expect(wp.Spec.Decision).To(BeEmpty())
	})

	It("releases a gang that times out and says which members were missing", func() {
		ns := gangNamespace()
		nodes("gang-late", 2, "4", "8Gi")
		podGroup(ns, "late", 3, ptr.To[int32](2))
		for i := range 2 {
			createPod(member(ns, "late", i, "holding-gangs", "gang-late", "1"))
		}
		last := member(ns, "late", 2, "holding-gangs", "gang-late", "1")
		last.Spec.NodeSelector["gang"] = "never"
		createPod(last)
		Eventually(func(g Gomega) {
			pg := getPodGroup(ns, "late")
			g.Expect(pg).NotTo(BeNil())
			c := meta.FindStatusCondition(pg.Status.Conditions, podgroupv1alpha1.PodGroupScheduled)
			g.Expect(c).To(haveCondition(metav1.ConditionFalse, podgroupv1alpha1.ReasonTimeout))
			g.Expect(c.Message).To(ContainSubstring("missing late-2"))
		}).Should(Succeed())
		Eventually(eventNotes("PodGroup", ns, "late", podgroupv1alpha1.ReasonTimeout)).Should(ContainElement(ContainSubstring("missing late-2")))
		Eventually(eventNotes("Pod", ns, "late-0", "FailedScheduling")).Should(ContainElement(ContainSubstring("rejected due to timeout after waiting 2s at plugin Coscheduling")))
		Expect(boundMembers(ns)).To(BeEmpty())
	})

	It("never admits part of a gang when members time out as the last one arrives", func() {
		// Gangs of 4 with one-second waits, whose last member gets a node
		// at about the moment the others' waits end: the timeouts race the
		// last member's Permit. Every gang completes in the end; admitted
		// together, its members are bound within moments of each other,
		// whereas a member admitted alone would be bound at least a
		// backoff (1 s) before its siblings came back.
		ns := gangNamespace()
		offsets := []time.Duration{800, 900, 1000, 1100, 1200}
		for g := range offsets {
			group := fmt.Sprintf("race-%d", g)
			nodes(group, 4, "4", "8Gi")
			podGroup(ns, group, 4, ptr.To[int32](1))
			for i := range 3 {
				createPod(member(ns, group, i, "holding-gangs", group, "3"))
			}
			last := member(ns, group, 3, "holding-gangs", group, "3")
			last.Spec.NodeSelector["gang"] = group
			createPod(last)
		}
		var wg sync.WaitGroup
		for g, offset := range offsets {
			group := fmt.Sprintf("race-%d", g)
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				Eventually(func() int { return len(heldNodes(ns, group)) }).Should(Equal(3))
				time.Sleep(offset * time.Millisecond)
				var free string
				for i := range 4 {
					if name := fmt.Sprintf("%s-%d", group, i); !slices.Contains(heldNodes(ns, group), name) {
						free = name
					}
				}
				kubectlOK("label", "node", free, "gang="+group)
			}()
		}
		wg.Wait()
		Eventually(func() map[string]int { return boundMembers(ns) }, "60s").Should(HaveLen(len(offsets)))
		Eventually(func() map[string]int { return boundMembers(ns) }, "60s").Should(HaveEach(4))
		for g := range offsets {
			group := fmt.Sprintf("race-%d", g)
			Expect(bindSpread(ns, group)).To(BeNumerically("<", 900*time.Millisecond), "members of %s were not bound together", group)
		}
	})

	It("schedules 20 gangs of 8 in parallel with no partial gang", func() {
		ns := gangNamespace()
		// Room for 15 of the 20 gangs: every gang that completes takes its
		// eight slots for good, and a partial gang would stay partial.
		nodes("gang-many", 30, "4", "8Gi")
		var wg sync.WaitGroup
		for g := range 20 {
			group := fmt.Sprintf("g%02d", g)
			podGroup(ns, group, 8, nil)
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := range 8 {
					Expect(k8sClient.Create(ctx, member(ns, group, i, "gangs", "gang-many", "1"))).To(Succeed())
				}
			}()
		}
		wg.Wait()
		Eventually(func() int {
			full := 0
			for _, n := range boundMembers(ns) {
				if n == 8 {
					full++
				}
			}
			return full
		}, "120s").Should(Equal(15))
		Consistently(noPartialGang(ns, 8), "3s").Should(Succeed())
		// No kubelet runs the pods here: bound is as far as they get.
		Expect(kubectlOK("get", "pg", "-n", ns)).To(MatchRegexp(`g\d\d\s+Scheduling\s+8\s+8\s`))
	})
})
