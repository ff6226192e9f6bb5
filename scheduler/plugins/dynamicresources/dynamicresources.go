package dynamicresources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
)

const (
	// Name is the plugin's name in registries and profiles.
	Name = "DynamicResources"

	stateKey framework.StateKey = Name

	// bindingConditionsPollInterval is how often PreBind checks the
	// binding conditions of allocated devices, as upstream.
	bindingConditionsPollInterval = 5 * time.Second
)

var (
	// ErrDeviceBindingTimeout is the cause of PreBind's failure when
	// binding conditions were not met within the binding timeout.
	ErrDeviceBindingTimeout = errors.New("device binding timeout")
	// ErrDeviceBindingFailed is the cause of PreBind's failure when a
	// binding failure condition became true.
	ErrDeviceBindingFailed = errors.New("device binding failed")

	errNoManager = errors.New("the scheduler provides no DRA manager to this profile instance")
)

// stateData is written in PreFilter and shared, by pointer, by the later
// extension points of the cycle and its binding cycle.
type stateData struct {
	// claims holds the pod's claims (1:1 with pod.spec.resourceClaims that
	// have one), then the special claim of its extended resources backed
	// by DRA, if any, as of PreFilter. Each claim is read-only because it
	// may come from the informer; PreBind replaces the ones it wrote.
	// Empty if the pod has neither, in which case the plugin has no work.
	claims claimStore

	// draExtendedResource is what PreFilter learnt of the pod's extended
	// resources backed by DRA; empty without a special claim.
	draExtendedResource draExtendedResource

	// allocator handles the claims to allocate; nil when all are allocated.
	allocator structured.Allocator

	// mutex guards unavailableClaims and nodeAllocations, written by the
	// parallel Filter calls.
	mutex sync.Mutex

	// unavailableClaims are the indices of claims that are allocated and
	// were not available on at least one node. PostFilter reads them.
	unavailableClaims sets.Set[int]

	// informationsForClaim has one entry per claim.
	informationsForClaim []informationForClaim

	// nodeAllocations caches Filter's results per node name.
	nodeAllocations map[string]nodeAllocation
}

// nodeAllocation is what Filter found for one node.
type nodeAllocation struct {
	// allocationResults match the order of the claims to allocate.
	allocationResults []resourceapi.AllocationResult
	// extendedResourceClaim is the node's variant of the special claim,
	// with the device requests the node serves through DRA.
	extendedResourceClaim *resourceapi.ResourceClaim
	// containerResourceRequestMappings say which of those requests
	// serves which container's resource; PreBind writes them to the
	// pod's status.
	containerResourceRequestMappings []v1.ContainerExtendedResourceRequest
}

// Clone returns d itself: nothing is changed by preemption's clones.
func (d *stateData) Clone() framework.StateData {
	return d
}

type informationForClaim struct {
	// availableOnNodes is the node selector of the claim's allocation, if allocated.
	availableOnNodes *nodeaffinity.NodeSelector

	// allocation is set by Reserve, published by PreBind, nil if nothing
	// had to be allocated.
	allocation *resourceapi.AllocationResult
}

// dynamicResources is the plugin. It keeps no state of its own between
// cycles: claims, in-flight allocations and slices are in the scheduler's
// shared DRA manager.
type dynamicResources struct {
	filterTimeout  time.Duration
	bindingTimeout time.Duration
	fh             framework.Handle
	clientset      kubernetes.Interface
	celCache       *cel.Cache
	draManager     framework.SharedDRAManager
}

var (
	_ framework.PreEnqueuePlugin         = (*dynamicResources)(nil)
	_ framework.PreFilterPlugin          = (*dynamicResources)(nil)
	_ framework.FilterPlugin             = (*dynamicResources)(nil)
	_ framework.PostFilterPlugin         = (*dynamicResources)(nil)
	_ framework.PodGroupPostFilterPlugin = (*dynamicResources)(nil)
	_ framework.ScorePlugin              = (*dynamicResources)(nil)
	_ framework.ReservePlugin            = (*dynamicResources)(nil)
	_ framework.PreBindPlugin            = (*dynamicResources)(nil)
	_ framework.EnqueueExtensions        = (*dynamicResources)(nil)
)

// New builds the plugin from *configv1.DynamicResourcesArgs, defaulted by
// the runtime. It reads claims, slices and classes through the handle's
// SharedDRAManager. An instance built without one (to validate a profile)
// refuses pods with claims; it never reads the manager for other pods.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args, ok := obj.(*configv1.DynamicResourcesArgs)
	if !ok {
		return nil, fmt.Errorf("got args of type %T, want *DynamicResourcesArgs", obj)
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	pl := &dynamicResources{
		fh:        h,
		clientset: h.ClientSet(),
		// An LRU cache of compiled CEL expressions: the most recent 10
		// are reused across scheduling cycles.
		celCache:   cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}),
		draManager: h.SharedDRAManager(),
	}
	if args.FilterTimeout != nil {
		pl.filterTimeout = args.FilterTimeout.Duration
	}
	pl.bindingTimeout = configv1.DynamicResourcesBindingTimeoutDefault
	if args.BindingTimeout != nil {
		pl.bindingTimeout = args.BindingTimeout.Duration
	}
	return pl, nil
}

// ValidateArgs checks *configv1.DynamicResourcesArgs as kube-scheduler
// 1.37 does with its default gates (DRASchedulerFilterTimeout,
// DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on).
func ValidateArgs(args *configv1.DynamicResourcesArgs) error {
	var allErrs field.ErrorList
	if args.FilterTimeout != nil && args.FilterTimeout.Duration < 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("filterTimeout"), args.FilterTimeout, "must be zero or positive"))
	}
	if args.BindingTimeout != nil && args.BindingTimeout.Duration < time.Second {
		allErrs = append(allErrs, field.Invalid(field.NewPath("bindingTimeout"), args.BindingTimeout, "must be at least 1 second"))
	}
	return allErrs.ToAggregate()
}

// Name returns the plugin's name.
func (pl *dynamicResources) Name() string { return Name }

// EventsToRegister returns upstream's events that may make a pod this
// plugin rejected schedulable.
func (pl *dynamicResources) EventsToRegister(_ context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		// A resource might depend on node labels for topology filtering.
		// A new or updated node may make pods schedulable.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel | framework.UpdateNodeAllocatable}},
		// Allocation is tracked in ResourceClaims, so any changes may make the pods schedulable.
		{Event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add | framework.Update | framework.Delete}, QueueingHintFn: pl.isSchedulableAfterClaimChange},
		// Adding the ResourceClaim name to the pod status makes pods waiting for their ResourceClaim schedulable.
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodGeneratedResourceClaim}, QueueingHintFn: pl.isSchedulableAfterTargetPodUpdate},
		// A pod might be waiting for a class to get created or modified.
		{Event: framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Add | framework.Update}},
		// Adding or updating a ResourceSlice might make a pod schedulable because new resources became available.
		{Event: framework.ClusterEvent{Resource: framework.ResourceSlice, ActionType: framework.Add | framework.Update}},
	}, nil
}

// PreEnqueue keeps a pod out of the active queue while one of its claims
// is missing, being deleted or not owned by the pod as it should be. One of
// the registered events triggers another attempt.
func (pl *dynamicResources) PreEnqueue(ctx context.Context, pod *v1.Pod) *framework.Status {
	if err := pl.foreachPodResourceClaim(pod, nil); err != nil {
		return statusUnschedulable(klog.FromContext(ctx), err.Error())
	}
	return nil
}

// PreFilter reads the pod's claims, refuses pods whose claims are in use
// by others, in flight (unless an earlier pod of the same pod-group cycle
// made the allocation) or ask for a missing class, and sets up the
// allocator for the claims to allocate. Pods without claims skip the
// plugin.
func (pl *dynamicResources) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	logger := klog.FromContext(ctx)

	// An empty state records that the pod has no claims for the later
	// extension points; it is filled below if we get that far.
	s := &stateData{nodeAllocations: make(map[string]nodeAllocation)}
	state.Write(stateKey, s)

	// In a pod-group cycle, the group's state keeps each pod's, for
	// PodGroupPostFilter, and the allocations its pods share.
	podGroupState, err := getOrCreatePodGroupStateData(state)
	if err != nil {
		return nil, statusError(logger, err)
	}
	if podGroupState != nil {
		podGroupState.podsStateData[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = s
	}

	userClaims, err := pl.podResourceClaims(pod)
	if err != nil {
		return nil, statusUnschedulable(logger, err.Error())
	}
	logger.V(5).Info("pod resource claims", "pod", klog.KObj(pod), "resourceclaims", klog.KObjSlice(userClaims))
	extendedResourceClaim, status := pl.preFilterExtendedResources(pod, logger, s)
	if status != nil {
		return nil, status
	}
	claims := newClaimStore(userClaims, extendedResourceClaim)
	if claims.empty() {
		return nil, framework.NewStatus(framework.Skip)
	}

	numClaimsToAllocate := 0
	s.informationsForClaim = make([]informationForClaim, claims.len())
	for index, claim := range claims.all() {
		if claim.Status.Allocation != nil &&
			!resourceclaim.CanBeReserved(claim) &&
			!resourceclaim.IsReservedForPod(pod, claim, false) {
			// Resource is in use. The pod has to wait.
			return nil, statusUnschedulable(logger, "resourceclaim in use", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(claim))
		}

		if claim.Status.Allocation != nil {
			nodeSelector, err := nodeSelectorFromAllocation(claim.Status.Allocation)
			if err != nil {
				return nil, statusError(logger, err)
			}
			s.informationsForClaim[index].availableOnNodes = nodeSelector
			continue
		}
		numClaimsToAllocate++

		// A gang is bound once all its pods got through Reserve, but a
		// claim's allocation is only written in PreBind: a pod sharing a
		// claim whose allocation an earlier pod of the same pod-group
		// cycle made in Reserve takes that allocation rather than wait.
		// It is not input to the allocator, but still counts as a claim
		// to allocate, so that PreBind writes it if this pod comes first.
		// Only the cycle's own pods share it, as upstream: pods of other
		// cycles, or alone, wait below.
		if podGroupState != nil && podGroupState.pendingAllocations[claim.UID] != nil {
			if pendingAllocation := pl.draManager.ResourceClaims().GetPendingAllocation(claim.UID); pendingAllocation != nil {
				s.informationsForClaim[index].allocation = pendingAllocation
				nodeSelector, err := nodeSelectorFromAllocation(pendingAllocation)
				if err != nil {
					return nil, statusError(logger, err)
				}
				s.informationsForClaim[index].availableOnNodes = nodeSelector
				logger.V(5).Info("reusing pending allocation", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(claim), "uid", claim.UID, "allocation", klog.Format(pendingAllocation))
				continue
			}
		}

		// Allocation in flight? Better wait for that to finish, see
		// claimTracker.
		if pl.draManager.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			return nil, statusUnschedulable(logger, fmt.Sprintf("resource claim %s is in the process of being allocated", klog.KObj(claim)))
		}

		// The special claim has no requests yet (Filter makes them per
		// node), or is from a previous cycle, which Filter refuses.
		if claim == extendedResourceClaim {
			continue
		}

		// Check all requests and device classes. If a class does not
		// exist, scheduling cannot proceed.
		for _, request := range claim.Spec.Devices.Requests {
			switch {
			case request.Exactly != nil:
				if status := pl.validateDeviceClass(logger, request.Exactly.DeviceClassName, request.Name); status != nil {
					return nil, status
				}
			case len(request.FirstAvailable) > 0:
				for _, subRequest := range request.FirstAvailable {
					qualRequestName := strings.Join([]string{request.Name, subRequest.Name}, "/")
					if status := pl.validateDeviceClass(logger, subRequest.DeviceClassName, qualRequestName); status != nil {
						return nil, status
					}
				}
			default:
				return nil, statusUnschedulable(logger, fmt.Sprintf("resource claim %s, request %s: unknown request type", klog.KObj(claim), request.Name))
			}
		}
	}

	if numClaimsToAllocate > 0 {
		if loggerV := logger.V(5); loggerV.Enabled() {
			claimsToAllocate := make([]*resourceapi.ResourceClaim, 0, claims.len())
			for _, claim := range claims.toAllocate() {
				claimsToAllocate = append(claimsToAllocate, claim)
			}
			loggerV.Info("Preparing allocation with structured parameters", "pod", klog.KObj(pod), "resourceclaims", klog.KObjSlice(claimsToAllocate))
		}

		// Claims (and their devices) count as allocated if the claim
		// cache shows them allocated or their allocation is in flight.
		// That does not change during filtering, so it is gathered once,
		// retried in the unlikely case of a concurrent modification.
		var allocatedState *structured.AllocatedState
		err = wait.PollUntilContextTimeout(ctx, time.Microsecond, 5*time.Second, true /* immediate */, func(context.Context) (bool, error) {
			allocatedState, err = pl.draManager.ResourceClaims().GatherAllocatedState()
			if errors.Is(err, concurrentModificationError{}) {
				logger.V(6).Info("Conflicting modification during GatherAllocatedState, trying again")
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if allocatedState == nil {
				return false, errors.New("nil allocated state")
			}
			return true, nil
		})
		if err != nil {
			return nil, statusError(logger, fmt.Errorf("gather allocation state: %w", err))
		}
		slices, err := pl.draManager.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return nil, statusError(logger, err)
		}
		allocator, err := structured.NewAllocator(ctx, feature.AllocatorFeatures(), *allocatedState, pl.draManager.DeviceClasses(), slices, pl.celCache)
		if err != nil {
			return nil, statusError(logger, err)
		}
		s.allocator = allocator
	}
	s.claims = claims
	return nil, nil
}

func (pl *dynamicResources) validateDeviceClass(logger klog.Logger, deviceClassName, requestName string) *framework.Status {
	if deviceClassName == "" {
		return statusError(logger, fmt.Errorf("request %s: unsupported request type", requestName))
	}
	if _, err := pl.draManager.DeviceClasses().Get(deviceClassName); apierrors.IsNotFound(err) {
		// Unschedulable, so the pod sleeps in the unschedulable queue
		// until a DeviceClass event occurs.
		return statusUnschedulable(logger, fmt.Sprintf("request %s: device class %s does not exist", requestName, deviceClassName))
	}
	return nil
}

// PreFilterExtensions returns nil: claims do not depend on other pods.
func (pl *dynamicResources) PreFilterExtensions() framework.PreFilterExtensions {
	return nil
}

func getStateData(cs *framework.CycleState) (*stateData, error) {
	state, err := cs.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := state.(*stateData)
	if !ok {
		return nil, errors.New("unable to convert state into stateData")
	}
	return s, nil
}

// Filter checks that the node satisfies the node selector of each
// allocated claim, that allocated claims with binding conditions did not
// fail or time out, and that the allocator finds devices for the claims
// to allocate on the node; the result is kept for Reserve.
func (pl *dynamicResources) Filter(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	state, err := getStateData(cs)
	if err != nil {
		return statusError(klog.FromContext(ctx), err)
	}
	if state.claims.empty() {
		return nil
	}

	logger := klog.FromContext(ctx)
	node := nodeInfo.Node()
	nodeExtendedResourceClaim, containerResourceRequestMappings, status := pl.filterExtendedResources(state, pod, nodeInfo, logger)
	if status != nil {
		return status
	}
	// Only extended resources, all from the node's device plugins: the
	// node's allocatable is NodeResourcesFit's to check.
	if nodeExtendedResourceClaim == nil && state.claims.noUserClaim() {
		return nil
	}

	var unavailableClaims []int
	for index, claim := range state.claims.all() {
		logger.V(10).Info("filtering based on resource claims of the pod", "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaim", klog.KObj(claim))

		// This node selector only gets set if the claim is allocated.
		if nodeSelector := state.informationsForClaim[index].availableOnNodes; nodeSelector != nil && !nodeSelector.Match(node) {
			logger.V(5).Info("allocation's node selector does not match", "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaim", klog.KObj(claim))
			unavailableClaims = append(unavailableClaims, index)
			continue
		}

		// The claim is allocated: is it ready for binding?
		if claim.Status.Allocation != nil {
			ready, err := isClaimReadyForBinding(claim)
			// A claim whose binding failed, or timed out waiting for its
			// conditions, may get deallocated in PostFilter so that other
			// devices can be tried.
			if err != nil {
				logger.V(5).Info("Claim failed binding conditions check", "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaim", klog.KObj(claim), "err", err)
				unavailableClaims = append(unavailableClaims, index)
			} else if !ready && pl.isClaimTimeout(claim) {
				logger.V(5).Info("Claim timed out waiting for binding conditions", "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaim", klog.KObj(claim))
				unavailableClaims = append(unavailableClaims, index)
			}
		}
	}

	// Use the allocator to check the node and cache the result in case the
	// node is picked.
	var allocations []resourceapi.AllocationResult
	if state.allocator != nil {
		allocCtx := ctx
		if loggerV := logger.V(5); loggerV.Enabled() {
			allocCtx = klog.NewContext(allocCtx, klog.LoggerWithValues(logger, "node", klog.KObj(node)))
		}
		if pl.filterTimeout > 0 {
			c, cancel := context.WithTimeout(allocCtx, pl.filterTimeout)
			defer cancel()
			allocCtx = c
		}

		// The special claim is replaced with the node's variant. A claim
		// whose allocation an earlier pod of the pod-group cycle made
		// keeps it (its node selector was checked above).
		claimsToAllocate := make([]*resourceapi.ResourceClaim, 0, state.claims.len())
		// pending has, for each claim to allocate in order, the
		// allocation it reuses, or nil.
		var pending []*resourceapi.AllocationResult
		extendedResourceClaim := state.claims.extendedResourceClaim()
		for index, claim := range state.claims.toAllocate() {
			pendingAlloc := state.informationsForClaim[index].allocation
			pending = append(pending, pendingAlloc)
			if pendingAlloc != nil {
				continue
			}
			if claim == extendedResourceClaim && nodeExtendedResourceClaim != nil {
				claim = nodeExtendedResourceClaim
			}
			claimsToAllocate = append(claimsToAllocate, claim)
		}
		allocationResult, err := state.allocator.Allocate(allocCtx, node, claimsToAllocate)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			// Timeouts are potentially transient: Error retries with
			// backoff instead of waiting for a cluster event. The node
			// name helps to diagnose slow slices.
			return statusError(logger, fmt.Errorf("node %s: timed out trying to allocate devices", node.Name), "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaims", klog.KObjSlice(claimsToAllocate))
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			// Not fatal: other nodes may do. Only surfaced if all fail.
			return statusUnschedulable(logger, err.Error(), "pod", klog.KObj(pod), "node", klog.KObj(node))
		case ctx.Err() != nil:
			return statusUnschedulable(logger, fmt.Sprintf("asked by caller to stop allocating devices: %v", context.Cause(ctx)), "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaims", klog.KObjSlice(claimsToAllocate))
		case err != nil:
			// Something is wrong with the claim or class (a CEL
			// expression, say): abort scheduling of the pod.
			return statusError(logger, err, "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaims", klog.KObjSlice(claimsToAllocate))
		}
		// In practice this is all-or-nothing.
		if len(allocationResult) != len(claimsToAllocate) {
			return statusUnschedulable(logger, "cannot allocate all claims", "pod", klog.KObj(pod), "node", klog.KObj(node), "resourceclaims", klog.KObjSlice(claimsToAllocate))
		}
		// Reserve and Score take the allocations in the order of the
		// claims to allocate. Upstream appends the reused ones after the
		// new ones instead, which gives a pod with both kinds each
		// claim's allocation to another claim; with one kind only, the
		// order is the same.
		allocations = make([]resourceapi.AllocationResult, 0, len(pending))
		for _, pendingAlloc := range pending {
			if pendingAlloc != nil {
				allocations = append(allocations, *pendingAlloc)
				continue
			}
			allocations = append(allocations, allocationResult[0])
			allocationResult = allocationResult[1:]
		}
	}

	if state.allocator == nil && len(unavailableClaims) == 0 {
		return nil
	}
	state.mutex.Lock()
	defer state.mutex.Unlock()
	if len(unavailableClaims) > 0 {
		// Remember them for PostFilter.
		if state.unavailableClaims == nil {
			state.unavailableClaims = sets.New[int]()
		}
		state.unavailableClaims.Insert(unavailableClaims...)
		return statusUnschedulable(logger, "resourceclaim not available on the node", "pod", klog.KObj(pod))
	}
	state.nodeAllocations[node.Name] = nodeAllocation{
		allocationResults:                allocations,
		extendedResourceClaim:            nodeExtendedResourceClaim,
		containerResourceRequestMappings: containerResourceRequestMappings,
	}
	return nil
}

// PostFilter checks whether there are allocated claims that could get
// deallocated to help get the pod schedulable. If yes, it picks one and
// deallocates it. It only runs when filtering found no suitable node; it
// comes before DefaultPreemption, as upstream orders them.
func (pl *dynamicResources) PostFilter(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, _ framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	logger := klog.FromContext(ctx)
	state, err := getStateData(cs)
	if err != nil {
		return nil, statusError(logger, err)
	}
	if state.claims.empty() {
		logger.V(5).Info("No new claims to deallocate", "pod", klog.KObj(pod))
		return nil, framework.NewStatus(framework.Unschedulable)
	}

	return nil, pl.deallocateOrDeletePodClaims(ctx, pod, state)
}

// deallocateOrDeletePodClaims deallocates one of the pod's claims that
// were unavailable on some node and that no other pod uses, or else
// deletes the special claim of a previous cycle. PodGroupPostFilter runs
// it for each pod of a group.
func (pl *dynamicResources) deallocateOrDeletePodClaims(ctx context.Context, pod *v1.Pod, state *stateData) *framework.Status {
	logger := klog.FromContext(ctx)

	// Iterating over a map is random. This is intentional here, we want to
	// pick one claim randomly because there is no better heuristic.
	extendedResourceClaim := state.claims.extendedResourceClaim()
	for index := range state.unavailableClaims {
		claim := state.claims.get(index)
		if claim == extendedResourceClaim {
			if !isSpecialClaimName(extendedResourceClaim.Name) {
				break
			}
			continue
		}
		if len(claim.Status.ReservedFor) == 0 ||
			(len(claim.Status.ReservedFor) == 1 && claim.Status.ReservedFor[0].UID == pod.UID) {
			claim := claim.DeepCopy()
			claim.Status.ReservedFor = nil
			claim.Status.Allocation = nil
			claim.Status.Devices = nil
			logger.V(5).Info("Deallocation of ResourceClaim", "pod", klog.KObj(pod), "resourceclaim", klog.KObj(claim))
			if _, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
				return statusError(logger, err)
			}
			return framework.NewStatus(framework.Unschedulable, "deallocation of ResourceClaim completed")
		}
	}
	// A special claim from a previous cycle, which Filter refused: delete
	// it so that the next attempt starts anew.
	if extendedResourceClaim != nil && !isSpecialClaimName(extendedResourceClaim.Name) {
		if err := pl.deleteClaim(ctx, extendedResourceClaim.DeepCopy()); err != nil {
			return statusError(logger, err)
		}
		return framework.NewStatus(framework.Unschedulable, "deletion of ResourceClaim completed")
	}
	return framework.NewStatus(framework.Unschedulable)
}

// Reserve records the allocations Filter found on the chosen node as in
// flight, so that the following cycles count their devices as taken and
// pods sharing a claim wait for it, except the later pods of the same
// pod-group cycle, which reuse it. Allocated claims are not reserved
// for the pod here: PreBind adds the pod to reservedFor, and if that
// fails another pod was faster and this one is tried again.
func (pl *dynamicResources) Reserve(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	logger := klog.FromContext(ctx)
	state, err := getStateData(cs)
	if err != nil {
		return statusError(logger, err)
	}
	if state.claims.empty() || state.allocator == nil {
		return nil
	}

	extendedResourceClaim := state.claims.extendedResourceClaim()
	numClaimsToAllocate := 0
	needToAllocateUserClaims := false
	for _, claim := range state.claims.toAllocate() {
		numClaimsToAllocate++
		if claim != extendedResourceClaim {
			needToAllocateUserClaims = true
		}
	}
	allocations, ok := state.nodeAllocations[nodeName]
	if !ok || len(allocations.allocationResults) == 0 {
		// Only the special claim, and the node's device plugins provide
		// its resources: nothing to allocate.
		if !needToAllocateUserClaims {
			return nil
		}
		// Filter found the node suitable: this should not happen.
		return statusError(logger, errors.New("claim allocation not found for node"))
	}
	// Sanity check: do we have results for all pending claims?
	if len(allocations.allocationResults) != numClaimsToAllocate {
		return statusError(logger, fmt.Errorf("internal error, have %d allocations, %d claims to allocate, want %d claims", len(allocations.allocationResults), numClaimsToAllocate, numClaimsToAllocate))
	}

	// In a pod-group cycle, the later pods of the cycle sharing a claim
	// reuse the allocation made here (see PreFilter).
	podGroupState, err := getPodGroupStateData(cs)
	if err != nil {
		return statusError(logger, err)
	}
	allocIndex := 0
	for index, claim := range state.claims.toAllocate() {
		allocation := &allocations.allocationResults[allocIndex]
		allocIndex++
		state.informationsForClaim[index].allocation = allocation
		if claim == extendedResourceClaim {
			// The node's variant, with its device requests: Filter made
			// one for every node it let through with an allocation.
			claim = allocations.extendedResourceClaim
		}

		// The full object, not just the allocation, is what the allocator
		// of the next cycles and the logs see.
		claim = claim.DeepCopy()
		if !sets.New(claim.Finalizers...).Has(resourceapi.Finalizer) {
			claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		}
		claim.Status.Allocation = allocation
		if err := pl.draManager.ResourceClaims().SignalClaimPendingAllocation(claim.UID, claim); err != nil {
			return statusError(logger, fmt.Errorf("internal error, couldn't signal allocation for claim %s: %w", claim.Name, err))
		}
		logger.V(5).Info("Reserved resource in allocation result", "claim", klog.KObj(claim), "uid", claim.UID, "resourceVersion", claim.ResourceVersion, "allocation", klog.Format(allocation))
		if podGroupState != nil {
			if _, ok := podGroupState.pendingAllocations[claim.UID]; !ok {
				podGroupState.pendingAllocations[claim.UID] = sets.New[types.UID]()
			}
			podGroupState.pendingAllocations[claim.UID].Insert(pod.UID)
		}
	}
	return nil
}

// Unreserve releases the in-flight allocations of the pod's claims and
// removes the pod from reservedFor of claims PreBind already reserved. It
// is idempotent and does nothing without state for the pod.
func (pl *dynamicResources) Unreserve(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, _ string) {
	state, err := getStateData(cs)
	if err != nil || state.claims.empty() {
		return
	}
	podGroupState, err := getPodGroupStateData(cs)
	if err != nil {
		return
	}
	logger := klog.FromContext(ctx)

	for _, claim := range state.claims.allUserClaims() {
		// If the allocation was in flight, forget it and what the claim
		// cache shows for the claim: the written status, if any, comes
		// back through the informer. An allocation shared by several pods
		// of a pod-group cycle stays in flight until the last of them is
		// unreserved or bound; then the cycle's later pods no longer
		// share it, and allocate the claim anew.
		if deleted := pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(claim.UID, false); deleted {
			logger.V(5).Info("Released resource in allocation result", "claim", klog.KObj(claim), "uid", claim.UID, "resourceVersion", claim.ResourceVersion, "allocation", klog.Format(claim.Status.Allocation))
			pl.draManager.ResourceClaims().AssumedClaimRestore(claim.Namespace, claim.Name)
			if podGroupState != nil {
				delete(podGroupState.pendingAllocations, claim.UID)
			}
		}

		if claim.Status.Allocation != nil && resourceclaim.IsReservedForPod(pod, claim, false) {
			// Remove the pod from reservedFor. A strategic-merge patch can
			// remove one entry without having the latest claim.
			patch := fmt.Sprintf(`{"metadata": {"uid": %q}, "status": { "reservedFor": [ {"$patch": "delete", "uid": %q} ] }}`,
				claim.UID,
				pod.UID,
			)
			logger.V(5).Info("unreserve", "resourceclaim", klog.KObj(claim), "pod", klog.KObj(pod))
			if _, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Patch(ctx, claim.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				// We get here again when scheduling the pod is retried.
				logger.Error(err, "unreserve", "resourceclaim", klog.KObj(claim))
			}
		}
	}
	pl.unreserveExtendedResourceClaim(ctx, pod, state)
}

// PreBindPreFlight says PreBind has work for pods with claims.
func (pl *dynamicResources) PreBindPreFlight(ctx context.Context, cs *framework.CycleState, _ *v1.Pod, _ string) (*framework.PreBindPreFlightResult, *framework.Status) {
	result := &framework.PreBindPreFlightResult{AllowParallel: true}
	state, err := getStateData(cs)
	if err != nil {
		return result, statusError(klog.FromContext(ctx), err)
	}
	if state.claims.empty() {
		return result, framework.NewStatus(framework.Skip)
	}
	return result, nil
}

// PreBind writes, for each claim not reserved for the pod yet, the
// allocation decided in Reserve (if any) and the pod in reservedFor, then
// waits, up to the binding timeout, for the binding conditions of the
// allocated devices. On failure the pod goes to the backoff queue and
// Unreserve runs.
func (pl *dynamicResources) PreBind(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) (retStatus *framework.Status) {
	logger := klog.FromContext(ctx)
	state, err := getStateData(cs)
	if err != nil {
		return statusError(logger, err)
	}
	if state.claims.empty() {
		return nil
	}

	for index, claim := range state.claims.all() {
		if !resourceclaim.IsReservedForPod(pod, claim, false) {
			claim, successCleanup, err := pl.bindClaim(ctx, state, index, pod, nodeName)
			if err != nil {
				return statusError(logger, err)
			}
			defer func() {
				if retStatus.IsSuccess() && successCleanup != nil {
					successCleanup()
				}
			}()
			// Updated here such that Unreserve can work with the patched claim.
			state.claims.set(index, claim)
		}
	}

	if !hasBindingConditions(state) {
		// The claims are reserved for the pod: binding can proceed.
		return nil
	}

	pl.fh.EventRecorder().WithLogger(logger).Eventf(pod, nil, v1.EventTypeNormal, "BindingConditionsPending", "Scheduling", "waiting for binding conditions for device on node %s", nodeName)
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, bindingConditionsPollInterval, pl.bindingTimeout, true,
		func(ctx context.Context) (bool, error) {
			return pl.isPodReadyForBinding(state)
		})
	waited := time.Since(start)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", ErrDeviceBindingTimeout, err)
	}
	outcome := metrics.BindingConditionsStatusSuccess
	switch {
	case err == nil:
		logger.V(5).Info("BindingConditions is met", "pod", klog.KObj(pod), "node", nodeName, "devices", bindingConditionsFormatter{state, outcome})
	case errors.Is(err, ErrDeviceBindingTimeout):
		outcome = metrics.BindingConditionsStatusTimeout
	case errors.Is(err, ErrDeviceBindingFailed):
		outcome = metrics.BindingConditionsStatusFailed
	default:
		outcome = metrics.BindingConditionsStatusError
	}
	pl.recordBindingConditions(state, outcome, waited)
	if err != nil {
		// The next attempt's Filter sees the timeout or failure and
		// PostFilter may deallocate.
		return statusError(logger, err, "devices", bindingConditionsFormatter{state, outcome})
	}
	return nil
}

// statusUnschedulable logs, at V(5), where the status originated.
func statusUnschedulable(logger klog.Logger, reason string, kv ...any) *framework.Status {
	if loggerV := logger.V(5); loggerV.Enabled() {
		helper, loggerV := loggerV.WithCallStackHelper()
		helper()
		kv = append(kv, "reason", reason)
		loggerV.Info("pod unschedulable", kv...)
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, reason)
}

// statusError logs, at V(5), where the error originated.
func statusError(logger klog.Logger, err error, kv ...any) *framework.Status {
	if loggerV := logger.V(5); loggerV.Enabled() {
		helper, loggerV := loggerV.WithCallStackHelper()
		helper()
		loggerV.Error(err, "dynamic resource plugin failed", kv...)
	}
	return framework.AsStatus(err)
}

// nodeSelectorFromAllocation returns the allocation's node selector, or
// nil when it has none (available on all nodes).
func nodeSelectorFromAllocation(allocation *resourceapi.AllocationResult) (*nodeaffinity.NodeSelector, error) {
	if allocation.NodeSelector == nil {
		return nil, nil
	}
	return nodeaffinity.NewNodeSelector(allocation.NodeSelector)
}
