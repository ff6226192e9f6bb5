// Package podutil holds helpers on Pod objects shared by the scheduler and
// its plugins, where upstream keeps them in k8s.io/kubernetes/pkg/api/v1/pod.
package podutil

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// UpdatePodCondition sets condition in status, adding it if status has no
// condition of its type, and reports whether anything changed. The
// transition time moves to now only when the condition's status changes.
// It matches upstream's podutil.UpdatePodCondition, ObservedGeneration
// included: a change of that field alone is not reported.
func UpdatePodCondition(status *v1.PodStatus, condition *v1.PodCondition) bool {
	condition.LastTransitionTime = metav1.Now()
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != condition.Type {
			continue
		}
		if condition.Status == old.Status {
			condition.LastTransitionTime = old.LastTransitionTime
		}
		same := condition.Status == old.Status &&
			condition.Reason == old.Reason &&
			condition.Message == old.Message &&
			condition.LastProbeTime.Equal(&old.LastProbeTime) &&
			condition.LastTransitionTime.Equal(&old.LastTransitionTime)
		*old = *condition
		return !same
	}
	status.Conditions = append(status.Conditions, *condition)
	return true
}

// PatchPodStatus sends the difference between pod's status and newStatus
// as a strategic merge patch of the status subresource, retrying errors
// that are likely transient, as upstream's util.PatchPodStatus.
func PatchPodStatus(ctx context.Context, cs clientset.Interface, pod *v1.Pod, newStatus *v1.PodStatus) error {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(v1.Pod{Status: *newStatus})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, &v1.Pod{})
	if err != nil {
		return fmt.Errorf("failed to create merge patch for pod %q/%q: %w", pod.Namespace, pod.Name, err)
	}
	if string(patch) == "{}" {
		return nil
	}
	return retry.OnError(retry.DefaultBackoff, retriable, func() error {
		_, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
}

func retriable(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsConflict(err) || utilnet.IsConnectionRefused(err)
}
