package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientset "k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/coalesce"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/podutil"
)

// statusWorkers is how many pod status patches may be in flight at once.
const statusWorkers = 4

// statusUpdate is what the scheduler wants a pod's status to say.
type statusUpdate struct {
	uid            types.UID
	condition      *v1.PodCondition
	nominatingInfo *framework.NominatingInfo
}

// over is u with what it leaves unsaid taken from older, an update of the
// same pod not sent yet: neither the binding cycle's nomination (no
// condition) nor a condition without a nomination drops what the other
// asked for.
func (u statusUpdate) over(older statusUpdate) statusUpdate {
	if u.uid != older.uid {
		return u
	}
	if u.condition == nil {
		u.condition = older.condition
	}
	if u.nominatingInfo.Mode() != framework.ModeOverride {
		u.nominatingInfo = older.nominatingInfo
	}
	return u
}

// statusUpdater patches pod status off the scheduling loop. Updates are
// coalesced per pod (what the latest says wins, see over) and compared,
// when they are sent, with the pod as the informer has it then: nothing is
// sent when the status already says it, or when the pod was bound, deleted
// or recreated in the meantime.
type statusUpdater struct {
	client    clientset.Interface
	podLister listersv1.PodLister
	writer    *coalesce.Writer[types.NamespacedName, statusUpdate]
}

func newStatusUpdater(client clientset.Interface, podLister listersv1.PodLister) *statusUpdater {
	u := &statusUpdater{client: client, podLister: podLister}
	u.writer = coalesce.New(coalesce.Config[types.NamespacedName, statusUpdate]{
		Name:    "pod-status",
		Workers: statusWorkers,
		Write:   u.send,
		Merge:   statusUpdate.over,
		Failed: func(ctx context.Context, key types.NamespacedName, err error) {
			klog.FromContext(ctx).V(2).Info("Updating pod status failed; will retry", "pod", klog.KRef(key.Namespace, key.Name), "err", err)
		},
	})
	return u
}

// update asks for pod's status to carry condition and, with ModeOverride,
// the nominated node. It never blocks on the API.
func (u *statusUpdater) update(pod *v1.Pod, condition *v1.PodCondition, ni *framework.NominatingInfo) {
	u.writer.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		statusUpdate{uid: pod.UID, condition: condition, nominatingInfo: ni})
}

// run sends updates until ctx ends; updates still pending then are
// dropped (the next leader recomputes them).
func (u *statusUpdater) run(ctx context.Context) {
	u.writer.Run(ctx)
}

// send patches the status if it differs from what is wanted. The patch
// carries the resourceVersion it was computed from, so a pod changed
// meanwhile (bound, say) makes it fail with a conflict and be recomputed
// rather than overwrite newer state.
func (u *statusUpdater) send(ctx context.Context, key types.NamespacedName, upd statusUpdate) error {
	pod, err := u.podLister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.UID != upd.uid || pod.Spec.NodeName != "" {
		return nil
	}
	newStatus := pod.Status.DeepCopy()
	nnnChanged := upd.nominatingInfo.Mode() == framework.ModeOverride && pod.Status.NominatedNodeName != upd.nominatingInfo.NominatedNodeName
	condChanged := false
	if upd.condition != nil {
		condChanged = podutil.UpdatePodCondition(newStatus, upd.condition.DeepCopy())
	}
	if !nnnChanged && !condChanged {
		return nil
	}
	if nnnChanged {
		newStatus.NominatedNodeName = upd.nominatingInfo.NominatedNodeName
	}
	patch, err := statusPatch(pod, newStatus)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(3).Info("Updating pod status", "pod", klog.KObj(pod), "nominatedNodeName", newStatus.NominatedNodeName)
	_, err = u.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// statusPatch is a strategic merge patch from pod's status to newStatus
// with pod's resourceVersion as a precondition.
func statusPatch(pod *v1.Pod, newStatus *v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: pod.ResourceVersion}, Status: *newStatus})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, &v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("creating the status patch of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return patch, nil
}
