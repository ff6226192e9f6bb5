package operator_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

var ctx = context.Background()

func getProfile(name string) *schedulingv1alpha1.SchedulingProfile {
	GinkgoHelper()
	sp := &schedulingv1alpha1.SchedulingProfile{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, sp)).To(Succeed())
	return sp
}

// profileCondition returns the condition of the named profile, once its
// status speaks of its current generation.
func profileCondition(name, condType string) func() *metav1.Condition {
	return func() *metav1.Condition {
		sp := &schedulingv1alpha1.SchedulingProfile{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil || sp.Status.ObservedGeneration != sp.Generation {
			return nil
		}
		return meta.FindStatusCondition(sp.Status.Conditions, condType)
	}
}

func haveCondition(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

// serving waits until the named profile is accepted and serving its
// current generation.
func serving(name string) {
	GinkgoHelper()
	Eventually(profileCondition(name, schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt))
	Eventually(func() int64 { sp := getProfile(name); return sp.Status.ServingGeneration - sp.Generation }).Should(BeZero())
	Expect(profileCondition(name, schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
}

func createPod(pod *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	return pod
}

// boundNode waits for pod to be bound and returns its node.
func boundNode(pod *corev1.Pod) string {
	GinkgoHelper()
	var node string
	Eventually(func() string { node = scheduledPodNode(pod); return node }).ShouldNot(BeEmpty(), func() string {
		p := &corev1.Pod{}
		_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p)
		return fmt.Sprintf("pod %s/%s was not bound; its conditions: %+v", pod.Namespace, pod.Name, p.Status.Conditions)
	})
	return node
}

// scheduledPodNode is the node pod is bound to, "" if none.
func scheduledPodNode(pod *corev1.Pod) string {
	p := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// scheduledCondition returns the pod's PodScheduled condition.
func scheduledCondition(pod *corev1.Pod) func() *corev1.PodCondition {
	return func() *corev1.PodCondition {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return nil
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodScheduled {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
}

// eventNotes returns the notes of events about the named object with reason.
func eventNotes(kind, namespace, name, reason string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		if err := k8sClient.List(ctx, &list); err != nil {
			return nil
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Namespace == namespace && e.Regarding.Name == name && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}

// nodes creates count simulated nodes named prefix-i with label pool=prefix.
func nodes(prefix string, count int, cpu, memory string) {
	GinkgoHelper()
	for i := range count {
		n := testenv.Node(fmt.Sprintf("%s-%d", prefix, i), cpu, memory, map[string]string{
			"pool": prefix, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3),
		})
		Expect(testenv.CreateNode(ctx, k8sClient, n)).To(Succeed())
	}
}

// poolPod is a pod for schedulerName that only fits nodes of pool.
func poolPod(ns, name, schedulerName, pool, cpu, memory string) *corev1.Pod {
	pod := testenv.Pod(ns, name, schedulerName, cpu, memory)
	pod.Spec.NodeSelector = map[string]string{"pool": pool}
	return pod
}

// indent turns a YAML fragment into one nested under a key.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}
