package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/coalesce"
)

// podGroupConditionUpdate is the condition the scheduler wants on a
// PodGroup, with the version of it the cycle saw.
type podGroupConditionUpdate struct {
	podGroup  *schedulingv1beta1.PodGroup
	condition *metav1.Condition
}

// podGroupStatusUpdater writes the PodGroupInitiallyScheduled condition of
// PodGroups off the scheduling loop, as statusUpdater does for pods: the
// latest condition wanted per PodGroup wins, and it is compared, when it
// is sent, with the PodGroup as the cache has it then, so that a PodGroup
// scheduled meanwhile is not regressed and an unchanged one is not
// patched.
type podGroupStatusUpdater struct {
	client clientset.Interface
	// podGroups is the cache's view of PodGroups, nil without one.
	podGroups framework.PodGroupLister
	writer    *coalesce.Writer[types.NamespacedName, podGroupConditionUpdate]
}

func newPodGroupStatusUpdater(client clientset.Interface, podGroups framework.PodGroupLister) *podGroupStatusUpdater {
	u := &podGroupStatusUpdater{client: client, podGroups: podGroups}
	u.writer = coalesce.New(coalesce.Config[types.NamespacedName, podGroupConditionUpdate]{
		Name:    "podgroup-status",
		Workers: 1,
		Write:   u.send,
		Merge:   keepTransitionTime,
		Failed: func(ctx context.Context, key types.NamespacedName, err error) {
			klog.FromContext(ctx).Error(err, "Failed to update PodGroup status", "podGroup", klog.KRef(key.Namespace, key.Name))
		},
	})
	return u
}

// keepTransitionTime replaces a condition not yet sent by a newer one,
// keeping the older lastTransitionTime when the status of the same
// PodGroup object did not change.
func keepTransitionTime(newer, older podGroupConditionUpdate) podGroupConditionUpdate {
	if older.podGroup.UID == newer.podGroup.UID && older.condition.Status == newer.condition.Status {
		c := *newer.condition
		c.LastTransitionTime = older.condition.LastTransitionTime
		newer.condition = &c
	}
	return newer
}

// update asks for condition on pg. It never blocks on the API.
//
// Upstream patches each condition from the scheduling loop as the cycle
// ends. Here a condition still pending when the next one for the same
// PodGroup comes is replaced, and each is compared again, when sent, with
// the PodGroup as the cache has it then. The status a user finds is the
// same: the condition is upstream's last one, and its lastTransitionTime
// is stamped here, when the cycle asks, and kept from the replaced
// condition when the status did not change, as upstream's first patch
// would have set it and its second kept it. What is saved: patches that
// would change nothing (upstream sends them when its snapshot has not yet
// seen its own previous patch), and a condition replaced before it was
// sent (a retry of the group can come sooner than the patch only while
// the API server is slow), which a watcher of the PodGroup does not see.
// Being off the loop, the patch can come after the group's pods are bound,
// where upstream's comes before the next cycle starts.
func (u *podGroupStatusUpdater) update(pg *schedulingv1beta1.PodGroup, condition *metav1.Condition) {
	c := *condition
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Now()
	}
	u.writer.Add(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name},
		podGroupConditionUpdate{podGroup: pg, condition: &c})
}

// run sends updates until ctx ends; those still pending then are dropped
// (the next leader's cycles ask for them again).
func (u *podGroupStatusUpdater) run(ctx context.Context) {
	u.writer.Run(ctx)
}

// send patches the condition onto the PodGroup, unless the cache's newer
// version shows it recreated, already scheduled or already saying so.
func (u *podGroupStatusUpdater) send(ctx context.Context, _ types.NamespacedName, upd podGroupConditionUpdate) error {
	pg := upd.podGroup
	if u.podGroups != nil {
		latest, err := u.podGroups.Get(pg.Namespace, pg.Name)
		if err != nil || latest.UID != pg.UID {
			// Deleted or recreated meanwhile: nothing to write.
			return nil
		}
		pg = latest
	}
	condition := *upd.condition
	if !conditionChanges(pg, &condition) {
		return nil
	}
	condition.ObservedGeneration = pg.Generation
	newStatus := pg.Status.DeepCopy()
	apimeta.SetStatusCondition(&newStatus.Conditions, condition)
	patch, err := podGroupStatusPatch(&pg.Status, newStatus)
	if err != nil {
		return fmt.Errorf("failed to create merge patch for podgroup %q/%q: %w", pg.Namespace, pg.Name, err)
	}
	_, err = u.client.SchedulingV1beta1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// conditionChanges reports whether setting condition on pg changes its
// status. As upstream, a True condition is never set back to anything
// else: once scheduled, a PodGroup stays so.
func conditionChanges(pg *schedulingv1beta1.PodGroup, condition *metav1.Condition) bool {
	existing := apimeta.FindStatusCondition(pg.Status.Conditions, condition.Type)
	if existing == nil {
		return true
	}
	if existing.Status == metav1.ConditionTrue && condition.Status != metav1.ConditionTrue {
		return false
	}
	return existing.Status != condition.Status || existing.Reason != condition.Reason ||
		existing.Message != condition.Message || existing.ObservedGeneration != pg.Generation
}

// podGroupStatusPatch is upstream's PatchPodGroupStatus patch: a strategic
// merge patch from oldStatus to newStatus.
func podGroupStatusPatch(oldStatus, newStatus *schedulingv1beta1.PodGroupStatus) ([]byte, error) {
	oldData, err := json.Marshal(schedulingv1beta1.PodGroup{Status: *oldStatus})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(schedulingv1beta1.PodGroup{Status: *newStatus})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, &schedulingv1beta1.PodGroup{})
}
