package api_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The control plane every suite starts serves upstream's workload API with
// the gates workload-aware profiles need, as the local run does.
var _ = Describe("scheduling.k8s.io/v1beta1 workload API", func() {
	It("serves Workloads, PodGroups with topology constraints and their status, and pods naming a group", func(ctx SpecContext) {
		list, err := disco.ServerResourcesForGroupVersion(schedulingv1beta1.SchemeGroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		Expect(served).To(HaveKey("workloads"))
		Expect(served).To(HaveKey("podgroups"))
		Expect(served).To(HaveKey("podgroups/status"))

		gang := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}
		workload := &schedulingv1beta1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "training", Namespace: "default"},
			Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
				Name:             "workers",
				SchedulingPolicy: gang,
			}}},
		}
		Expect(k8sClient.Create(ctx, workload)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, workload))).To(Succeed())
		})

		group := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "training-workers", Namespace: "default"},
			Spec: schedulingv1beta1.PodGroupSpec{
				WorkloadRef:           &schedulingv1beta1.WorkloadReference{WorkloadName: "training", TemplateName: "workers"},
				SchedulingPolicy:      gang,
				SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}},
			},
		}
		Expect(k8sClient.Create(ctx, group)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// No PodGroup protection controller runs here to take its
			// finalizer off.
			got := &schedulingv1beta1.PodGroup{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(group), got); err != nil {
				return
			}
			got.Finalizers = nil
			Expect(client.IgnoreNotFound(k8sClient.Update(ctx, got))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, got))).To(Succeed())
		})
		got := &schedulingv1beta1.PodGroup{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(group), got)).To(Succeed())
		// TopologyAwareWorkloadScheduling keeps the constraints;
		// GenericWorkload's PodGroupProtection admission protects the group.
		Expect(got.Spec.SchedulingConstraints).NotTo(BeNil())
		Expect(got.Spec.SchedulingConstraints.Topology).To(ConsistOf(schedulingv1beta1.TopologyConstraint{Key: "topology.kubernetes.io/zone"}))
		Expect(got.Finalizers).To(ContainElement("scheduling.k8s.io/podgroup-protection"))

		got.Status.Conditions = []metav1.Condition{{Type: "PodGroupScheduled", Status: metav1.ConditionFalse, Reason: "Unschedulable", Message: "checking the status subresource", LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, got)).To(Succeed())

		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "training-worker-0", Namespace: "default"},
			Spec: corev1.PodSpec{
				Containers:      []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("training-workers")},
			},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		gotPod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), gotPod)).To(Succeed())
		Expect(gotPod.Spec.SchedulingGroup).NotTo(BeNil())
		Expect(gotPod.Spec.SchedulingGroup.PodGroupName).To(HaveValue(Equal("training-workers")))
	})
})
