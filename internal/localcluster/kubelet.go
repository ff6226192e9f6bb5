package localcluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	resourcelistersv1 "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Kubelet simulates the kubelets of all simulated nodes, just enough for
// kubectl and the workload controllers to see a believable cluster: a pod
// bound to a node starts Running and Ready at once, a pod that may finish
// (restartPolicy Never or OnFailure, as a Job's pods) succeeds once it has
// run for the simulated run time, so Jobs complete, and a bound pod being
// deleted goes away at once (a real kubelet confirms the deletion once its
// containers stopped; without one, a bound pod would stay Terminating for
// ever). A pod with resource claims starts only once each claim is
// allocated and reserved for it, as a kubelet prepares a pod's claims
// before its containers and refuses a claim not reserved for the pod.
// Nothing runs, and no heartbeats are sent: with no node lifecycle
// controller, node conditions never go stale.
type Kubelet struct {
	client kubernetes.Interface
	// runTime is how long a pod that may finish runs; zero: for ever.
	runTime time.Duration
	pods    listersv1.PodLister
	claims  resourcelistersv1.ResourceClaimLister
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	synced  []cache.InformerSynced
}

// KubeletOption configures a simulated kubelet.
type KubeletOption func(*Kubelet)

// WithSimulatedRunTime makes pods whose restartPolicy is Never or
// OnFailure succeed, all containers exiting 0, once they have run for d.
// Without it they run for ever.
func WithSimulatedRunTime(d time.Duration) KubeletOption {
	return func(k *Kubelet) { k.runTime = d }
}

// NewKubelet returns a simulated kubelet; factory must not be started yet.
func NewKubelet(client kubernetes.Interface, factory informers.SharedInformerFactory, opts ...KubeletOption) (*Kubelet, error) {
	informer := factory.Core().V1().Pods()
	claims := factory.Resource().V1().ResourceClaims()
	k := &Kubelet{
		client: client,
		pods:   informer.Lister(),
		claims: claims.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "simulated-kubelet"}),
		synced: []cache.InformerSynced{informer.Informer().HasSynced, claims.Informer().HasSynced},
	}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			k.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	for _, opt := range opts {
		opt(k)
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	// A claim reserved for a pod may be what the pod waits for.
	enqueueReserved := func(obj any) {
		if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
			for _, ref := range claim.Status.ReservedFor {
				if ref.APIGroup == "" && ref.Resource == "pods" {
					k.queue.Add(types.NamespacedName{Namespace: claim.Namespace, Name: ref.Name})
				}
			}
		}
	}
	_, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueReserved,
		UpdateFunc: func(_, obj any) { enqueueReserved(obj) },
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
	if !cache.WaitForCacheSync(ctx.Done(), k.synced...) {
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
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		if !k.claimsPrepared(pod) {
			// The claim's or the pod's next update brings it back.
			return nil
		}
		return k.start(ctx, pod)
	case corev1.PodRunning:
		return k.finish(ctx, pod)
	}
	return nil
}

// claimsPrepared says whether every resource claim of pod, those of its
// spec and the one the scheduler made for its extended resources, exists,
// belongs to it when made for it, is allocated and is reserved for it: what
// a kubelet checks before its DRA drivers prepare the claims' devices.
func (k *Kubelet) claimsPrepared(pod *corev1.Pod) bool {
	var names []string
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return false
		}
		if name == nil {
			// No claim was needed.
			continue
		}
		if mustCheckOwner {
			claim, err := k.claims.ResourceClaims(pod.Namespace).Get(*name)
			if err != nil || resourceclaim.IsForPod(pod, claim, false) != nil {
				return false
			}
		}
		names = append(names, *name)
	}
	if status := pod.Status.ExtendedResourceClaimStatus; status != nil {
		names = append(names, status.ResourceClaimName)
	}
	for _, name := range names {
		claim, err := k.claims.ResourceClaims(pod.Namespace).Get(name)
		if err != nil || claim.Status.Allocation == nil || !resourceclaim.IsReservedForPod(pod, claim, false) {
			return false
		}
	}
	return true
}

// start marks pod Running and Ready.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) error {
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
	return k.updateStatus(ctx, running)
}

// finish marks pod Succeeded once it has run for the simulated run time,
// if it is a pod that may finish; before that, it looks at pod again when
// the time is up.
func (k *Kubelet) finish(ctx context.Context, pod *corev1.Pod) error {
	if k.runTime <= 0 || pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == "" || pod.Status.StartTime == nil {
		return nil
	}
	if left := time.Until(pod.Status.StartTime.Add(k.runTime)); left > 0 {
		k.queue.AddAfter(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, left)
		return nil
	}
	done := pod.DeepCopy()
	now := metav1.Now()
	done.Status.Phase = corev1.PodSucceeded
	// As a kubelet reports a pod whose containers all completed.
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		setCondition(&done.Status, corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now})
	}
	for i, c := range done.Status.ContainerStatuses {
		started := now
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		done.Status.ContainerStatuses[i].Ready = false
		done.Status.ContainerStatuses[i].Started = ptr.To(false)
		done.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now,
		}}
	}
	return k.updateStatus(ctx, done)
}

func (k *Kubelet) updateStatus(ctx context.Context, pod *corev1.Pod) error {
	_, err := k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
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
