package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// This file is kube-scheduler 1.37.2's pod-group scheduling cycle
// (schedule_one_podgroup.go) for leaf PodGroups: a group's pods are placed
// together, each seeing those placed before it, and bound only if the
// group as a whole fits. CompositePodGroup is not supported; the names
// and the structure are upstream's so that it can be added as a port.

// revertFns undo, last first, what a pod-group cycle simulated: pods
// assumed in the snapshot and their Reserve.
type revertFns []func()

func (r *revertFns) revert() {
	if r == nil {
		return
	}
	for i := len(*r) - 1; i >= 0; i-- {
		(*r)[i]()
		(*r)[i] = nil
	}
	*r = nil
}

// errPodGroupUnschedulable is the error of a pod group that cannot be
// scheduled as a whole.
var errPodGroupUnschedulable = errors.New("pod group is unschedulable")

// scheduleOnePodGroup schedules the queued pods of one pod group. The
// profile instance is held for the cycle and, by each pod sent to its
// binding cycle, until that ends.
func (s *Scheduler) scheduleOnePodGroup(ctx context.Context, pgInfo *framework.QueuedPodGroupInfo) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podGroupType", pgInfo.GetType(), "podGroup", klog.KObj(pgInfo))
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	pgInfo.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		s.progress.begin(pInfo.Pod)
		return false
	})
	defer s.progress.end()

	if err := s.cache.UpdateSnapshot(logger, s.picker.snapshot); err != nil {
		logger.Error(err, "Error updating snapshot")
		s.handlePodGroupFailureBeforeScheduling(ctx, pgInfo, err)
		return
	}
	// The queue's PodGroup may be older than the snapshot's; the cycle
	// uses the snapshot's throughout.
	if err := s.reconcilePodGroupWithSnapshot(pgInfo.PodGroupInfo); err != nil {
		// No condition is written on a PodGroup the snapshot lacks.
		pgInfo.PodGroup = nil
		s.handlePodGroupFailureBeforeScheduling(ctx, pgInfo, err)
		return
	}
	schedulerName, err := s.validatePodGroup(pgInfo)
	if err != nil {
		s.handlePodGroupFailureBeforeScheduling(ctx, pgInfo, err)
		return
	}
	ref, ok := s.profiles.Acquire(schedulerName)
	if !ok {
		s.handlePodGroupFailureBeforeScheduling(ctx, pgInfo, fmt.Errorf("profile not found for scheduler name %q", schedulerName))
		return
	}
	defer ref.Release()
	fwk := ref.Framework()
	logger = klog.LoggerWithValues(logger, "profile", fwk.ProfileName())
	ctx = klog.NewContext(ctx, logger)

	s.skipPodGroupPodSchedule(ctx, fwk, pgInfo)
	if len(pgInfo.QueuedPodInfos) == 0 {
		// Ends the attempt, so that members that arrived meanwhile are queued.
		if err := s.queue.AddAttemptedPodGroupIfNeeded(logger, pgInfo, s.queue.SchedulingCycle(), framework.NewStatus(framework.Success)); err != nil {
			logger.Error(err, "Failed to finish skipped pod group scheduling attempt")
		}
		return
	}
	logger.V(3).Info("Attempting to schedule pod group")
	s.podGroupCycle(ctx, ref, framework.NewCycleState(), pgInfo, start)
}

// reconcilePodGroupWithSnapshot replaces pgi's PodGroup with the snapshot's.
func (s *Scheduler) reconcilePodGroupWithSnapshot(pgi *framework.PodGroupInfo) error {
	pg, err := s.picker.snapshot.PodGroups().Get(pgi.Namespace, pgi.Name)
	if err != nil {
		return err
	}
	pgi.PodGroup = pg
	return nil
}

// handlePodGroupFailureBeforeScheduling requeues every pod of a group the
// cycle could not even start on, and the group with them.
func (s *Scheduler) handlePodGroupFailureBeforeScheduling(ctx context.Context, pgInfo *framework.QueuedPodGroupInfo, err error) {
	logger := klog.FromContext(ctx)
	pgInfo.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		ref, ok := s.profiles.Acquire(pInfo.Pod.Spec.SchedulerName)
		if !ok {
			logger.Error(fmt.Errorf("profile not found for scheduler name %q", pInfo.Pod.Spec.SchedulerName), "Error occurred", "pod", klog.KObj(pInfo.Pod))
			s.queue.Done(pInfo.Pod.UID)
			return true
		}
		s.handleSchedulingFailure(ctx, ref.Framework(), pInfo, framework.AsStatus(err), clearNominatedNode, time.Now())
		ref.Release()
		return true
	})
	if pgInfo.PodGroup != nil {
		s.updatePodGroupCondition(ctx, pgInfo.PodGroupInfo, &metav1.Condition{
			Type:    schedulingv1beta1.PodGroupInitiallyScheduled,
			Status:  metav1.ConditionFalse,
			Reason:  schedulingv1beta1.PodGroupReasonSchedulerError,
			Message: err.Error(),
		})
	}
	if err := s.queue.AddAttemptedPodGroupIfNeeded(logger, pgInfo, s.queue.SchedulingCycle(), framework.AsStatus(err)); err != nil {
		logger.Error(err, "Failed to add pod group back to scheduling queue")
	}
}

// validatePodGroup checks, as upstream with PodGroupPreemptionPolicy off,
// that the group's pods, queued and scheduled, share a schedulerName and a
// preemption policy, and have the group's priority. It returns the
// schedulerName.
func (s *Scheduler) validatePodGroup(pgInfo *framework.QueuedPodGroupInfo) (string, error) {
	schedulerName := ""
	priority := pgInfo.GetPriority()
	var preemptionPolicy v1.PreemptionPolicy
	validatePod := func(pod *v1.Pod) error {
		if pod.Spec.SchedulerName != schedulerName {
			return fmt.Errorf("all pods in a single pod group should have the same .spec.schedulerName set, got: %q and %q", pod.Spec.SchedulerName, schedulerName)
		}
		if p := corev1helpers.PodPriority(pod); p != priority {
			return fmt.Errorf("all pods in a single pod group should have the same priority as the pod group's priority, got %d and %d", p, priority)
		}
		policy := v1.PreemptLowerPriority
		if pod.Spec.PreemptionPolicy != nil {
			policy = *pod.Spec.PreemptionPolicy
		}
		if preemptionPolicy == "" {
			preemptionPolicy = policy
		} else if policy != preemptionPolicy {
			return fmt.Errorf("all pods in a single pod group should have the same preemption policy, got %v and %v", policy, preemptionPolicy)
		}
		return nil
	}
	var err error
	pgInfo.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		if schedulerName == "" {
			schedulerName = pInfo.Pod.Spec.SchedulerName
		}
		err = validatePod(pInfo.Pod)
		return err == nil
	})
	if err != nil {
		return "", err
	}
	pgs, err := s.picker.snapshot.PodGroupStates().Get(pgInfo.Namespace, pgInfo.Name)
	if err != nil {
		return "", fmt.Errorf("failed to get pod group state: %w", err)
	}
	for _, pod := range pgs.ScheduledPods() {
		if err := validatePod(pod); err != nil {
			return "", err
		}
	}
	return schedulerName, nil
}

// skipPodGroupPodSchedule drops the pods being deleted or already assumed
// from the cycle; the group's constraints are checked again at
// PlacementFeasible.
func (s *Scheduler) skipPodGroupPodSchedule(ctx context.Context, fwk framework.Framework, pgInfo *framework.QueuedPodGroupInfo) {
	for key, pInfos := range pgInfo.QueuedPodInfos {
		kept := make([]*framework.QueuedPodInfo, 0, len(pInfos))
		for _, pInfo := range pInfos {
			if s.skipPodSchedule(ctx, fwk, pInfo.Pod) {
				s.queue.Done(pInfo.Pod.UID)
				continue
			}
			kept = append(kept, pInfo)
		}
		if len(kept) == len(pInfos) {
			continue
		}
		if len(kept) == 0 {
			delete(pgInfo.QueuedPodInfos, key)
		} else {
			pgInfo.QueuedPodInfos[key] = kept
		}
		if key == pgKey(pgInfo.PodGroupInfo) {
			pgInfo.UnscheduledPods = make([]*v1.Pod, 0, len(kept))
			for _, pInfo := range kept {
				pgInfo.UnscheduledPods = append(pgInfo.UnscheduledPods, pInfo.Pod)
			}
		}
	}
}

// podSchedulingContext is one pod's state in one attempt of a pod-group
// cycle; every attempt of a pod gets a new one.
type podSchedulingContext struct {
	logger         klog.Logger
	state          *framework.CycleState
	podsToActivate *framework.PodsToActivate
}

// initPodSchedulingContext makes the state of one pod's attempt in the
// placement whose state is placementCycleState.
func initPodSchedulingContext(ctx context.Context, pod *v1.Pod, placementCycleState *framework.CycleState) *podSchedulingContext {
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(runtime.ShouldSamplePluginMetrics())
	podsToActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, podsToActivate)
	state.SetPodGroupSchedulingCycle(placementCycleState.GetPodGroupSchedulingCycle())
	state.SetPlacementCycleState(placementCycleState)
	return &podSchedulingContext{
		logger:         klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KObj(pod)),
		state:          state,
		podsToActivate: podsToActivate,
	}
}

// podGroupCycle runs the pod-group algorithm on the updated snapshot,
// PodGroupPostFilter if the group did not fit, and submits the result.
func (s *Scheduler) podGroupCycle(ctx context.Context, ref profiles.Ref, podGroupCycleState *framework.CycleState, pgInfo *framework.QueuedPodGroupInfo, start time.Time) {
	fwk := ref.Framework()
	key := pgKey(pgInfo.PodGroupInfo)
	pgResults := s.runRootSchedulingAlgorithm(ctx, fwk, podGroupCycleState, pgInfo)
	rootStatus := pgResults[key].status
	result := completePodGroupAlgorithmResult(ctx, pgInfo.QueuedPodInfos[key], podGroupCycleState, pgResults[key])
	completed := map[framework.EntityKey]*podGroupAlgorithmResult{key: result}
	s.metrics.PodGroupSchedulingAlgorithmLatency.WithLabelValues().Observe(time.Since(start).Seconds())

	if rootStatus.Code() == framework.Unschedulable {
		pgSchedulingFunc := func(ctx context.Context) (*framework.PodGroupAssignments, *framework.Status) {
			results := s.runRootSchedulingAlgorithm(ctx, fwk, framework.NewCycleState(), pgInfo)
			var proposed []framework.ProposedAssignment
			for _, res := range results {
				proposed = append(proposed, makeProposedAssignments(res)...)
			}
			return &framework.PodGroupAssignments{ProposedAssignments: proposed}, results[key].status
		}
		postResult, status := fwk.RunPodGroupPostFilterPlugins(ctx, podGroupCycleState, pgInfo.PodGroupInfo, pgSchedulingFunc)
		applyPodGroupPostFilterResult(completed, postResult, status)
	}
	s.submitPodGroupAlgorithmResult(ctx, ref, podGroupCycleState, pgInfo, completed, start, rootStatus)
}

// runRootSchedulingAlgorithm runs the algorithm on the root group and
// reverts what it simulated in the snapshot.
func (s *Scheduler) runRootSchedulingAlgorithm(ctx context.Context, fwk framework.Framework, podGroupCycleState *framework.CycleState, pgInfo *framework.QueuedPodGroupInfo) map[framework.EntityKey]*podGroupAlgorithmResult {
	result, reverts := s.podGroupSchedulingAlgorithm(ctx, fwk, podGroupCycleState, pgInfo.PodGroupInfo, pgInfo)
	defer reverts.revert()
	if result.status.IsSuccess() && !result.anyScheduled {
		// A success needs at least one pod placed.
		result.status = framework.NewStatus(framework.Unschedulable).WithError(errPodGroupUnschedulable)
	}
	return map[framework.EntityKey]*podGroupAlgorithmResult{pgKey(result.podGroupInfo): result}
}

// algorithmResult is one pod's outcome in a pod-group cycle.
type algorithmResult struct {
	podInfo            *framework.QueuedPodInfo
	scheduleResult     ScheduleResult
	podCtx             *podSchedulingContext
	schedulingDuration time.Duration
	status             *framework.Status
}

var _ framework.ProposedAssignment = (*algorithmResult)(nil)

func (ar *algorithmResult) GetPod() *v1.Pod                      { return ar.podInfo.Pod }
func (ar *algorithmResult) GetPodInfo() *framework.PodInfo       { return ar.podInfo.PodInfo }
func (ar *algorithmResult) GetNodeName() string                  { return ar.scheduleResult.SuggestedHost }
func (ar *algorithmResult) GetCycleState() *framework.CycleState { return ar.podCtx.state }

// podGroupAlgorithmResult is a group's outcome in a pod-group cycle.
type podGroupAlgorithmResult struct {
	podGroupInfo *framework.PodGroupInfo
	// podResults has one result per pod tried; fewer than the group's
	// pods only when the group is Unschedulable or an Error.
	podResults []algorithmResult
	// status is Success when the group fits without preemption, its
	// feasible pods then go to binding; Unschedulable when it does not
	// (waitingOnPreemption then says whether it waits for victims to
	// go); Error when the cycle failed and no pod is bound.
	status              *framework.Status
	waitingOnPreemption bool
	placementCycleState framework.PlacementCycleState
	// anyScheduled says whether a pod of the group was placed this cycle.
	anyScheduled bool
}

// podGroupSchedulingDefaultAlgorithm places the group's pods one after
// another with the regular filters and scores, each assumed in the
// snapshot for the next, and asks PlacementFeasible before the first and
// after each. The reverts undo the assumed pods; on failure they were
// already run.
func (s *Scheduler) podGroupSchedulingDefaultAlgorithm(ctx context.Context, fwk framework.Framework, placementCycleState *framework.CycleState, pgi *framework.PodGroupInfo, pgInfo *framework.QueuedPodGroupInfo) (result *podGroupAlgorithmResult, reverts revertFns) {
	defer func() {
		if !result.status.IsSuccess() {
			reverts.revert()
			result.anyScheduled = false
		}
	}()
	queuedPodInfos := pgInfo.QueuedPodInfos[pgKey(pgi)]
	result = &podGroupAlgorithmResult{
		podGroupInfo:        pgi,
		podResults:          make([]algorithmResult, 0, len(queuedPodInfos)),
		status:              framework.NewStatus(framework.Unschedulable).WithError(errPodGroupUnschedulable),
		placementCycleState: placementCycleState,
	}
	klog.FromContext(ctx).V(5).Info("Running a pod group scheduling algorithm", "unscheduledPodsCount", len(queuedPodInfos))

	pgs, err := s.picker.snapshot.PodGroupStates().Get(pgi.Namespace, pgi.Name)
	if err != nil {
		result.status = framework.AsStatus(fmt.Errorf("failed to get podGroup state for podGroup %s to compute gang feasibility: %w", klog.KObj(pgi), err))
		return result, nil
	}
	progress := framework.PlacementProgress{Remaining: len(pgi.GetUnscheduledPods()), Scheduled: pgs.ScheduledPodsCount()}
	feasible := fwk.RunPlacementFeasiblePlugins(ctx, placementCycleState, pgi, progress)
	result.status = feasible
	if feasible.IsError() {
		result.status = framework.AsStatus(fmt.Errorf("failed to evaluate placement feasibility: %w", feasible.AsError()))
		return result, nil
	}
	if feasible.Code() == framework.Unschedulable {
		// The group cannot meet its constraints even if every pod fits.
		result.status = framework.NewStatus(framework.Unschedulable, result.status.Reasons()...).WithError(errPodGroupUnschedulable)
		return result, nil
	}

	anyScheduled := false
	for _, pInfo := range queuedPodInfos {
		podResult, revert := s.podGroupPodSchedulingAlgorithm(ctx, fwk, placementCycleState, pInfo)
		result.podResults = append(result.podResults, podResult)
		if revert != nil {
			reverts = append(reverts, revert)
		}
		if !podResult.status.IsSuccess() && !podResult.status.IsRejected() {
			result.status = framework.AsStatus(fmt.Errorf("failed to schedule other pod from a pod group: %w", podResult.status.AsError()))
			break
		}
		progress.Remaining--
		if podResult.status.IsSuccess() {
			progress.Scheduled++
		}
		feasible := fwk.RunPlacementFeasiblePlugins(ctx, placementCycleState, pgi, progress)
		if feasible.IsError() {
			result.status = framework.AsStatus(fmt.Errorf("failed to evaluate placement feasibility: %w", feasible.AsError()))
			break
		}
		result.status = feasible
		if feasible.Code() == framework.Unschedulable {
			break
		}
		anyScheduled = anyScheduled || podResult.status.IsSuccess()
	}
	if result.status.IsWait() {
		result.status = framework.NewStatus(framework.Unschedulable, result.status.Reasons()...).WithError(errPodGroupUnschedulable)
	}
	result.anyScheduled = anyScheduled
	return result, reverts
}

// podGroupPodSchedulingAlgorithm places one pod of the group and, if it
// fits, assumes it in the snapshot and reserves it; the returned function
// undoes both.
func (s *Scheduler) podGroupPodSchedulingAlgorithm(ctx context.Context, fwk framework.Framework, placementCycleState *framework.CycleState, pInfo *framework.QueuedPodInfo) (algorithmResult, func()) {
	podCtx := initPodSchedulingContext(ctx, pInfo.Pod, placementCycleState)
	ctx = klog.NewContext(ctx, podCtx.logger)
	start := time.Now()
	podCtx.logger.V(4).Info("Attempting to schedule a pod belonging to a pod group")
	res := algorithmResult{podInfo: pInfo, podCtx: podCtx}
	scheduleResult, status := s.schedulingAlgorithm(ctx, podCtx.state, fwk, pInfo)
	res.scheduleResult, res.status = scheduleResult, status
	if !status.IsSuccess() {
		res.schedulingDuration = time.Since(start)
		return res, nil
	}
	assumed, status := s.assumeAndReserve(ctx, podCtx.state, fwk, pInfo, scheduleResult)
	res.schedulingDuration = time.Since(start)
	if !status.IsSuccess() {
		res.scheduleResult, res.status = ScheduleResult{nominatingInfo: clearNominatedNode}, status
		return res, nil
	}
	return res, func() {
		if err := s.unreserveAndForget(ctx, podCtx.state, fwk, assumed, scheduleResult.SuggestedHost); err != nil {
			podCtx.logger.Error(err, "ForgetPod failed")
		}
	}
}

// completePodGroupAlgorithmResult gives every queued pod of the group a
// result, the group's status for those not tried.
func completePodGroupAlgorithmResult(ctx context.Context, queuedPodInfos []*framework.QueuedPodInfo, podGroupCycleState *framework.CycleState, result *podGroupAlgorithmResult) *podGroupAlgorithmResult {
	tried := len(result.podResults)
	if tried == len(queuedPodInfos) {
		return result
	}
	results := make([]algorithmResult, len(queuedPodInfos))
	copy(results, result.podResults)
	for i := tried; i < len(queuedPodInfos); i++ {
		pInfo := queuedPodInfos[i]
		placementCycleState := framework.NewCycleState()
		placementCycleState.SetPodGroupSchedulingCycle(podGroupCycleState)
		results[i] = algorithmResult{
			podInfo: pInfo,
			podCtx:  initPodSchedulingContext(ctx, pInfo.Pod, placementCycleState),
			status:  result.status.Clone(),
		}
	}
	result.podResults = results
	return result
}

// applyPodGroupPostFilterResult records what PodGroupPostFilter found:
// on success the group waits for preemption, with the nominations it got;
// its status joins the group's, or replaces it when it is an Error.
func applyPodGroupPostFilterResult(results map[framework.EntityKey]*podGroupAlgorithmResult, postResult *framework.PodGroupPostFilterResult, status *framework.Status) {
	if status.IsSuccess() {
		for _, res := range results {
			res.waitingOnPreemption = true
			if postResult == nil {
				continue
			}
			for i := range res.podResults {
				pod := res.podResults[i].podInfo.Pod
				if ni, ok := postResult.NominatingInfos[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]; ok {
					res.podResults[i].scheduleResult.nominatingInfo = ni
				}
			}
		}
	}
	for _, res := range results {
		if status.IsError() {
			res.status = status
		} else {
			res.status.AppendReason(status.String())
		}
	}
}

// submitPodGroupAlgorithmResult sends the group's feasible pods to their
// binding cycles when it fits, requeues the others, writes the PodGroup's
// PodGroupInitiallyScheduled condition, and hands the group back to the
// queue. When the group waits for preemption, every pod is requeued for
// the next cycle to check the outcome.
func (s *Scheduler) submitPodGroupAlgorithmResult(ctx context.Context, ref profiles.Ref, podGroupCycleState *framework.CycleState, pgInfo *framework.QueuedPodGroupInfo, results map[framework.EntityKey]*podGroupAlgorithmResult, start time.Time, rootStatus *framework.Status) {
	logger := klog.FromContext(ctx)
	fwk := ref.Framework()
	for _, pgResult := range results {
		pgi := pgResult.podGroupInfo
		queuedPodInfos := pgInfo.QueuedPodInfos[pgKey(pgi)]
		if len(pgResult.podResults) != len(queuedPodInfos) {
			logger.Error(errors.New("some pods were not processed"), "scheduling error for pod group")
			pgResult.status = framework.NewStatus(framework.Error, "scheduling error for pod group, some pods were not processed")
			pgResult.podResults = nil
			completePodGroupAlgorithmResult(ctx, queuedPodInfos, podGroupCycleState, pgResult)
		}
		var scheduledPods, unschedulablePods int
		for i, pInfo := range queuedPodInfos {
			podResult := pgResult.podResults[i]
			podCtx := podResult.podCtx
			ctx := klog.NewContext(ctx, podCtx.logger)
			// As for a single pod, the attempt started the pod's
			// scheduling time ago.
			podStart := time.Now().Add(-podResult.schedulingDuration)
			switch {
			case pgResult.status.IsError():
				status := pgResult.status
				if podResult.status.IsError() {
					status = podResult.status
				}
				s.handleSchedulingFailure(ctx, fwk, pInfo, status, clearNominatedNode, podStart)
			case !podResult.status.IsSuccess():
				s.handleSchedulingFailure(ctx, fwk, pInfo, podResult.status, podResult.scheduleResult.nominatingInfo, podStart)
				unschedulablePods++
			case pgResult.status.IsSuccess():
				// The pod leaves the group's cycle: it is assumed in
				// the cache and bound as any pod.
				podCtx.state.SetPodGroupSchedulingCycle(nil)
				assumed, status := s.prepareForBindingCycle(ctx, podCtx.state, fwk, pInfo, podCtx.podsToActivate, podResult.scheduleResult)
				if !status.IsSuccess() {
					s.handleSchedulingFailure(ctx, fwk, pInfo, status, clearNominatedNode, podStart)
					unschedulablePods++
					continue
				}
				s.runBindingCycle(ctx, ref.Hold(), podCtx.state, podResult.scheduleResult, assumed, podStart, podCtx.podsToActivate)
				scheduledPods++
			case pgResult.status.IsRejected():
				if pgResult.waitingOnPreemption {
					s.handleSchedulingFailure(ctx, fwk, pInfo, pgResult.status, podResult.scheduleResult.nominatingInfo, podStart)
				} else {
					status := framework.NewStatus(framework.Unschedulable, pgResult.status.Message()).WithError(errPodGroupUnschedulable)
					s.handleSchedulingFailure(ctx, fwk, pInfo, status, clearNominatedNode, podStart)
				}
				unschedulablePods++
			default:
				err := fmt.Errorf("received unexpected pod group scheduling algorithm status code: %s", pgResult.status.Code())
				s.handleSchedulingFailure(ctx, fwk, pInfo, framework.AsStatus(err), clearNominatedNode, podStart)
				unschedulablePods++
			}
		}

		condition := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse}
		switch {
		case pgResult.status.IsSuccess():
			condition.Status, condition.Reason, condition.Message = metav1.ConditionTrue, "Scheduled", pgResult.status.Message()
			logger.V(2).Info("Successfully scheduled a pod group", "scheduledPods", scheduledPods, "unschedulablePods", unschedulablePods)
		case pgResult.status.IsRejected():
			condition.Reason, condition.Message = schedulingv1beta1.PodGroupReasonUnschedulable, pgResult.status.Message()
			if pgResult.waitingOnPreemption {
				logger.V(2).Info("Pod group is waiting for preemption", "unschedulablePods", unschedulablePods, "err", pgResult.status.Message())
			} else {
				logger.V(2).Info("Unable to schedule a pod group", "unschedulablePods", unschedulablePods, "err", pgResult.status.Message())
			}
		default:
			condition.Reason, condition.Message = schedulingv1beta1.PodGroupReasonSchedulerError, pgResult.status.AsError().Error()
			logger.Error(pgResult.status.AsError(), "Error scheduling pod group", "errorPods", len(queuedPodInfos))
		}
		s.updatePodGroupCondition(ctx, pgi, condition)
	}

	root := results[pgKey(pgInfo.PodGroupInfo)]
	result := errorResult
	switch {
	case root.status.IsSuccess():
		result = scheduledResult
	case root.status.IsRejected() && root.waitingOnPreemption:
		result = waitingOnPreemptionResult
	case root.status.IsRejected():
		result = unschedulableResult
	}
	s.observePodGroupAttempt(result, fwk.ProfileName(), time.Since(start).Seconds())

	if err := s.queue.AddAttemptedPodGroupIfNeeded(logger, pgInfo, s.queue.SchedulingCycle(), rootStatus); err != nil {
		logger.Error(err, "Failed to add attempted pod group to scheduling queue")
	}
}

// podGroupSchedulingAlgorithm places the group's pods by placement when
// the profile runs TopologyAwareWorkloadScheduling's points (upstream
// decides by the gate, for every profile), else in the one implicit
// placement of every node. The
// reverts undo what the returned result assumed in the snapshot.
func (s *Scheduler) podGroupSchedulingAlgorithm(ctx context.Context, fwk framework.Framework, podGroupCycleState *framework.CycleState, pgi *framework.PodGroupInfo, pgInfo *framework.QueuedPodGroupInfo) (*podGroupAlgorithmResult, revertFns) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if fwk.HasPlacementPlugins() {
		return s.podGroupSchedulingPlacementAlgorithm(ctx, fwk, podGroupCycleState, pgi, pgInfo)
	}
	placementCycleState := framework.NewCycleState()
	placementCycleState.SetPodGroupSchedulingCycle(podGroupCycleState)
	return s.podGroupSchedulingDefaultAlgorithm(ctx, fwk, placementCycleState, pgi, pgInfo)
}

// podGroupSchedulingPlacementAlgorithm tries the group in each placement
// the PlacementGenerate plugins propose, and keeps the best-scored of
// those it fits in. Nothing stays assumed: the pods are assumed again on
// their way to binding.
func (s *Scheduler) podGroupSchedulingPlacementAlgorithm(ctx context.Context, fwk framework.Framework, podGroupCycleState *framework.CycleState, pgi *framework.PodGroupInfo, pgInfo *framework.QueuedPodGroupInfo) (finalResult *podGroupAlgorithmResult, reverts revertFns) {
	logger := klog.FromContext(ctx)
	snapshot := s.picker.snapshot
	allNodes, err := snapshot.ListNodesInPlacement()
	if err != nil {
		return &podGroupAlgorithmResult{podGroupInfo: pgi, status: framework.AsStatus(fmt.Errorf("failed to list node infos: %w", err))}, nil
	}
	// Always recorded for now, as upstream.
	podGroupCycleState.SetRecordPluginMetrics(true)
	placements, status := fwk.RunPlacementGeneratePlugins(ctx, podGroupCycleState, pgi, allNodes)
	if !status.IsSuccess() {
		return &podGroupAlgorithmResult{podGroupInfo: pgi, status: status}, nil
	}
	s.metrics.GeneratedPlacementsTotal.WithLabelValues(fwk.ProfileName()).Add(float64(len(placements)))

	var anyResult *podGroupAlgorithmResult
	successful := make(map[*framework.Placement]*podGroupAlgorithmResult)
	parent := snapshot.GetPlacement()
	defer func() {
		snapshot.ForgetPlacement()
		if err := snapshot.AssumePlacement(parent); err != nil {
			finalResult.status = framework.AsStatus(fmt.Errorf("failed to restore parent pod group placement: %w", err))
			reverts.revert()
		}
	}()
	for _, placement := range placements {
		logger.V(4).Info("Assuming placement in snapshot", "placement", placement.Name)
		evaluationStart := time.Now()
		if err := snapshot.AssumePlacement(placement); err != nil {
			return &podGroupAlgorithmResult{podGroupInfo: pgi, status: framework.AsStatus(fmt.Errorf("failed to assume pod group placement: %w", err))}, nil
		}
		placementCycleState := framework.NewCycleState()
		placementCycleState.SetPodGroupSchedulingCycle(podGroupCycleState)
		result, placementReverts := s.podGroupSchedulingDefaultAlgorithm(ctx, fwk, placementCycleState, pgi, pgInfo)
		placementReverts.revert()
		if result.status.IsError() {
			return result, nil
		}
		if anyResult == nil {
			anyResult = result
		}
		evaluation := "infeasible"
		if result.status.IsSuccess() {
			evaluation = "feasible"
			successful[placement] = result
		}
		s.metrics.PlacementEvaluations.WithLabelValues(evaluation, fwk.ProfileName()).Inc()
		s.metrics.PlacementEvaluationDuration.WithLabelValues(evaluation, fwk.ProfileName()).Observe(time.Since(evaluationStart).Seconds())
	}
	if len(successful) == 0 {
		// Which placement's failure is reported is arbitrary, as upstream.
		anyResult.status = framework.NewStatus(framework.Unschedulable, fmt.Sprintf("0/%d placements are available, first placement status: %v", len(placements), anyResult.status.AsError())).WithError(errPodGroupUnschedulable)
		return anyResult, nil
	}
	best, status := s.findBestPodGroupPlacement(ctx, fwk, podGroupCycleState, pgi, successful)
	if !status.IsSuccess() {
		return &podGroupAlgorithmResult{podGroupInfo: pgi, status: status}, nil
	}
	return successful[best], nil
}

// findBestPodGroupPlacement scores the placements the group fits in with
// the PlacementScore plugins and returns the best; ties are broken at
// random, as upstream.
func (s *Scheduler) findBestPodGroupPlacement(ctx context.Context, fwk framework.Framework, podGroupCycleState *framework.CycleState, pgi *framework.PodGroupInfo, successful map[*framework.Placement]*podGroupAlgorithmResult) (*framework.Placement, *framework.Status) {
	if len(successful) == 1 {
		for placement := range successful {
			return placement, nil
		}
	}
	assignments := make([]*framework.PodGroupAssignments, 0, len(successful))
	states := make([]framework.PlacementCycleState, 0, len(successful))
	for placement, result := range successful {
		assignments = append(assignments, &framework.PodGroupAssignments{Placement: placement, ProposedAssignments: makeProposedAssignments(result)})
		states = append(states, result.placementCycleState)
	}
	scores, status := fwk.RunPlacementScorePlugins(ctx, podGroupCycleState, pgi, assignments, states)
	if !status.IsSuccess() {
		return nil, status
	}
	for i := range scores {
		scores[i].Randomizer = rand.Int()
	}
	if v := klog.FromContext(ctx).V(10); v.Enabled() {
		for _, score := range scores {
			for _, ps := range score.Scores {
				v.Info("Plugin scored placement for podGroup", "plugin", ps.Name, "placement", score.Placement.Name, "score", ps.Score)
			}
			v.Info("Calculated placement's final score for podGroup", "placement", score.Placement.Name, "score", score.TotalScore)
		}
	}
	best := &scores[0]
	for i := range scores[1:] {
		score := &scores[i+1]
		if score.TotalScore > best.TotalScore || score.TotalScore == best.TotalScore && score.Randomizer > best.Randomizer {
			best = score
		}
	}
	return best.Placement, nil
}

// makeProposedAssignments lists the pods of a result that found a node.
func makeProposedAssignments(res *podGroupAlgorithmResult) []framework.ProposedAssignment {
	proposed := make([]framework.ProposedAssignment, 0, len(res.podResults))
	for i := range res.podResults {
		if pr := &res.podResults[i]; pr.status.IsSuccess() && pr.GetNodeName() != "" {
			proposed = append(proposed, pr)
		}
	}
	return proposed
}

func pgKey(pgi *framework.PodGroupInfo) framework.EntityKey {
	return framework.PodGroupKey(pgi.Namespace, pgi.Name)
}

// updatePodGroupCondition asks for condition on the group's PodGroup,
// written off the loop (see podGroupStatusUpdater). As upstream, a
// PodGroup once scheduled keeps its True condition: a later cycle for
// extra pods does not regress it.
func (s *Scheduler) updatePodGroupCondition(ctx context.Context, pgi *framework.PodGroupInfo, condition *metav1.Condition) {
	pg := pgi.PodGroup
	if !conditionChanges(pg, condition) {
		return
	}
	klog.FromContext(ctx).V(4).Info("Updating PodGroup condition", "conditionType", condition.Type, "conditionStatus", condition.Status, "conditionReason", condition.Reason)
	s.podGroupStatus.update(pg, condition)
}
