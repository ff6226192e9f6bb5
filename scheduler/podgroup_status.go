package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
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
	queue     workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	pending map[types.NamespacedName]podGroupConditionUpdate
}

func newPodGroupStatusUpdater(client clientset.Interface, podGroups framework.PodGroupLister) *podGroupStatusUpdater {
	return &podGroupStatusUpdater{
		client:    client,
		podGroups: podGroups,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "podgroup-status"}),
		pending: make(map[types.NamespacedName]podGroupConditionUpdate),
	}
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
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	c := *condition
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Now()
	}
	u.mu.Lock()
	if prev, ok := u.pending[key]; ok && prev.condition.Status == c.Status {
		c.LastTransitionTime = prev.condition.LastTransitionTime
	}
	u.pending[key] = podGroupConditionUpdate{podGroup: pg, condition: &c}
	u.mu.Unlock()
	u.queue.Add(key)
}

// run sends updates until ctx ends; those still pending then are dropped
// (the next leader's cycles ask for them again).
func (u *podGroupStatusUpdater) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		u.queue.ShutDown()
	}()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for u.processNext(ctx) {
		}
	}, time.Second)
}

func (u *podGroupStatusUpdater) processNext(ctx context.Context) bool {
	key, quit := u.queue.Get()
	if quit {
		return false
	}
	defer u.queue.Done(key)
	u.mu.Lock()
	upd, ok := u.pending[key]
	delete(u.pending, key)
	u.mu.Unlock()
	if !ok {
		u.queue.Forget(key)
		return true
	}
	err := u.send(ctx, upd)
	if err == nil || ctx.Err() != nil {
		u.queue.Forget(key)
		return ctx.Err() == nil
	}
	klog.FromContext(ctx).Error(err, "Failed to update PodGroup status", "podGroup", klog.KRef(key.Namespace, key.Name))
	u.mu.Lock()
	if _, newer := u.pending[key]; !newer {
		u.pending[key] = upd
	}
	u.mu.Unlock()
	u.queue.AddRateLimited(key)
	return true
}

// send patches the condition onto the PodGroup, unless the cache's newer
// version shows it recreated, already scheduled or already saying so.
func (u *podGroupStatusUpdater) send(ctx context.Context, upd podGroupConditionUpdate) error {
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
