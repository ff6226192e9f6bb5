package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// draSetUpTimeout bounds how long the devices of a DRA workload take to be
// published, and its claims to be made before a phase (about 10 pods a
// second, see awaitClaims) and to go after it.
const draSetUpTimeout = 5 * time.Minute

// startDRA gives every other node of nodes, not created yet, the local
// run's simulated GPUs and starts the simulated DRA driver that publishes
// them, until the returned stop is called.
func (h *harness) startDRA(ctx context.Context, nodes []*corev1.Node) (gpuNodes int, stop func(), err error) {
	for i := 1; i < len(nodes); i += 2 {
		localcluster.AddSimulatedGPUs(nodes[i], localcluster.StandardGPUs())
		gpuNodes++
	}
	factory := informers.NewSharedInformerFactory(h.cs, 0)
	driver, err := localcluster.NewSimulatedDRADriver(h.cs, factory)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); driver.Run(ctx) }()
	return gpuNodes, func() { cancel(); <-done; factory.Shutdown() }, nil
}

// awaitDevices waits until the driver published the slices of gpuNodes
// nodes and its DeviceClass, and creates the workload's
// ResourceClaimTemplate in each of namespaces.
func (h *harness) awaitDevices(ctx context.Context, gpuNodes int, namespaces ...string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, draSetUpTimeout, true, func(ctx context.Context) (bool, error) {
		slices, err := h.cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, err = h.cs.ResourceV1().DeviceClasses().Get(ctx, localcluster.SimulatedGPUClassName, metav1.GetOptions{})
		return len(slices.Items) == gpuNodes && err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("workload %s: the simulated DRA driver did not publish the GPUs of %d nodes: %w", h.w.Name, gpuNodes, err)
	}
	for _, ns := range namespaces {
		template := &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gpuTemplate},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: localcluster.SimulatedGPUClassName,
				}}},
			}}},
		}
		if _, err := h.cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// awaitClaims waits until the resource claim controller has made the
// claim of each of the pods of namespace and recorded it in the pod's
// status. A phase's clock starts after this: kube-controller-manager runs
// with its default client limits (20 requests a second), and a claim and
// the pod's status are two requests, so a phase that overlapped the
// claims' making would measure the controller, about 10 pods a second
// whichever scheduler runs, rather than the scheduler.
func (h *harness) awaitClaims(ctx context.Context, namespace string, pods int) error {
	made := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, draSetUpTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := h.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		made = 0
		for _, p := range list.Items {
			if len(p.Status.ResourceClaimStatuses) == len(p.Spec.ResourceClaims) {
				made++
			}
		}
		return made == pods, nil
	})
	if err != nil {
		return fmt.Errorf("workload %s: only %d of the %d pods of %s got their claims: %w", h.w.Name, made, pods, namespace, err)
	}
	return nil
}

// deleteClaims deletes the claims made for the deleted pods of namespace
// (in a cluster the garbage collector would, which the workload does not
// run) and waits until they are gone, the resource claim controller
// having seen their pods go, so that the next scheduler finds their
// devices free and the next phase does not overlap their deletion.
func (h *harness) deleteClaims(ctx context.Context, namespace string) error {
	if err := h.cs.ResourceV1().ResourceClaims(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, draSetUpTimeout, true, func(ctx context.Context) (bool, error) {
		claims, err := h.cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, err
	})
	if err != nil {
		return fmt.Errorf("workload %s: the claims of %s remain: %w", h.w.Name, namespace, err)
	}
	return nil
}
