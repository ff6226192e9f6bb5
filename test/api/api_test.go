package api_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// pastedProfile is a KubeSchedulerProfile as it stands in a kube-scheduler
// configuration file, with non-default args for two upstream plugins.
const pastedProfile = `
schedulerName: bin-packing
percentageOfNodesToScore: 40
plugins:
  multiPoint:
    enabled:
    - name: NodeResourcesFit
      weight: 2
  preFilter:
    disabled:
    - name: NodePorts
  score:
    disabled:
    - name: "*"
    enabled:
    - name: NodeResourcesFit
      weight: 5
    - name: PodTopologySpread
      weight: 2
pluginConfig:
- name: NodeResourcesFit
  args:
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: NodeResourcesFitArgs
    ignoredResources: ["example.com/foo"]
    ignoredResourceGroups: ["example.org"]
    scoringStrategy:
      type: MostAllocated
      resources:
      - name: cpu
        weight: 1
      - name: memory
        weight: 3
- name: PodTopologySpread
  args:
    defaultingType: List
    defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
`

var profileGVK = schedulingv1alpha1.GroupVersion.WithKind("SchedulingProfile")

func profileFromSpec(name, spec string) *unstructured.Unstructured {
	var specMap map[string]any
	Expect(yaml.Unmarshal([]byte(spec), &specMap)).To(Succeed())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(profileGVK)
	u.SetName(name)
	Expect(unstructured.SetNestedField(u.Object, specMap, "spec")).To(Succeed())
	return u
}

func expectInvalid(err error, message string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	Expect(err.Error()).To(ContainSubstring(message))
}

var _ = Describe("The CRDs", func() {
	It("serve SchedulingProfile cluster-scoped and WaitingPod namespaced, each with a status subresource", func() {
		list, err := disco.ServerResourcesForGroupVersion(schedulingv1alpha1.GroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = r.Namespaced
		}
		Expect(served).To(HaveKeyWithValue("schedulingprofiles", false))
		Expect(served).To(HaveKeyWithValue("waitingpods", true))
		Expect(served).To(HaveKey("schedulingprofiles/status"))
		Expect(served).To(HaveKey("waitingpods/status"))
	})
})

var _ = Describe("SchedulingProfile", func() {
	ctx := context.Background()

	It("accepts a pasted upstream KubeSchedulerProfile and reads it back identical", func() {
		// The text really is an upstream profile: it decodes strictly into
		// the upstream type.
		var upstream configv1.KubeSchedulerProfile
		Expect(yaml.UnmarshalStrict([]byte(pastedProfile), &upstream)).To(Succeed())

		obj := profileFromSpec("pasted", pastedProfile)
		sent := obj.DeepCopy()
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, obj)).To(Succeed()) })

		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(profileGVK)
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "pasted"}, got)).To(Succeed())
		gotSpec, err := json.Marshal(got.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		sentSpec, err := json.Marshal(sent.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		Expect(gotSpec).To(MatchJSON(sentSpec))

		// And through the project's Go type the spec still means the same
		// upstream profile.
		typed := &schedulingv1alpha1.SchedulingProfile{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "pasted"}, typed)).To(Succeed())
		data, err := json.Marshal(typed.Spec)
		Expect(err).NotTo(HaveOccurred())
		var back configv1.KubeSchedulerProfile
		Expect(json.Unmarshal(data, &back)).To(Succeed())
		Expect(normalizeArgs(back)).To(Equal(normalizeArgs(upstream)))
	})

	It("refuses a negative plugin weight", func() {
		obj := profileFromSpec("negative-weight", `
plugins:
  score:
    enabled:
    - name: NodeResourcesFit
      weight: -1
`)
		expectInvalid(k8sClient.Create(ctx, obj), "spec.plugins.score.enabled[0].weight: Invalid value: -1: spec.plugins.score.enabled[0].weight in body should be greater than or equal to 0")
	})

	It("refuses a schedulerName that is not a DNS-1123 label", func() {
		obj := profileFromSpec("bad-scheduler-name", `schedulerName: Bin_Packing`)
		expectInvalid(k8sClient.Create(ctx, obj), `spec.schedulerName: Invalid value: "Bin_Packing": spec.schedulerName in body should match`)
	})

	It("refuses a name that cannot stand in for an unset schedulerName", func() {
		obj := profileFromSpec("team.example", `percentageOfNodesToScore: 50`)
		expectInvalid(k8sClient.Create(ctx, obj), "metadata.name is used as the schedulerName when spec.schedulerName is unset, so it must then be a DNS-1123 label")

		obj = profileFromSpec("team.example", `schedulerName: team-example`)
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
	})

	It("refuses two configs for one plugin", func() {
		obj := profileFromSpec("duplicate-config", `
pluginConfig:
- name: NodeResourcesFit
  args: {}
- name: NodeResourcesFit
  args: {}
`)
		expectInvalid(k8sClient.Create(ctx, obj), `spec.pluginConfig[1]: Duplicate value: {"name":"NodeResourcesFit"}`)
	})

	It("refuses a percentageOfNodesToScore above 100", func() {
		obj := profileFromSpec("too-many-percent", `percentageOfNodesToScore: 101`)
		expectInvalid(k8sClient.Create(ctx, obj), "spec.percentageOfNodesToScore in body should be less than or equal to 100")
	})
})

var _ = Describe("WaitingPod", func() {
	ctx := context.Background()
	const ns = "default"

	newWaitingPod := func(name string, spec schedulingv1alpha1.WaitingPodSpec) *schedulingv1alpha1.WaitingPod {
		return &schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       spec,
		}
	}

	It("accepts Approve and Reject and refuses any other decision", func() {
		for _, d := range []schedulingv1alpha1.Decision{schedulingv1alpha1.DecisionApprove, schedulingv1alpha1.DecisionReject} {
			wp := newWaitingPod("decided-"+string(d), schedulingv1alpha1.WaitingPodSpec{PodUID: "0b7e3c1a-uid", Decision: d})
			wp.Name = "decided-" + map[schedulingv1alpha1.Decision]string{"Approve": "a", "Reject": "r"}[d]
			Expect(k8sClient.Create(ctx, wp)).To(Succeed())
			Expect(k8sClient.Delete(ctx, wp)).To(Succeed())
		}
		wp := newWaitingPod("maybe", schedulingv1alpha1.WaitingPodSpec{PodUID: "0b7e3c1a-uid", Decision: "Maybe"})
		expectInvalid(k8sClient.Create(ctx, wp), `spec.decision: Unsupported value: "Maybe": supported values: "Approve", "Reject"`)
	})

	It("refuses a decision that does not name its pod's UID", func() {
		const msg = "a decision must name its pod: set podUID to the UID of the pod it is for"
		for _, d := range []schedulingv1alpha1.Decision{schedulingv1alpha1.DecisionApprove, schedulingv1alpha1.DecisionReject} {
			wp := newWaitingPod("unnamed", schedulingv1alpha1.WaitingPodSpec{Decision: d, DecidedBy: "alice"})
			expectInvalid(k8sClient.Create(ctx, wp), msg)
		}

		// Nor can a decision be added later to a WaitingPod that names no pod:
		// it would apply to whichever pod the scheduler holds under that name.
		wp := newWaitingPod("unnamed", schedulingv1alpha1.WaitingPodSpec{})
		Expect(k8sClient.Create(ctx, wp)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wp)).To(Succeed()) })
		wp.Status.PodUID = "0b7e3c1a-uid"
		Expect(k8sClient.Status().Update(ctx, wp)).To(Succeed())
		wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
		expectInvalid(k8sClient.Update(ctx, wp), msg)

		// Empty is no name either.
		raw := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": schedulingv1alpha1.GroupVersion.String(), "kind": "WaitingPod",
			"metadata": map[string]any{"namespace": ns, "name": "empty-uid"},
			"spec":     map[string]any{"podUID": "", "decision": "Approve"},
		}}
		expectInvalid(k8sClient.Create(ctx, raw), msg)
	})

	It("refuses to change a decision, its reason or its author once set", func() {
		wp := newWaitingPod("held", schedulingv1alpha1.WaitingPodSpec{PodUID: "0b7e3c1a-uid"})
		Expect(k8sClient.Create(ctx, wp)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wp)).To(Succeed()) })

		// Deciding an undecided pod is allowed.
		wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
		wp.Spec.Reason = "capacity reviewed"
		wp.Spec.DecidedBy = "alice"
		Expect(k8sClient.Update(ctx, wp)).To(Succeed())

		changed := wp.DeepCopy()
		changed.Spec.Decision = schedulingv1alpha1.DecisionReject
		expectInvalid(k8sClient.Update(ctx, changed), "decision cannot be changed once set")

		cleared := wp.DeepCopy()
		cleared.Spec.Decision = ""
		expectInvalid(k8sClient.Update(ctx, cleared), "decision cannot be changed once set")

		reworded := wp.DeepCopy()
		reworded.Spec.Reason = "changed my mind"
		expectInvalid(k8sClient.Update(ctx, reworded), "reason and decidedBy cannot be changed once a decision is set")

		reattributed := wp.DeepCopy()
		reattributed.Spec.DecidedBy = "mallory"
		expectInvalid(k8sClient.Update(ctx, reattributed), "reason and decidedBy cannot be changed once a decision is set")

		otherPod := wp.DeepCopy()
		otherPod.Spec.PodUID = "another-uid"
		expectInvalid(k8sClient.Update(ctx, otherPod), "podUID cannot be changed once set")

		// Nobody re-points a decision at a profile it was not made for.
		repinned := wp.DeepCopy()
		repinned.Spec.ProfileUID = "another-profile"
		expectInvalid(k8sClient.Update(ctx, repinned), "profileUID cannot be changed once set or once a decision is set")
	})

	It("keeps the profile a decision is pinned to", func() {
		wp := newWaitingPod("pinned", schedulingv1alpha1.WaitingPodSpec{PodUID: "pod-uid"})
		Expect(k8sClient.Create(ctx, wp)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wp)).To(Succeed()) })

		// Set with the decision, as kubectl approve does.
		wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
		wp.Spec.DecidedBy = "alice"
		wp.Spec.ProfileUID = "profile-uid"
		Expect(k8sClient.Update(ctx, wp)).To(Succeed())

		unpinned := wp.DeepCopy()
		unpinned.Spec.ProfileUID = ""
		expectInvalid(k8sClient.Update(ctx, unpinned), "profileUID cannot be changed once set or once a decision is set")
		repinned := wp.DeepCopy()
		repinned.Spec.ProfileUID = "new-profile-uid"
		expectInvalid(k8sClient.Update(ctx, repinned), "profileUID cannot be changed once set or once a decision is set")
	})

	It("records the scheduler's observations in the status subresource only", func() {
		wp := newWaitingPod("observed", schedulingv1alpha1.WaitingPodSpec{})
		Expect(k8sClient.Create(ctx, wp)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wp)).To(Succeed()) })

		deadline := metav1.NewTime(metav1.Now().Add(10 * 60e9).Truncate(1e9))
		wp.Status = schedulingv1alpha1.WaitingPodStatus{
			PodUID:         "uid-1",
			Profile:        "approvals",
			NodeName:       "node-1",
			PendingPlugins: []schedulingv1alpha1.PendingPlugin{{Name: "ManualApproval", Deadline: &deadline}},
			Expires:        &deadline,
		}
		Expect(k8sClient.Status().Update(ctx, wp)).To(Succeed())

		got := &schedulingv1alpha1.WaitingPod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
		Expect(got.Status.NodeName).To(Equal("node-1"))
		Expect(got.Status.PendingPlugins).To(HaveLen(1))
		Expect(got.Status.PendingPlugins[0].Deadline.Equal(&deadline)).To(BeTrue())

		// A spec update cannot write status.
		got.Status.NodeName = "node-2"
		got.Spec.Reason = "unrelated"
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
		Expect(got.Status.NodeName).To(Equal("node-1"))
	})

	It("is garbage-collectable: it takes an owner reference to its Pod", func() {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app"}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, pod)).To(Succeed()) })
		wp := newWaitingPod("owner", schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID})
		wp.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
		}}
		Expect(k8sClient.Create(ctx, wp)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, wp)).To(Succeed()) })
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(schema.GroupVersionKind{Group: schedulingv1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "WaitingPod"})
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
		Expect(got.GetOwnerReferences()).To(HaveLen(1))
	})
})

// normalizeArgs decodes each plugin's raw args so two profiles compare by
// meaning rather than by JSON byte layout.
func normalizeArgs(p configv1.KubeSchedulerProfile) map[string]any {
	data, err := json.Marshal(p)
	Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	Expect(json.Unmarshal(data, &m)).To(Succeed())
	return m
}
