package localcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Kubelet simulates the kubelets of all simulated nodes, just enough for
// kubectl to show a believable cluster: a pod bound to a node starts
// Running and Ready at once, and a bound pod being deleted goes away at
// once (a real kubelet confirms the deletion once its containers stopped;
// without one, a bound pod would stay Terminating for ever). Nothing runs,
// and no heartbeats are sent: with no node lifecycle controller, node
// conditions never go stale.
type Kubelet struct {
	client kubernetes.Interface
	pods   listersv1.PodLister
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	synced cache.InformerSynced
}

// NewKubelet returns a simulated kubelet; factory must not be started yet.
func NewKubelet(client kubernetes.Interface, factory informers.SharedInformerFactory) (*Kubelet, error) {
	informer := factory.Core().V1().Pods()
	k := &Kubelet{
		client: client,
		pods:   informer.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "simulated-kubelet"}),
		synced: informer.Informer().HasSynced,
	}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			k.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return k, err
}

// Run works until ctx ends; start the informer factory first.
func (k *Kubelet) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("simulated-kubelet")
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), k.synced) {
		return
	}
	for {
		key, quit := k.queue.Get()
		if quit {
			return
		}
		if err := k.sync(ctx, key); err != nil && ctx.Err() == nil {
			logger.V(2).Info("Retrying a pod", "pod", key, "err", err)
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

func (k *Kubelet) sync(ctx context.Context, key types.NamespacedName) error {
	pod, err := k.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return nil
	}
	running := pod.DeepCopy()
	now := metav1.Now()
	running.Status.Phase = corev1.PodRunning
	running.Status.StartTime = &now
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady} {
		setCondition(&running.Status, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	running.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		running.Status.ContainerStatuses = append(running.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, running, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func setCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
