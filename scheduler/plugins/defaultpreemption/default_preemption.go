package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
)

// Name is the plugin's name in profiles and the registry.
const Name = "DefaultPreemption"

// preemptorPod is the preemptor label of the preemption metrics for a
// single pod (upstream's other values are for pod groups, not built).
const preemptorPod = "pod"

// Upstream's v1 defaults for DefaultPreemptionArgs.
const (
	defaultMinCandidateNodesPercentage = 10
	defaultMinCandidateNodesAbsolute   = 100
)

// defaultPreemption is the plugin. Configuration fields are set in New and
// read-only afterwards; the in-flight preemptions have their own lock.
type defaultPreemption struct {
	fh                          framework.Handle
	fts                         feature.Features
	minCandidateNodesPercentage int32
	minCandidateNodesAbsolute   int32
	podLister                   corelisters.PodLister
	pdbLister                   policylisters.PodDisruptionBudgetLister
	// pgLister is the cache's live view of PodGroups and pgSnapshot the
	// cycle's; both are set only with EnableGenericWorkload.
	pgLister   framework.PodGroupLister
	pgSnapshot framework.PodGroupLister
	// bgCtx carries the logger and values of the instance but not its
	// cancellation: a preemption that started deleting victims finishes
	// even if the profile is replaced meanwhile, as upstream's does.
	bgCtx context.Context

	// offset picks where the dry run starts among n potential nodes, so
	// that preemptions spread over the cluster; replaced in tests.
	offset func(n int32) int32

	// mu guards preempting and lastVictims. They are written by the
	// scheduling loop (PostFilter) and the preemption goroutines, and read
	// by PreEnqueue in the queue's event handlers.
	mu sync.RWMutex
	// preempting holds the preemptors whose victims are being evicted.
	preempting map[types.UID]struct{}
	// lastVictims holds, per preemptor, the victim evicted last. Once its
	// deletion is visible in the informer the preemptor may be queued
	// again even though the goroutine has not returned yet: its delete
	// event may already have been handled, and waiting for another would
	// leave the preemptor stuck.
	lastVictims map[types.UID]types.NamespacedName
	// inFlight counts running preemption goroutines; tests wait on it.
	inFlight sync.WaitGroup
}

var (
	_ framework.PostFilterPlugin  = (*defaultPreemption)(nil)
	_ framework.PreEnqueuePlugin  = (*defaultPreemption)(nil)
	_ framework.EnqueueExtensions = (*defaultPreemption)(nil)

	_ framework.PodGroupPostFilterPlugin = (*defaultPreemption)(nil)
)

// New builds the plugin from *configv1.DefaultPreemptionArgs (nil means
// upstream's defaults). The handle must provide a client, an informer
// factory (New registers the Pod and PodDisruptionBudget informers with
// it) and a snapshot lister; with fts.EnableGenericWorkload, also a
// PodGroupManager.
func New(ctx context.Context, obj runtime.Object, h framework.Handle, fts feature.Features) (framework.Plugin, error) {
	args, err := getArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	f := h.SharedInformerFactory()
	if f == nil {
		return nil, errors.New("SharedInformerFactory is nil")
	}
	pl := &defaultPreemption{
		fh:                          h,
		fts:                         fts,
		minCandidateNodesPercentage: *args.MinCandidateNodesPercentage,
		minCandidateNodesAbsolute:   *args.MinCandidateNodesAbsolute,
		podLister:                   f.Core().V1().Pods().Lister(),
		pdbLister:                   f.Policy().V1().PodDisruptionBudgets().Lister(),
		bgCtx:                       context.WithoutCancel(ctx),
		offset:                      rand.N[int32],
		preempting:                  map[types.UID]struct{}{},
		lastVictims:                 map[types.UID]types.NamespacedName{},
	}
	if fts.EnableGenericWorkload {
		m := h.PodGroupManager()
		if m == nil {
			return nil, errors.New("PodGroupManager is nil")
		}
		pl.pgLister = m.PodGroups()
		pl.pgSnapshot = h.SnapshotSharedLister().PodGroups()
	}
	return pl, nil
}

// getArgs returns a defaulted copy of obj.
func getArgs(obj runtime.Object) (*configv1.DefaultPreemptionArgs, error) {
	var args configv1.DefaultPreemptionArgs
	if obj != nil {
		in, ok := obj.(*configv1.DefaultPreemptionArgs)
		if !ok {
			return nil, fmt.Errorf("got args of type %T, want *DefaultPreemptionArgs", obj)
		}
		args = *in.DeepCopy()
	}
	if args.MinCandidateNodesPercentage == nil {
		p := int32(defaultMinCandidateNodesPercentage)
		args.MinCandidateNodesPercentage = &p
	}
	if args.MinCandidateNodesAbsolute == nil {
		a := int32(defaultMinCandidateNodesAbsolute)
		args.MinCandidateNodesAbsolute = &a
	}
	return &args, nil
}

// ValidateArgs checks *configv1.DefaultPreemptionArgs as upstream does:
// percentage in [0, 100], absolute >= 0, not both 0.
func ValidateArgs(args *configv1.DefaultPreemptionArgs) error {
	var errs field.ErrorList
	percentagePath := field.NewPath("minCandidateNodesPercentage")
	absolutePath := field.NewPath("minCandidateNodesAbsolute")
	var pct, abs int32 = -1, -1
	if args.MinCandidateNodesPercentage != nil {
		pct = *args.MinCandidateNodesPercentage
		if pct < 0 || pct > 100 {
			errs = append(errs, field.Invalid(percentagePath, pct, "not in valid range [0, 100]"))
		}
	}
	if args.MinCandidateNodesAbsolute != nil {
		abs = *args.MinCandidateNodesAbsolute
		if abs < 0 {
			errs = append(errs, field.Invalid(absolutePath, abs, "not in valid range [0, inf)"))
		}
	}
	if pct == 0 && abs == 0 {
		errs = append(errs,
			field.Invalid(percentagePath, pct, "cannot be zero at the same time as minCandidateNodesAbsolute"),
			field.Invalid(absolutePath, abs, "cannot be zero at the same time as minCandidateNodesPercentage"))
	}
	return errs.ToAggregate()
}

// Name returns the plugin's name.
func (pl *defaultPreemption) Name() string { return Name }

// PostFilter tries to make room for pod by preemption. It returns Success
// with the nominated node and what it is about to evict, or Unschedulable
// with the reason and, when no node can help, a NominatingInfo clearing
// any earlier nomination; either message is prefixed "preemption: ".
func (pl *defaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, m framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	pl.fh.Metrics().PreemptionAttempts.Inc()
	result, status := pl.preempt(ctx, state, pod, m)
	if msg := status.Message(); msg != "" {
		return result, framework.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

// PreEnqueue keeps a preemptor out of the active queue while its victims
// are being evicted, so that it is not retried before room is made. In a
// workload-aware profile, the pods of a PodGroup wait for their group's
// preemption; a group that is not known is not this plugin's to hold.
func (pl *defaultPreemption) PreEnqueue(_ context.Context, p *v1.Pod) *framework.Status {
	if name, ok := framework.PodGroupNameOf(p); ok && pl.fts.EnableGenericWorkload {
		pg, err := pl.pgLister.Get(p.Namespace, name)
		if err != nil {
			return nil
		}
		if pl.isRunningPreemption(pg.UID) {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for the preemption for this pod group to be finished")
		}
		return nil
	}
	if pl.isRunningPreemption(p.UID) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for the preemption for this pod to be finished")
	}
	return nil
}

// EventsToRegister registers victim deletions (bound pods only, as
// upstream since 1.37) so that the queue re-checks the preemptor's gate
// when they happen. The hint always skips: whether the preemptor fits is
// for the plugins that rejected it to decide.
func (pl *defaultPreemption) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: isSchedulableAfterAssignedPodDeletion},
	}, nil
}

func isSchedulableAfterAssignedPodDeletion(klog.Logger, *v1.Pod, any, any) (framework.QueueingHint, error) {
	return framework.QueueSkip, nil
}

// calculateNumCandidates is how many candidates the dry run looks for:
// minCandidateNodesPercentage of numNodes, at least
// minCandidateNodesAbsolute, at most numNodes.
func (pl *defaultPreemption) calculateNumCandidates(numNodes int32) int32 {
	n := numNodes * pl.minCandidateNodesPercentage / 100
	n = max(n, pl.minCandidateNodesAbsolute)
	return min(n, numNodes)
}

// isPreemptionAllowed: only victims of lower priority may be preempted.
func isPreemptionAllowed(v *victim, preemptor *v1.Pod) bool {
	return v.priority < corev1helpers.PodPriority(preemptor)
}

// podEligibleToPreemptOthers reports whether pod may preempt, and why not.
func (pl *defaultPreemption) podEligibleToPreemptOthers(pod *v1.Pod, nominatedNodeStatus *framework.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" {
		return true, ""
	}
	// The nominated node cannot take the pod any more whatever is removed
	// (e.g. its labels changed): preempt elsewhere.
	if nominatedNodeStatus.Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	// Victims of the earlier preemption are still terminating: wait for
	// them rather than evict more pods.
	if ni, err := pl.fh.SnapshotSharedLister().NodeInfos().Get(nominated); err == nil && ni != nil {
		now := time.Now()
		for _, pi := range ni.Pods {
			if isPreemptionAllowed(newPodVictim(pi, pl.pgSnapshot, now), pod) && podTerminatingByPreemption(pi.Pod) {
				return false, "not eligible due to a terminating pod on the nominated node."
			}
		}
	}
	return true, ""
}

// podTerminatingByPreemption reports whether p is being deleted because
// the scheduler preempted it.
func podTerminatingByPreemption(p *v1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// preempt is upstream's Evaluator.Preempt. The status codes mean:
// Error: transient, retry later; Unschedulable with a nil result: wait
// (e.g. for victims to terminate), keep the nomination; Unschedulable
// with a result: preemption cannot help, clear the nomination; Success:
// nominate result's node.
func (pl *defaultPreemption) preempt(ctx context.Context, state *framework.CycleState, pod *v1.Pod, m framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	best, result, status := pl.evaluate(ctx, state, pod, m)
	if !status.IsSuccess() {
		return result, status
	}
	pl.actuateAsync(best, podPreemptor{pod})
	// Since 1.37 the success carries a message, which the scheduling loop
	// appends to the pod's FailedScheduling event and PodScheduled
	// condition. It counts every victim, those already terminating too.
	return &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatedNodeName: best.name, NominatingMode: framework.ModeOverride}},
		framework.NewStatus(framework.Success, fmt.Sprintf("found a potential placement for pod on node %v, preempting %d victims", best.name, len(best.victims)))
}

// evaluate picks the node and the victims without evicting anything
// (upstream's Evaluator.evaluate); its duration and outcome are
// scheduler_preemption_evaluation_duration_seconds. On failure it returns
// the result preempt must return.
func (pl *defaultPreemption) evaluate(ctx context.Context, state *framework.CycleState, pod *v1.Pod, m framework.NodeToStatusReader) (_ *candidate, _ *framework.PostFilterResult, status *framework.Status) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		pl.fh.Metrics().PreemptionEvaluationDuration.WithLabelValues(preemptorPod, status.Code().String()).Observe(time.Since(start).Seconds())
	}()

	// The pod may have changed since it was popped (e.g. its nomination
	// was cleared by another preemption); decide on the latest version.
	ns, name := pod.Namespace, pod.Name
	pod, err := pl.podLister.Pods(ns).Get(name)
	if err != nil {
		logger.Error(err, "Could not get the updated preemptor pod object", "pod", klog.KRef(ns, name))
		return nil, nil, framework.AsStatus(err)
	}

	if ok, msg := pl.podEligibleToPreemptOthers(pod, m.Get(pod.Status.NominatedNodeName)); !ok {
		logger.V(5).Info("Pod is not eligible for preemption", "pod", klog.KObj(pod), "reason", msg)
		return nil, nil, framework.NewStatus(framework.Unschedulable, msg)
	}

	allNodes, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, nil, framework.AsStatus(err)
	}
	candidates, nodeStatuses, err := pl.findCandidates(ctx, state, allNodes, pod, m)
	if err != nil && len(candidates) == 0 {
		return nil, nil, framework.AsStatus(err)
	}
	if len(candidates) == 0 {
		logger.V(2).Info("No preemption candidate is found; preemption is not helpful for scheduling", "pod", klog.KObj(pod))
		nodeStatuses.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable, "Preemption is not helpful for scheduling"))
		fitErr := &framework.FitError{Pod: pod, NumAllNodes: len(allNodes), Diagnosis: framework.Diagnosis{NodeToStatus: nodeStatuses}}
		return nil, &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatingMode: framework.ModeOverride}},
			framework.NewStatus(framework.Unschedulable, fitErr.Error())
	}

	candidates, err = pl.callExtenders(ctx, pod, candidates)
	if err != nil {
		return nil, nil, framework.AsStatus(err)
	}

	best := selectCandidate(logger, candidates)
	if best == nil || best.name == "" {
		return nil, nil, framework.NewStatus(framework.Unschedulable, "no candidate node for preemption")
	}
	logger.V(2).Info("The target node for the preemption is determined", "node", best.name, "pod", klog.KObj(pod))
	return best, nil, nil
}

// callExtenders lets the profile's extenders that handle preemption narrow
// the candidates and change their victims, as upstream's Evaluator does
// before it picks the best candidate.
func (pl *defaultPreemption) callExtenders(ctx context.Context, pod *v1.Pod, candidates []*candidate) ([]*candidate, error) {
	exts := pl.fh.Extenders()
	if len(exts) == 0 {
		return candidates, nil
	}
	victims := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		victims[c.name] = &extenderv1.Victims{Pods: c.victims, NumPDBViolations: c.numPDBViolations}
	}
	victims, err := extender.ProcessPreemption(ctx, exts, pod, victims)
	if err != nil {
		return nil, err
	}
	out := make([]*candidate, 0, len(victims))
	for name, v := range victims {
		out = append(out, &candidate{name: name, victims: v.Pods, numPDBViolations: v.NumPDBViolations})
	}
	return out, nil
}
