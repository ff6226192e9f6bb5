package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/podutil"
)

const (
	goroutineResultSuccess = "success"
	goroutineResultError   = "error"
)

// executorPreemptor is what preempts: a pod, or a pod group for its unscheduled
// pods (upstream's ExecutorPreemptor).
type executorPreemptor interface {
	klog.KMetadata
	// uid keys the preemption in flight.
	uid() types.UID
	// schedulerName names the scheduler in the victims' condition.
	schedulerName() string
	// object is what the victims' Preempted event relates to.
	object() k8sruntime.Object
	// members are the pods to move back to the active queue, by
	// "namespace/name".
	members() map[string]*v1.Pod
	// priority is the preemptor's; lower-priority pods nominated to the
	// target lose their nomination.
	priority() int32
	// kind is "pod" or "podgroup": the label of the metrics and the word
	// in the victims' event and condition.
	kind() string
}

// podPreemptor is a single pod preempting.
type podPreemptor struct{ *v1.Pod }

func (p podPreemptor) uid() types.UID            { return p.UID }
func (p podPreemptor) schedulerName() string     { return p.Spec.SchedulerName }
func (p podPreemptor) object() k8sruntime.Object { return p.Pod }
func (p podPreemptor) members() map[string]*v1.Pod {
	return map[string]*v1.Pod{p.Namespace + "/" + p.Name: p.Pod}
}
func (p podPreemptor) priority() int32 { return corev1helpers.PodPriority(p.Pod) }
func (p podPreemptor) kind() string    { return string(framework.PodKeyType) }

// podGroupPreemptor is a PodGroup preempting for pods, its unscheduled
// members.
type podGroupPreemptor struct {
	*schedulingv1beta1.PodGroup
	pods []*v1.Pod
}

func (p podGroupPreemptor) uid() types.UID { return p.UID }

// schedulerName is the first pod's: a group's pods share their scheduler.
func (p podGroupPreemptor) schedulerName() string     { return p.pods[0].Spec.SchedulerName }
func (p podGroupPreemptor) object() k8sruntime.Object { return p.PodGroup }
func (p podGroupPreemptor) members() map[string]*v1.Pod {
	m := make(map[string]*v1.Pod, len(p.pods))
	for _, pod := range p.pods {
		m[pod.Namespace+"/"+pod.Name] = pod
	}
	return m
}
func (p podGroupPreemptor) priority() int32 { return podGroupPriority(p.PodGroup) }
func (p podGroupPreemptor) kind() string    { return string(framework.PodGroupKeyType) }

// actuateAsync evicts the victims of c in the background and clears the
// nominations of lower-priority pods nominated to c's node. Until it is
// done, PreEnqueue keeps the preemptor (a pod group: its pods) out of the
// active queue.
func (pl *defaultPreemption) actuateAsync(c *candidate, preemptor executorPreemptor) {
	logger := klog.FromContext(pl.bgCtx)
	// Every chosen victim counts, also when none needs an API call
	// (upstream 1.37; 1.36 observed only preemptions that sent one).
	if preemptor.kind() == preemptorPod {
		pl.fh.Metrics().PreemptionVictims.Observe(float64(len(c.victims)))
	} else {
		pl.fh.Metrics().WorkloadPreemptionVictims.WithLabelValues().Observe(float64(len(c.victims)))
	}
	if c.numPDBViolations > 0 {
		pl.fh.Metrics().PreemptionPDBViolations.WithLabelValues(preemptor.kind()).Add(float64(c.numPDBViolations))
	}
	victims := make([]*v1.Pod, 0, len(c.victims))
	for _, v := range c.victims {
		if v.DeletionTimestamp != nil {
			// Graceful deletion already started; another call is useless.
			logger.V(2).Info("Victim Pod is already being deleted, skipping the API call for it", "preemptor", klog.KObj(preemptor), "node", c.name, "victim", klog.KObj(v))
			continue
		}
		victims = append(victims, v)
	}
	if len(victims) == 0 {
		return
	}

	pl.mu.Lock()
	pl.preempting[preemptor.uid()] = struct{}{}
	pl.mu.Unlock()

	// Computed now, in the scheduling cycle: the nominator may change as
	// soon as the cycle ends.
	nominated := pl.lowerPriorityNominatedPods(preemptor.priority(), c.name)

	pl.inFlight.Add(1)
	go func() {
		defer pl.inFlight.Done()
		ctx, cancel := context.WithCancel(pl.bgCtx)
		defer cancel()
		start := time.Now()
		result := goroutineResultSuccess
		// PreEnqueue lets the preemptor go once the last victim's deletion
		// shows in the informer; a victim preempted in memory is never
		// deleted, so nothing else would move the preemptor.
		lastInMemory := false
		defer func() {
			pl.fh.Metrics().PreemptionExecutionDuration.WithLabelValues(preemptor.kind(), result).Observe(time.Since(start).Seconds())
			pl.fh.Metrics().PreemptionGoroutinesDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
			pl.fh.Metrics().PreemptionGoroutinesExecutionTotal.WithLabelValues(result).Inc()
			pl.mu.Lock()
			delete(pl.preempting, preemptor.uid())
			delete(pl.lastVictims, preemptor.uid())
			pl.mu.Unlock()
			if result == goroutineResultError || lastInMemory {
				// The preemptor may sit among the unschedulable pods with
				// no event left to move it: move it ourselves (upstream
				// 1.37; 1.36 did it only after an error).
				pl.fh.Activate(logger, preemptor.members())
			}
		}()
		logger.V(2).Info("Start the preemption asynchronously", "preemptor", klog.KObj(preemptor), "node", c.name, "numVictims", len(c.victims), "numVictimsToDelete", len(victims))

		// Lower-priority pods nominated to this node may not fit any more.
		// Clearing their nomination requeues them so they look elsewhere
		// now rather than after the victims are gone.
		if err := clearNominatedNodeName(ctx, pl.fh.ClientSet(), nominated...); err != nil {
			logger.Error(err, "Cannot clear 'NominatedNodeName' field from lower priority pods on the same target node", "node", c.name)
			result = goroutineResultError
		}

		// All victims but the last are evicted in parallel. The last one is
		// recorded first so that PreEnqueue can tell, from the informer,
		// when its deletion went through even before this goroutine ends.
		last := victims[len(victims)-1]
		if rest := victims[:len(victims)-1]; len(rest) > 0 {
			var errMu sync.Mutex
			var firstErr error
			pl.fh.Parallelizer().Until(ctx, len(rest), func(i int) {
				if _, err := pl.preemptPod(ctx, c.name, preemptor, rest[i]); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					errMu.Unlock()
				}
			}, Name)
			if firstErr != nil {
				logger.Error(firstErr, "Error occurred during async preemption")
				result = goroutineResultError
				// The preemptor will be retried; no point evicting more.
				return
			}
		}
		pl.mu.Lock()
		pl.lastVictims[preemptor.uid()] = types.NamespacedName{Namespace: last.Namespace, Name: last.Name}
		pl.mu.Unlock()
		inMemory, err := pl.preemptPod(ctx, c.name, preemptor, last)
		if err != nil {
			logger.Error(err, "Error occurred during async preemption of the last victim")
			result = goroutineResultError
		}
		lastInMemory = inMemory
		logger.V(2).Info("Async Preemption finished completely", "preemptor", klog.KObj(preemptor), "node", c.name, "result", result)
	}()
}

// isRunningPreemption reports whether the victims of the preemptor uid (a
// pod or a PodGroup) are still being evicted. Once the last victim is gone
// or terminating in the informer, the preemption counts as done.
func (pl *defaultPreemption) isRunningPreemption(uid types.UID) bool {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	if _, ok := pl.preempting[uid]; !ok {
		return false
	}
	last, ok := pl.lastVictims[uid]
	if !ok {
		return true
	}
	victim, err := pl.podLister.Pods(last.Namespace).Get(last.Name)
	if err != nil || victim.DeletionTimestamp != nil {
		return false
	}
	return true
}

// lowerPriorityNominatedPods returns the pods nominated to nodeName with a
// priority below prio.
func (pl *defaultPreemption) lowerPriorityNominatedPods(prio int32, nodeName string) []*v1.Pod {
	var out []*v1.Pod
	for _, pi := range pl.fh.NominatedPodsForNode(nodeName) {
		if corev1helpers.PodPriority(pi.Pod) < prio {
			out = append(out, pi.Pod)
		}
	}
	return out
}

// preemptPod evicts victim: a pod waiting at Permit, or whose binding
// cycle is in PreBind and has not sent its binding, is stopped in memory
// (its binding cycle fails, Unreserve runs and it goes back to the queue);
// any other gets the DisruptionTarget condition, so its owner knows why it
// goes, and is deleted. An event is recorded either way. A victim already
// gone is not an error. It reports whether the victim was stopped in
// memory, without a deletion.
func (pl *defaultPreemption) preemptPod(ctx context.Context, nodeName string, preemptor executorPreemptor, victim *v1.Pod) (bool, error) {
	logger := klog.FromContext(ctx)
	msg := fmt.Sprintf("Preempted by %s %v on node %v", preemptor.kind(), preemptor.uid(), nodeName)
	inMemory := false
	if wp := pl.fh.GetWaitingPod(victim.UID); wp != nil {
		if wp.Preempt(Name, "preempted") {
			logger.V(2).Info("Preemptor preempted a waiting pod", "preemptorType", preemptor.kind(), "preemptor", klog.KObj(preemptor), "waitingPod", klog.KObj(victim), "node", nodeName)
			inMemory = true
		}
	} else if p := pl.fh.GetPodInPreBind(victim.UID); p != nil {
		// Fails once the binding cycle marked the pod prebound: its
		// binding may be on its way, so it is deleted like a bound pod.
		if p.CancelPod("preempted by " + Name) {
			logger.V(2).Info("Preemptor rejected a pod in preBind", "preemptorType", preemptor.kind(), "preemptor", klog.KObj(preemptor), "podInPreBind", klog.KObj(victim), "node", nodeName)
			inMemory = true
			// Until its binding cycle gave the room back, the victim is
			// still assumed: a preemptor let in now would choose it again
			// and, finding it in PreBind no more, delete it. PreEnqueue
			// keeps the preemptor out meanwhile, as it does until a
			// deleted victim is gone.
			select {
			case <-p.Done():
			case <-ctx.Done():
				return false, context.Cause(ctx)
			}
		} else {
			logger.V(5).Info("Failed to reject a pod in preBind, falling back to deletion via api call", "preemptor", klog.KObj(preemptor), "podInPreBind", klog.KObj(victim), "node", nodeName)
		}
	}
	if inMemory {
		msg += " (in kube-scheduler memory)."
	} else {
		cs := pl.fh.ClientSet()
		if cs == nil {
			return false, errors.New("no Kubernetes client configured")
		}
		condition := v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: victim.Generation,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority %s", preemptor.schedulerName(), preemptor.kind()),
		}
		newStatus := victim.Status.DeepCopy()
		if podutil.UpdatePodCondition(newStatus, &condition) {
			if err := podutil.PatchPodStatus(ctx, cs, victim, newStatus); err != nil {
				if apierrors.IsNotFound(err) {
					logger.V(2).Info("Victim Pod is already deleted", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", nodeName)
					return false, nil
				}
				logger.Error(err, "Could not add DisruptionTarget condition due to preemption", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim))
				return false, err
			}
		}
		if err := cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				logger.V(2).Info("Victim Pod is already deleted", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", nodeName)
				return false, nil
			}
			logger.Error(err, "Tried to preempted pod", "pod", klog.KObj(victim), "preemptor", klog.KObj(preemptor))
			return false, err
		}
		logger.V(2).Info("Preemptor Pod preempted victim Pod", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", nodeName)
	}
	if r := pl.fh.EventRecorder(); r != nil {
		r.WithLogger(logger).Eventf(victim, preemptor.object(), v1.EventTypeNormal, "Preempted", "Preempting", msg)
	}
	return inMemory, nil
}

// clearNominatedNodeName removes the nomination of pods.
func clearNominatedNodeName(ctx context.Context, cs clientset.Interface, pods ...*v1.Pod) error {
	var errs []error
	for _, p := range pods {
		if p.Status.NominatedNodeName == "" {
			continue
		}
		if cs == nil {
			return errors.New("no Kubernetes client configured")
		}
		st := p.Status.DeepCopy()
		st.NominatedNodeName = ""
		if err := podutil.PatchPodStatus(ctx, cs, p, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
