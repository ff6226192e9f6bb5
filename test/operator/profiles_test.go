package operator_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// largeProfile is a valid profile whose spec is about size bytes of JSON:
// NodeAffinity's addedAffinity keeps pods off a long list of zones.
func largeProfile(name string, size int) *schedulingv1alpha1.SchedulingProfile {
	var values []string
	for n := 0; n < size; n += len(`"zone-0000000",`) {
		values = append(values, fmt.Sprintf("zone-%07d", len(values)))
	}
	args, err := json.Marshal(map[string]any{
		"addedAffinity": corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpNotIn, Values: values,
			}}}},
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	return &schedulingv1alpha1.SchedulingProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedulingv1alpha1.SchedulingProfileSpec{
			PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeAffinity", Args: runtime.RawExtension{Raw: args}}},
		},
	}
}

// reconcileErrors is how many reconciles of profiles have failed so far,
// in this process.
func reconcileErrors() float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "schedulingprofile" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

func profileManifest(name, spec string) string {
	return fmt.Sprintf(`apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: %s
spec:
%s
`, name, indent(spec, 2))
}

// fitScoring is a profile whose only Score plugin is NodeResourcesFit with
// the given strategy, so placements show the strategy alone.
func fitScoring(strategy string) string {
	return fmt.Sprintf(`plugins:
  score:
    disabled:
    - name: "*"
    enabled:
    - name: NodeResourcesFit
pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: %s`, strategy)
}

var _ = Describe("SchedulingProfile controller", func() {
	It("makes an applied profile serve its schedulerName and reports what runs", func() {
		nodes("basic", 2, "4", "8Gi")
		apply("basic", profileManifest("basic", "{}"))
		serving("basic")

		sp := getProfile("basic")
		Expect(sp.Status.SchedulerName).To(Equal("basic"))
		Expect(sp.Status.Plugins).NotTo(BeNil())
		Expect(sp.Status.Plugins.QueueSort).To(Equal([]schedulingv1alpha1.ResolvedPlugin{{Name: "PrioritySort"}}))
		Expect(sp.Status.Plugins.Bind).To(Equal([]schedulingv1alpha1.ResolvedPlugin{{Name: "DefaultBinder"}}))
		Expect(sp.Status.OmittedDefaultPlugins).To(BeEmpty())

		ns := namespace()
		pod := createPod(poolPod(ns, "web", "basic", "basic", "500m", "512Mi"))
		Expect(boundNode(pod)).To(HavePrefix("basic-"))
	})

	It("allocates a pod's ResourceClaim on the node with the devices, writes it and binds the pod", func() {
		nodes("dra", 2, "4", "8Gi")
		apply("dra", profileManifest("dra", "{}"))
		serving("dra")

		ns := namespace()
		class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "gpu-"}}
		Expect(k8sClient.Create(ctx, class)).To(Succeed())
		// One device, on dra-1 only, in a pool of this spec's own.
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "dra-1-"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: "gpu.example.com", NodeName: ptr.To("dra-1"),
				Pool:    resourceapi.ResourcePool{Name: ns, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-0"}},
			},
		}
		Expect(k8sClient.Create(ctx, slice)).To(Succeed())
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name:    "gpu",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())

		pod := poolPod(ns, "gpu", "dra", "dra", "100m", "128Mi")
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		createPod(pod)
		Expect(boundNode(pod)).To(Equal("dra-1"))

		// PreBind wrote the allocation and the reservation before binding.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		Expect(claim.Status.Allocation).NotTo(BeNil())
		Expect(claim.Status.Allocation.Devices.Results).To(ConsistOf(HaveField("Device", "gpu-0")))
		Expect(claim.Status.ReservedFor).To(ConsistOf(HaveField("UID", pod.UID)))
		Expect(claim.Finalizers).To(ContainElement(resourceapi.Finalizer))
	})

	It("switches a live profile from spreading to packing without a restart", func() {
		nodes("packing", 3, "4", "8Gi")
		apply("packing", profileManifest("packing", fitScoring("LeastAllocated")))
		serving("packing")
		ns := namespace()

		spread := map[string]bool{}
		for i := range 3 {
			spread[boundNode(createPod(poolPod(ns, fmt.Sprintf("spread-%d", i), "packing", "packing", "1", "1Gi")))] = true
		}
		Expect(spread).To(HaveLen(3), "LeastAllocated puts each pod on the emptiest node")

		apply("packing", profileManifest("packing", fitScoring("MostAllocated")))
		serving("packing")
		Expect(getProfile("packing").Status.ServingGeneration).To(BeEquivalentTo(2))

		packed := map[string]bool{}
		for i := range 3 {
			packed[boundNode(createPod(poolPod(ns, fmt.Sprintf("packed-%d", i), "packing", "packing", "1", "1Gi")))] = true
		}
		Expect(packed).To(HaveLen(1), "MostAllocated puts each pod on the fullest node that fits")
	})

	It("keeps the last valid instance serving when an update is invalid, and recovers", func() {
		nodes("guarded", 1, "4", "8Gi")
		apply("guarded", profileManifest("guarded", "{}"))
		serving("guarded")
		before := op.Profiles.Get("guarded")

		apply("guarded", profileManifest("guarded", `plugins:
  filter:
    enabled:
    - name: NoSuchPlugin`))
		Eventually(profileCondition("guarded", schedulingv1alpha1.ProfileAccepted)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring(`Filter plugin "NoSuchPlugin": no such plugin is registered`)),
		))
		Expect(profileCondition("guarded", schedulingv1alpha1.ProfileActive)()).To(And(
			haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing),
			HaveField("Message", ContainSubstring("Generation 1, the last valid one, keeps serving")),
		))
		Expect(getProfile("guarded").Status.ServingGeneration).To(BeEquivalentTo(1))
		Expect(op.Profiles.Get("guarded")).To(BeIdenticalTo(before))
		Eventually(eventNotes("SchedulingProfile", "", "guarded", schedulingv1alpha1.ReasonInvalidSpec)).Should(
			ContainElement(ContainSubstring("NoSuchPlugin")))

		ns := namespace()
		Expect(boundNode(createPod(poolPod(ns, "still-served", "guarded", "guarded", "100m", "128Mi")))).To(Equal("guarded-0"))

		apply("guarded", profileManifest("guarded", `pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: Sometimes`))
		Eventually(profileCondition("guarded", schedulingv1alpha1.ProfileAccepted)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("NodeResourcesFit")),
		))

		apply("guarded", profileManifest("guarded", "{}"))
		serving("guarded")
		Expect(getProfile("guarded").Status.ServingGeneration).To(BeEquivalentTo(4))
	})

	It("keeps the last valid generation serving across an operator restart", func() {
		nodes("durable", 1, "4", "8Gi")
		apply("durable", profileManifest("durable", fitScoring("MostAllocated")))
		serving("durable")
		apply("durable", profileManifest("durable", `plugins:
  queueSort:
    disabled:
    - name: "*"`))
		Eventually(profileCondition("durable", schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec))
		const stalled = "; generation 1, the last valid one, keeps serving schedulerName durable"
		Expect(profileView("durable", "")()).To(And(HaveField("Kstatus", status.FailedStatus), HaveField("KstatusMessage", HaveSuffix(stalled))))

		stopOperator()
		startOperator()
		Eventually(func() bool { return op.Profiles.Get("durable") != nil }).Should(BeTrue())
		// Restored from its revision, with the same status: still failed.
		Expect(profileView("durable", "")()).To(And(HaveField("Kstatus", status.FailedStatus), HaveField("KstatusMessage", HaveSuffix(stalled))))
		sp := getProfile("durable")
		Expect(sp.Status.ServingGeneration).To(BeEquivalentTo(1))
		Expect(profileCondition("durable", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
		Expect(sp.Status.Plugins.Score).To(Equal([]schedulingv1alpha1.ResolvedPlugin{{Name: "NodeResourcesFit", Weight: 1}}))
		ns := namespace()
		Expect(boundNode(createPod(poolPod(ns, "after-restart", "durable", "durable", "100m", "128Mi")))).To(Equal("durable-0"))
	})

	It("gives a contested schedulerName to the older profile, and to the newer when the older goes", func() {
		nodes("contested", 1, "4", "8Gi")
		apply("first", profileManifest("first", "schedulerName: contested"))
		serving("first")
		apply("second", profileManifest("second", "schedulerName: contested"))
		Eventually(profileCondition("second", schedulingv1alpha1.ProfileAccepted)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict),
			HaveField("Message", Equal("schedulerName contested is claimed by the older SchedulingProfile first")),
		))
		Expect(profileCondition("second", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict))

		kubectlOK("delete", "schedulingprofile", "first")
		serving("second")
		ns := namespace()
		Expect(boundNode(createPod(poolPod(ns, "after-takeover", "contested", "contested", "100m", "128Mi")))).To(Equal("contested-0"))
	})

	It("never serves a reserved schedulerName", func() {
		apply("impostor", profileManifest("impostor", "schedulerName: default-scheduler"))
		Eventually(profileCondition("impostor", schedulingv1alpha1.ProfileAccepted)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonReservedSchedulerName),
			HaveField("Message", ContainSubstring("reserved for another scheduler")),
		))
		Expect(op.Profiles.Get(corev1.DefaultSchedulerName)).To(BeNil())
	})

	It("treats re-applying the same manifest as a no-op", func() {
		file := apply("gitops", profileManifest("gitops", fitScoring("LeastAllocated")), "--server-side")
		serving("gitops")
		before := getProfile("gitops")
		instance := op.Profiles.Get("gitops")

		kubectlOK("apply", "--server-side", "-f", file)
		kubectlOK("apply", "--server-side", "-f", file)
		Consistently(func() string { return getProfile("gitops").ResourceVersion }, "2s").Should(Equal(before.ResourceVersion))
		Expect(op.Profiles.Get("gitops")).To(BeIdenticalTo(instance))

		r, err := kubectl.Run("diff", "--server-side", "-f", file)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), "kubectl diff shows a difference:\n%s%s", r.Stdout, r.Stderr)
	})

	It("returns pods waiting in a deleted profile to pending, saying the profile is gone", func() {
		nodes("doomed", 1, "4", "8Gi")
		apply("doomed", profileManifest("doomed", `plugins:
  multiPoint:
    enabled:
    - name: ManualApproval`))
		serving("doomed")
		ns := namespace()
		pod := createPod(poolPod(ns, "held", "doomed", "doomed", "100m", "128Mi"))
		Eventually(waitingCondition(ns, "held", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))

		kubectlOK("delete", "schedulingprofile", "doomed")
		Eventually(scheduledCondition(pod)).Should(And(
			Not(BeNil()),
			HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", ContainSubstring("SchedulingProfile doomed was deleted")),
		))
		Eventually(eventNotes("Pod", ns, "held", "FailedScheduling")).Should(ContainElement(ContainSubstring("SchedulingProfile doomed was deleted")))
		p := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
		Expect(p.Spec.NodeName).To(BeEmpty())
		Expect(op.Profiles.Get("doomed")).To(BeNil())
	})

	It("rejects on deletion the pods held by an earlier generation of the profile too", func() {
		nodes("renewed", 1, "4", "8Gi")
		manualApproval := func(window string) string {
			return profileManifest("renewed", fmt.Sprintf(`plugins:
  multiPoint:
    enabled:
    - name: ManualApproval
pluginConfig:
- name: ManualApproval
  args:
    approvalWindow: %s`, window))
		}
		apply("renewed", manualApproval("10m"))
		serving("renewed")
		ns := namespace()
		pod := createPod(poolPod(ns, "held-over", "renewed", "renewed", "100m", "128Mi"))
		Eventually(waitingCondition(ns, "held-over", schedulingv1alpha1.WaitingPodWaiting)).Should(haveCondition(metav1.ConditionTrue, "Held"))

		// A spec change retires generation 1; the pod stays held there.
		apply("renewed", manualApproval("20m"))
		serving("renewed")
		Expect(getProfile("renewed").Status.ServingGeneration).To(BeEquivalentTo(2))
		held, profile := op.Profiles.GetWaitingPod(pod.UID)
		Expect(held).NotTo(BeNil())
		Expect(profile).To(Equal("renewed"))
		Expect(op.Profiles.Get("renewed").GetWaitingPod(pod.UID)).To(BeNil(), "the pod must be held by the retired generation, not the serving one")

		kubectlOK("delete", "schedulingprofile", "renewed")
		Eventually(scheduledCondition(pod)).Should(And(
			Not(BeNil()),
			HaveField("Status", corev1.ConditionFalse),
			HaveField("Message", ContainSubstring("SchedulingProfile renewed was deleted")),
		))
		Eventually(func() bool { wp, _ := op.Profiles.GetWaitingPod(pod.UID); return wp == nil }).Should(BeTrue())
		Eventually(op.Profiles.Retiring).Should(BeZero(), "the rejected pod's binding cycle releases the retired instance")

		// No generation of the deleted profile may bind it any more:
		// kubectl says a decision would release nothing, and one recorded
		// anyway (--ahead) binds nothing.
		r, err := kubectl.Run("approve", "pod/held-over", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(`is for scheduler "renewed", which no SchedulingProfile serves`))
		kubectlOK("approve", "pod/held-over", "-n", ns, "--ahead")
		Consistently(func() string { return scheduledPodNode(pod) }, "3s").Should(BeEmpty())
	})

	It("serves a profile of nearly 1 MB, its last valid spec kept in a ControllerRevision, across a restart", func() {
		nodes("bulky", 1, "4", "8Gi")
		errorsBefore := reconcileErrors()
		sp := largeProfile("bulky", 900_000)
		Expect(k8sClient.Create(ctx, sp)).To(Succeed())
		serving("bulky")

		ref := getProfile("bulky").Status.ServingRevision
		Expect(ref).NotTo(BeNil())
		rev := &appsv1.ControllerRevision{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, rev)).To(Succeed())
		Expect(len(rev.Data.Raw)).To(BeNumerically(">", 900_000))
		Expect(metav1.GetControllerOf(rev)).To(HaveField("UID", sp.UID))
		var data any
		Expect(json.Unmarshal(rev.Data.Raw, &data)).To(Succeed())
		canonical, err := json.Marshal(data)
		Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(canonical)
		Expect(ref.Hash).To(Equal("sha256:"+hex.EncodeToString(sum[:])), "the hash is of the data in canonical JSON")

		// An invalid update, then a restart: the large last valid spec is
		// read back from its revision and serves again.
		sp = getProfile("bulky")
		sp.Spec.Plugins = &schedulingv1alpha1.Plugins{Filter: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NoSuchPlugin"}}}}
		Expect(k8sClient.Update(ctx, sp)).To(Succeed())
		Eventually(profileCondition("bulky", schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec))
		Expect(reconcileErrors()).To(Equal(errorsBefore))
		stopOperator()
		// A reconcile the stop cancels (the status write of the refused
		// generation brings one) counts as an error; only the new run's
		// count is about the large spec.
		errorsBefore = reconcileErrors()
		startOperator()
		Eventually(func() bool { return op.Profiles.Get("bulky") != nil }).Should(BeTrue())
		Expect(getProfile("bulky").Status.ServingGeneration).To(BeEquivalentTo(1))
		Expect(profileCondition("bulky", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
		ns := namespace()
		Expect(boundNode(createPod(poolPod(ns, "large-profile", "bulky", "bulky", "100m", "128Mi")))).To(Equal("bulky-0"))
		Expect(reconcileErrors()).To(Equal(errorsBefore))
	})

	It("refuses a spec over the size limit with a clear reason, without retrying", func() {
		errorsBefore := reconcileErrors()
		Expect(k8sClient.Create(ctx, largeProfile("huge", profilebuild.MaxSpecBytes+50_000))).To(Succeed())
		Eventually(profileCondition("huge", schedulingv1alpha1.ProfileAccepted)).Should(And(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonSpecTooLarge),
			HaveField("Message", ContainSubstring(fmt.Sprintf("more than the %d bytes a profile spec may have", profilebuild.MaxSpecBytes))),
		))
		Expect(profileCondition("huge", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing))
		Eventually(eventNotes("SchedulingProfile", "", "huge", schedulingv1alpha1.ReasonSpecTooLarge)).ShouldNot(BeEmpty())
		Expect(op.Profiles.Get("huge")).To(BeNil())
		version := getProfile("huge").ResourceVersion
		Consistently(func() string { return getProfile("huge").ResourceVersion }, "2s").Should(Equal(version), "status is not rewritten")
		Expect(reconcileErrors()).To(Equal(errorsBefore))
	})

	AfterEach(func() {
		// Profiles are cluster-scoped; leave none behind for later specs.
		var list schedulingv1alpha1.SchedulingProfileList
		Expect(k8sClient.List(ctx, &list)).To(Succeed())
		for i := range list.Items {
			err := k8sClient.Delete(ctx, &list.Items[i])
			Expect(client.IgnoreNotFound(err)).To(Succeed())
		}
		Eventually(func() int {
			Expect(k8sClient.List(ctx, &list)).To(Succeed())
			return len(list.Items)
		}).Should(BeZero())
	})
})
