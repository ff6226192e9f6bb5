package testenv

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// Node is a simulated node: its hostname label, capacity and allocatable of
// cpu and memory (and 110 pods), Ready, declaring the features a kubelet of
// the control plane's version declares, as a kubelet (or KWOK) would report it.
func Node(name, cpu, memory string, labels map[string]string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	all := map[string]string{corev1.LabelHostname: name} // as the kubelet sets it
	for k, v := range labels {
		all[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all},
		Status: corev1.NodeStatus{
			Capacity:         res,
			Allocatable:      res.DeepCopy(),
			Conditions:       []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
			DeclaredFeatures: localcluster.KubeletDeclaredFeatures(),
		},
	}
}

// CreateNode creates n and then writes its status, which a create ignores.
// The API server taints every new node not-ready (admission plugin
// TaintNodesByCondition) and, with no node lifecycle controller running,
// nothing would lift it: CreateNode lifts it as that controller does once
// the node reports Ready.
func CreateNode(ctx context.Context, c client.Client, n *corev1.Node) error {
	status := n.Status.DeepCopy()
	taints := n.Spec.Taints
	if err := c.Create(ctx, n); err != nil {
		return err
	}
	n.Status = *status
	if err := c.Status().Update(ctx, n); err != nil {
		return err
	}
	n.Spec.Taints = taints
	return c.Update(ctx, n)
}

// Pod is a pending pod for schedulerName requesting cpu and memory ("" for none).
func Pod(namespace, name, schedulerName, cpu, memory string) *corev1.Pod {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1",
				Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
}
