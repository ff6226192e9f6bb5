package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
)

// Condition reasons the mirror writes on WaitingPods.
const (
	reasonHeld    = "Held"
	reasonAllowed = "Allowed"
	reasonTimeout = "Timeout"
)

// WaitingPodMirror shows pods held at Permit as WaitingPods. The framework
// instances report to it on scheduling and binding goroutines
// (framework.WaitingPodObserver); it only records what it saw and queues the
// pod, and its own worker writes the WaitingPod, so a scheduling cycle never
// waits on the API server.
type WaitingPodMirror struct {
	client client.Client
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	// mu guards observed: the latest observation per pod, which the worker
	// writes out and drops once the pod's wait is resolved and written.
	mu       sync.Mutex
	observed map[types.NamespacedName]*observation
}

// observation is what the scheduler last reported of one held pod.
type observation struct {
	pod       *corev1.Pod
	profile   string
	node      string
	deadlines map[string]time.Time
	resolved  bool
	// resolution and status say how the wait ended, once resolved.
	resolution framework.PermitResolution
	status     *framework.Status
}

var (
	_ framework.WaitingPodObserver = (*WaitingPodMirror)(nil)
	_ manager.Runnable             = (*WaitingPodMirror)(nil)
)

// NewWaitingPodMirror returns a mirror that writes with c. Add it to the
// manager so its worker runs on the leader.
func NewWaitingPodMirror(c client.Client) *WaitingPodMirror {
	return &WaitingPodMirror{
		client:   c,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](), workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "waitingpod-mirror"}),
		observed: map[types.NamespacedName]*observation{},
	}
}

// PodWaiting records that a pod is held at Permit.
func (m *WaitingPodMirror) PodWaiting(profile string, wp framework.WaitingPod) {
	pod := wp.GetPod()
	m.observe(&observation{pod: pod, profile: profile, node: wp.GetNodeName(), deadlines: wp.GetPendingPluginDeadlines()})
}

// PodResolved records how a pod's wait at Permit ended.
func (m *WaitingPodMirror) PodResolved(profile string, pod *corev1.Pod, resolution framework.PermitResolution, status *framework.Status) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	m.mu.Lock()
	prev := m.observed[key]
	m.mu.Unlock()
	obs := &observation{pod: pod, profile: profile, resolved: true, resolution: resolution, status: status}
	if prev != nil && prev.pod.UID == pod.UID {
		obs.node = prev.node
	}
	m.observe(obs)
}

func (m *WaitingPodMirror) observe(obs *observation) {
	key := types.NamespacedName{Namespace: obs.pod.Namespace, Name: obs.pod.Name}
	m.mu.Lock()
	m.observed[key] = obs
	m.mu.Unlock()
	m.queue.Add(key)
}

// NeedLeaderElection is true: only the leader schedules, so only it mirrors.
func (m *WaitingPodMirror) NeedLeaderElection() bool { return true }

// mirrorWorkers write WaitingPods in parallel; the queue never hands one
// key to two workers at once.
const mirrorWorkers = 4

// Start runs the workers until ctx ends.
func (m *WaitingPodMirror) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("waitingpod-mirror")
	var wg sync.WaitGroup
	for range mirrorWorkers {
		wg.Go(func() { m.work(ctx, logger) })
	}
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
	return nil
}

func (m *WaitingPodMirror) work(ctx context.Context, logger klog.Logger) {
	for {
		key, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		if err := m.sync(ctx, key); err != nil {
			logger.Error(err, "Writing WaitingPod", "waitingPod", key)
			m.queue.AddRateLimited(key)
		} else {
			m.queue.Forget(key)
		}
		m.queue.Done(key)
	}
}

func (m *WaitingPodMirror) sync(ctx context.Context, key types.NamespacedName) error {
	m.mu.Lock()
	obs := m.observed[key]
	m.mu.Unlock()
	if obs == nil {
		return nil
	}

	wp := &schedulingv1alpha1.WaitingPod{}
	err := m.client.Get(ctx, key, wp)
	switch {
	case apierrors.IsNotFound(err):
		wp = nil
	case err != nil:
		return err
	case podUIDOf(wp) != "" && podUIDOf(wp) != obs.pod.UID:
		// Left over from an earlier pod of the same name: its decision
		// must not apply to this one.
		if err := m.client.Delete(ctx, wp, client.Preconditions{UID: &wp.UID}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		wp = nil
	}
	if wp == nil {
		if obs.resolved {
			// Resolved before it could be shown; nothing to decide.
			m.drop(key, obs)
			return nil
		}
		wp = newWaitingPod(obs.pod)
		if err := m.client.Create(ctx, wp); err != nil {
			return err
		}
	}

	orig := wp.DeepCopy()
	setObservedStatus(wp, obs)
	if !equality.Semantic.DeepEqual(orig.Status, wp.Status) {
		if err := m.client.Status().Patch(ctx, wp, client.MergeFrom(orig)); err != nil {
			return err
		}
	}
	m.drop(key, obs)
	return nil
}

// drop forgets obs once written, unless a newer observation replaced it.
func (m *WaitingPodMirror) drop(key types.NamespacedName, obs *observation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observed[key] == obs && obs.resolved {
		delete(m.observed, key)
	}
}

func newWaitingPod(pod *corev1.Pod) *schedulingv1alpha1.WaitingPod {
	return &schedulingv1alpha1.WaitingPod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace,
			Name:      pod.Name,
			// The pod's labels let `kubectl approve --all -l` and
			// `kubectl get waitingpods -l` select by the pod's labels.
			Labels: pod.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
			}},
		},
		Spec: schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
	}
}

// setObservedStatus writes what the scheduler observed into wp's status.
func setObservedStatus(wp *schedulingv1alpha1.WaitingPod, obs *observation) {
	st := &wp.Status
	st.PodUID = obs.pod.UID
	st.Profile = obs.profile
	st.NodeName = obs.node
	if !obs.resolved {
		st.PendingPlugins = nil
		var earliest *metav1.Time
		for _, name := range slices.Sorted(maps.Keys(obs.deadlines)) {
			d := metav1.NewTime(obs.deadlines[name].Truncate(time.Second))
			st.PendingPlugins = append(st.PendingPlugins, schedulingv1alpha1.PendingPlugin{Name: name, Deadline: &d})
			if earliest == nil || d.Before(earliest) {
				earliest = &d
			}
		}
		st.Expires = earliest
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionTrue, Reason: reasonHeld,
			Message: fmt.Sprintf("Held on node %s by %s", obs.node, strings.Join(slices.Sorted(maps.Keys(obs.deadlines)), ", ")),
		})
		meta.SetStatusCondition(&st.Conditions, decidableCondition(slices.Collect(maps.Keys(obs.deadlines))))
		// A new wait starts a new story: an earlier expiry no longer holds.
		meta.RemoveStatusCondition(&st.Conditions, schedulingv1alpha1.WaitingPodExpired)
		return
	}
	st.PendingPlugins = nil
	st.Expires = nil
	// Decidable speaks of a hold; there is none now.
	meta.RemoveStatusCondition(&st.Conditions, schedulingv1alpha1.WaitingPodDecidable)
	switch obs.resolution {
	case framework.PermitAllowed:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: reasonAllowed,
			Message: "Every Permit plugin allowed the pod; it proceeds to binding",
		})
	case framework.PermitTimedOut:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: reasonTimeout, Message: obs.status.Message(),
		})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodExpired, Status: metav1.ConditionTrue, Reason: reasonTimeout,
			Message: obs.status.Message() + "; the pod is pending again and a decision still applies when it returns",
		})
	default:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodWaiting, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.WaitingPodRejected, Message: obs.status.Message(),
		})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodRejected, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.WaitingPodRejected, Message: obs.status.Message(),
		})
	}
}

// decidableCondition says whether a decision can end a hold by the pending
// Permit plugins: only ManualApproval's hold is a person's to end.
func decidableCondition(pending []string) metav1.Condition {
	others := otherPlugins(pending)
	if !slices.Contains(pending, manualapproval.Name) {
		return metav1.Condition{
			Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonHeldByOtherPlugins,
			Message: fmt.Sprintf("Held by %s, not by %s; a decision does not release the pod from them", strings.Join(others, ", "), manualapproval.Name),
		}
	}
	msg := fmt.Sprintf("%s holds the pod until a decision", manualapproval.Name)
	if len(others) > 0 {
		msg += fmt.Sprintf("; it is also held by %s, which a decision does not release", strings.Join(others, ", "))
	}
	return metav1.Condition{
		Type: schedulingv1alpha1.WaitingPodDecidable, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonAwaitingDecision, Message: msg,
	}
}

// otherPlugins are the pending Permit plugins other than ManualApproval,
// sorted: the holds a decision never ends.
func otherPlugins(pending []string) []string {
	var others []string
	for _, name := range pending {
		if name != manualapproval.Name {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	return others
}

// podUIDOf is the pod a WaitingPod is about, to tell a leftover of an
// earlier pod of the same name from the current one: the pod its spec
// names, else the one the scheduler held. Decisions never use the fallback:
// a decision applies only to the pod its spec.podUID names.
func podUIDOf(wp *schedulingv1alpha1.WaitingPod) types.UID {
	if wp.Spec.PodUID != "" {
		return wp.Spec.PodUID
	}
	return wp.Status.PodUID
}
