// Package noderesources provides NodeResourcesFit, kube-scheduler's resource
// plugin. Filter rejects nodes without room for the pod's requests, with
// upstream's reasons ("Too many pods", "Insufficient cpu", "Insufficient
// <resource>"); the requests include init and sidecar containers, overhead
// and pod-level resources, computed by k8s.io/component-helpers. Score ranks
// nodes with the configured strategy: LeastAllocated (the default),
// MostAllocated or RequestedToCapacityRatio, each over weighted resources.
//
// An extended resource backed by DRA (a DeviceClass provides it,
// DRAExtendedResource, on by default in 1.37) is left to DynamicResources
// on nodes that do not have it as allocatable, as upstream: Filter does
// not count it there, and Score counts the node's devices of the class.
package noderesources

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/resourcescore"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodeResourcesFit"

	// ErrReasonTooManyPods is upstream's reason for a node at its pod limit.
	ErrReasonTooManyPods = "Too many pods"

	preFilterStateKey framework.StateKey = "PreFilter" + Name
	preScoreStateKey  framework.StateKey = "PreScore" + Name
)

type fit struct {
	ignoredResources      sets.Set[string]
	ignoredResourceGroups sets.Set[string]
	scorer                *scorer
	// placementScorer rates a pod group's placements: MostAllocated over
	// the same resources, whatever the strategy, as upstream.
	placementScorer *scorer
	// dra is the scheduler's DRA manager, nil in an instance built to
	// validate a profile.
	dra framework.SharedDRAManager
}

var (
	_ framework.PreFilterPlugin      = (*fit)(nil)
	_ framework.FilterPlugin         = (*fit)(nil)
	_ framework.PreScorePlugin       = (*fit)(nil)
	_ framework.ScorePlugin          = (*fit)(nil)
	_ framework.EnqueueExtensions    = (*fit)(nil)
	_ framework.PlacementScorePlugin = (*fit)(nil)
)

// New returns the plugin for *configv1.NodeResourcesFitArgs; nil args get
// upstream's defaults (LeastAllocated over cpu and memory, weight 1 each).
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args := &configv1.NodeResourcesFitArgs{}
	if obj != nil {
		var ok bool
		if args, ok = obj.(*configv1.NodeResourcesFitArgs); !ok {
			return nil, fmt.Errorf("want args to be of type NodeResourcesFitArgs, got %T", obj)
		}
	} else {
		SetDefaultFitArgs(args)
	}
	if err := ValidateFitArgs(args); err != nil {
		return nil, err
	}
	dra := h.SharedDRAManager()
	sc, err := newScorer(args.ScoringStrategy, dra)
	if err != nil {
		return nil, err
	}
	placementScorer, err := newScorer(&configv1.ScoringStrategy{Type: configv1.MostAllocated, Resources: args.ScoringStrategy.Resources}, nil)
	if err != nil {
		return nil, err
	}
	return &fit{
		ignoredResources:      sets.New(args.IgnoredResources...),
		ignoredResourceGroups: sets.New(args.IgnoredResourceGroups...),
		scorer:                sc,
		placementScorer:       placementScorer,
		dra:                   dra,
	}, nil
}

func (*fit) Name() string { return Name }

// ScorePlacement rates a placement of a pod group (upstream 1.37 with
// TopologyAwareWorkloadScheduling, which only then runs placementScore):
// the more of the placement's nodes, taken together, the group's proposed
// pods would fill, the better.
func (f *fit) ScorePlacement(ctx context.Context, _ framework.PlacementCycleState, _ *framework.PodGroupInfo, placement *framework.PodGroupAssignments) (int64, *framework.Status) {
	return f.placementScorer.scorePlacement(ctx, placement), nil
}

// PlacementScoreExtensions is nil: the scores are already in 0..100.
func (*fit) PlacementScoreExtensions() framework.PlacementScoreExtensions { return nil }

// scalarRequest is a requested scalar resource with its rejection reason
// formatted once per pod instead of once per node.
type scalarRequest struct {
	name     v1.ResourceName
	quantity int64
	reason   string
	// backedByDRA: a DeviceClass provides the resource, so nodes without
	// it as allocatable leave it to DynamicResources.
	backedByDRA bool
}

// preFilterState is the pod's requests, in the units NodeInfo uses.
type preFilterState struct {
	milliCPU, memory, ephemeralStorage int64
	// scalars are the non-zero scalar requests that are not ignored, by name.
	scalars []scalarRequest
}

// Clone shares the state: it does not depend on other pods.
func (s *preFilterState) Clone() framework.StateData { return s }

func (s *preFilterState) empty() bool {
	return s.milliCPU == 0 && s.memory == 0 && s.ephemeralStorage == 0 && len(s.scalars) == 0
}

// PreFilter computes the pod's requests once per cycle: the max of each
// init container (sidecars accumulate) and the sum of the containers,
// plus overhead, or the pod-level requests where set (PodLevelResources is
// on by default in 1.37).
func (pl *fit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	state.Write(preFilterStateKey, pl.computeRequests(pod))
	return nil, nil
}

func (pl *fit) computeRequests(pod *v1.Pod) *preFilterState {
	var r framework.Resource
	r.SetMaxResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	s := &preFilterState{milliCPU: r.MilliCPU, memory: r.Memory, ephemeralStorage: r.EphemeralStorage}
	var resolver framework.DeviceClassResolver
	if pl.dra != nil {
		resolver = pl.dra.DeviceClassResolver()
	}
	for name, q := range r.ScalarResources {
		if q == 0 || pl.ignored(name) {
			continue
		}
		s.scalars = append(s.scalars, scalarRequest{
			name:        name,
			quantity:    q,
			reason:      fmt.Sprintf("Insufficient %v", name),
			backedByDRA: resolver != nil && resolver.GetDeviceClass(name) != nil,
		})
	}
	// Sorted so a node short of several resources always lists them in
	// the same order.
	slices.SortFunc(s.scalars, func(a, b scalarRequest) int { return strings.Compare(string(a.name), string(b.name)) })
	return s
}

// ignored reports whether args exclude an extended resource from Filter,
// by name (ignoredResources) or by the part before "/" (ignoredResourceGroups).
func (pl *fit) ignored(name v1.ResourceName) bool {
	if !framework.IsExtendedResourceName(name) {
		return false
	}
	if pl.ignoredResources.Has(string(name)) {
		return true
	}
	if pl.ignoredResourceGroups.Len() == 0 {
		return false
	}
	group, _, _ := strings.Cut(string(name), "/")
	return pl.ignoredResourceGroups.Has(group)
}

// PreFilterExtensions returns nil: the pod's requests do not depend on other pods.
func (*fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a node without room for the pod, with one reason per
// short resource. The code is Unschedulable (preemption may free room)
// unless the pod asks for more of some resource than the node has at all.
func (pl *fit) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	reasons, unresolvable := insufficient(s, nodeInfo)
	if len(reasons) == 0 {
		return nil
	}
	code := framework.Unschedulable
	if unresolvable {
		code = framework.UnschedulableAndUnresolvable
	}
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Node has insufficient resources", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "reasons", reasons)
	}
	return framework.NewStatus(code, reasons...)
}

// insufficient lists upstream's reasons in upstream's order: pods, cpu,
// memory, ephemeral-storage, then scalar resources. It allocates only when
// the node does not fit.
func insufficient(s *preFilterState, ni *framework.NodeInfo) (reasons []string, unresolvable bool) {
	alloc, used := ni.Allocatable, ni.Requested
	if len(ni.Pods)+1 > alloc.AllowedPodNumber {
		reasons = append(reasons, ErrReasonTooManyPods)
	}
	if s.empty() {
		return reasons, false
	}
	check := func(req, allocatable, requested int64, reason string) {
		if req > 0 && req > allocatable-requested {
			reasons = append(reasons, reason)
			unresolvable = unresolvable || req > allocatable
		}
	}
	check(s.milliCPU, alloc.MilliCPU, used.MilliCPU, "Insufficient cpu")
	check(s.memory, alloc.Memory, used.Memory, "Insufficient memory")
	check(s.ephemeralStorage, alloc.EphemeralStorage, used.EphemeralStorage, "Insufficient ephemeral-storage")
	for i := range s.scalars {
		sr := &s.scalars[i]
		if sr.backedByDRA && alloc.ScalarResources[sr.name] <= 0 {
			// DynamicResources provides it on this node.
			continue
		}
		check(sr.quantity, alloc.ScalarResources[sr.name], used.ScalarResources[sr.name], sr.reason)
	}
	return reasons, unresolvable
}

// fits returns upstream's reasons why pod does not fit nodeInfo (nil if it
// fits), with no resource ignored.
func (pl *fit) fits(pod *v1.Pod, nodeInfo *framework.NodeInfo) []string {
	reasons, _ := insufficient((&fit{dra: pl.dra}).computeRequests(pod), nodeInfo)
	return reasons
}

// preScoreState is the pod's requests of each scored resource, and the
// devices behind scored extended resources backed by DRA (nil if none).
type preScoreState struct {
	podRequests []int64
	dra         *resourcescore.DRA
}

// Clone shares the state: it does not depend on other pods.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore computes the pod's requests of the scored resources once per cycle.
func (pl *fit) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	dra, err := pl.scorer.draState()
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, &preScoreState{podRequests: pl.scorer.podRequests(pod), dra: dra})
	return nil
}

// Score rates the node with the configured strategy.
func (pl *fit) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		// PreScore was disabled in the profile: compute here, as upstream does.
		dra, err := pl.scorer.draState()
		if err != nil {
			return 0, framework.AsStatus(err)
		}
		s = &preScoreState{podRequests: pl.scorer.podRequests(pod), dra: dra}
	}
	return pl.scorer.score(ctx, nodeInfo, s.podRequests, s.dra), nil
}

// ScoreExtensions returns nil: scores are already 0..100.
func (*fit) ScoreExtensions() framework.ScoreExtensions { return nil }

// EventsToRegister: room appears when a pod on a node is deleted or
// scaled down, or when a node is added or its allocatable grows; the pod's
// own scale-down may make it fit, and a DeviceClass may start providing a
// requested extended resource through DRA. Registered as upstream 1.37
// with its default gates: AssignedPod and TargetPod events
// (UpdatePodScaleUp only matters behind
// InPlacePodVerticalScalingSchedulerPreemption, alpha, off) and
// DeviceClass events (DRAExtendedResource, on).
func (pl *fit) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodDelete},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodScaleDown}, QueueingHintFn: pl.isSchedulableAfterAssignedPodScaleDown},
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodScaleDown}, QueueingHintFn: pl.isSchedulableAfterTargetPodScaleDown},
		{Event: framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Add | framework.Update}, QueueingHintFn: isSchedulableAfterDeviceClassEvent},
	}, nil
}

// isSchedulableAfterDeviceClassEvent queues when a class added or updated
// may provide an extended resource the pod requests: an update changing
// the class's extendedResourceName to one requested, or an added class
// whose explicit or implicit name is requested.
func isSchedulableAfterDeviceClassEvent(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*resourceapi.DeviceClass](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if original != nil {
		if ptr.Deref(original.Spec.ExtendedResourceName, "") == ptr.Deref(modified.Spec.ExtendedResourceName, "") {
			logger.V(5).Info("device class has identical extended resource name", "pod", klog.KObj(pod), "deviceclass", klog.KObj(modified))
			return framework.QueueSkip, nil
		}
	} else if _, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceName(resourceapi.ResourceDeviceClassPrefix+modified.Name)]; ok {
		// A class's name never changes: only an added one brings an
		// implicit name.
		logger.V(5).Info("device class was added, and may now fit the pod's resource requests", "pod", klog.KObj(pod), "deviceclass", klog.KObj(modified))
		return framework.Queue, nil
	}
	if modified.Spec.ExtendedResourceName != nil {
		if _, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceName(*modified.Spec.ExtendedResourceName)]; ok {
			logger.V(5).Info("device class was created or updated, and may fit the pod's resource requests", "pod", klog.KObj(pod), "deviceclass", klog.KObj(modified))
			return framework.Queue, nil
		}
	}
	logger.V(5).Info("created or updated device class extended resource name is either nil, or does not match pod's resource request", "pod", klog.KObj(pod), "deviceclass", klog.KObj(modified))
	return framework.QueueSkip, nil
}

// scaleDownOptions follow the 1.37 defaults: in-place resize is GA and
// in-place pod-level resize is beta (on), so a running pod's actual
// resources come from its status.
var scaleDownOptions = resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}

// isSchedulableAfterAssignedPodDelete skips a deleted pod that held no
// resources: neither bound nor nominated (a nominated pod's deletion is
// reported as an AssignedPod event).
func (pl *fit) isSchedulableAfterAssignedPodDelete(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if deleted.Spec.NodeName == "" && deleted.Status.NominatedNodeName == "" {
		logger.V(5).Info("the deleted pod was unscheduled and it wouldn't make the unscheduled pod schedulable", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("another scheduled pod was deleted, and it may make the unscheduled pod schedulable", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
	return framework.Queue, nil
}

// isSchedulableAfterTargetPodScaleDown always queues: the pod asks for
// less than it did when it was rejected.
func (*fit) isSchedulableAfterTargetPodScaleDown(logger klog.Logger, pod *v1.Pod, _, _ any) (framework.QueueingHint, error) {
	logger.V(5).Info("the target pod got scaled down and it may be schedulable now", "pod", klog.KObj(pod))
	return framework.Queue, nil
}

// isSchedulableAfterAssignedPodScaleDown queues when a bound pod gave back
// some resource the pod requests.
func (pl *fit) isSchedulableAfterAssignedPodScaleDown(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if !scaledDownForPod(pod, original, modified) {
		logger.V(5).Info("pod got scaled down, but the modification isn't related to the resource requests of the target pod", "pod", klog.KObj(pod), "modifiedPod", klog.KObj(modified))
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("another scheduled pod got scaled down, and it may make the unscheduled pod schedulable", "pod", klog.KObj(pod), "modifiedPod", klog.KObj(modified))
	return framework.Queue, nil
}

// scaledDownForPod reports whether modified, compared to original, frees
// some resource that target requests; an unbound pod frees nothing.
func scaledDownForPod(target, original, modified *v1.Pod) bool {
	if modified.Spec.NodeName == "" {
		return false
	}
	var before, after framework.Resource
	before.SetMaxResource(resourcehelper.PodRequests(original, scaleDownOptions))
	after.SetMaxResource(resourcehelper.PodRequests(modified, scaleDownOptions))
	for name, q := range resourcehelper.PodRequests(target, scaleDownOptions) {
		if q.IsZero() {
			continue
		}
		switch name {
		case v1.ResourceCPU:
			if before.MilliCPU > after.MilliCPU {
				return true
			}
		case v1.ResourceMemory:
			if before.Memory > after.Memory {
				return true
			}
		case v1.ResourceEphemeralStorage:
			if before.EphemeralStorage > after.EphemeralStorage {
				return true
			}
		default:
			if framework.IsScalarResourceName(name) && before.ScalarResources[name] > after.ScalarResources[name] {
				return true
			}
		}
	}
	return false
}

func (pl *fit) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if modified == nil {
		return framework.QueueSkip, nil
	}
	modifiedInfo := framework.NewNodeInfo()
	modifiedInfo.SetNode(modified)
	if len(pl.fits(pod, modifiedInfo)) != 0 {
		// Even empty, the node would be too small.
		return framework.QueueSkip, nil
	}
	if original == nil {
		logger.V(5).Info("Node was added and may fit the pod", "pod", klog.KObj(pod), "node", klog.KObj(modified))
		return framework.Queue, nil
	}
	if !pl.requestedResourcesIncreased(pod, original, modified) {
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("Node's allocatable grew and may fit the pod", "pod", klog.KObj(pod), "node", klog.KObj(modified))
	return framework.Queue, nil
}

// requestedResourcesIncreased reports whether the node's pod limit, or its
// allocatable of any resource the pod requests, grew, or whether the node
// may provide a requested resource through DRA.
func (pl *fit) requestedResourcesIncreased(pod *v1.Pod, original, modified *v1.Node) bool {
	req := (&fit{dra: pl.dra}).computeRequests(pod)
	before := framework.NewResource(original.Status.Allocatable)
	after := framework.NewResource(modified.Status.Allocatable)
	if after.AllowedPodNumber > before.AllowedPodNumber {
		return true
	}
	if req.empty() {
		return false
	}
	if (req.milliCPU > 0 && after.MilliCPU > before.MilliCPU) ||
		(req.memory > 0 && after.Memory > before.Memory) ||
		(req.ephemeralStorage > 0 && after.EphemeralStorage > before.EphemeralStorage) {
		return true
	}
	for _, sr := range req.scalars {
		if after.ScalarResources[sr.name] > before.ScalarResources[sr.name] {
			return true
		}
		if sr.backedByDRA && after.ScalarResources[sr.name] <= 0 {
			return true
		}
	}
	return false
}

// SetDefaultFitArgs applies upstream's v1 defaults.
func SetDefaultFitArgs(args *configv1.NodeResourcesFitArgs) {
	if args.ScoringStrategy == nil {
		args.ScoringStrategy = &configv1.ScoringStrategy{Type: configv1.LeastAllocated}
	}
	if len(args.ScoringStrategy.Resources) == 0 {
		args.ScoringStrategy.Resources = []configv1.ResourceSpec{
			{Name: string(v1.ResourceCPU), Weight: 1},
			{Name: string(v1.ResourceMemory), Weight: 1},
		}
	}
	for i := range args.ScoringStrategy.Resources {
		if args.ScoringStrategy.Resources[i].Weight == 0 {
			args.ScoringStrategy.Resources[i].Weight = 1
		}
	}
}

var supportedStrategies = sets.New(string(configv1.LeastAllocated), string(configv1.MostAllocated), string(configv1.RequestedToCapacityRatio))

// ValidateFitArgs is upstream's validation of NodeResourcesFitArgs (after
// defaulting): ignored resources and groups must be label names (groups
// without "/"), the strategy must be supported with weights in (0, 100],
// and RequestedToCapacityRatio needs a valid shape while the other
// strategies must not set one.
func ValidateFitArgs(args *configv1.NodeResourcesFitArgs) error {
	var errs field.ErrorList
	for i, res := range args.IgnoredResources {
		errs = append(errs, metav1validation.ValidateLabelName(res, field.NewPath("ignoredResources").Index(i))...)
	}
	for i, group := range args.IgnoredResourceGroups {
		path := field.NewPath("ignoredResourceGroups").Index(i)
		if strings.Contains(group, "/") {
			errs = append(errs, field.Invalid(path, group, "resource group name can't contain '/'"))
		}
		errs = append(errs, metav1validation.ValidateLabelName(group, path)...)
	}
	strategyPath := field.NewPath("scoringStrategy")
	st := args.ScoringStrategy
	if st == nil {
		errs = append(errs, field.Required(strategyPath, "ScoringStrategy field is required"))
		return errs.ToAggregate()
	}
	if !supportedStrategies.Has(string(st.Type)) {
		errs = append(errs, field.NotSupported(strategyPath.Child("type"), st.Type, sets.List(supportedStrategies)))
	}
	errs = append(errs, resourcescore.ValidateWeights(st.Resources, strategyPath.Child("resources"))...)
	if st.Type == configv1.RequestedToCapacityRatio {
		if st.RequestedToCapacityRatio == nil {
			errs = append(errs, field.Required(strategyPath.Child("requestedToCapacityRatio"), "must be specified when type is RequestedToCapacityRatio"))
		} else {
			errs = append(errs, helper.ValidateShape(st.RequestedToCapacityRatio.Shape, strategyPath.Child("requestedToCapacityRatio", "shape"))...)
		}
	} else if st.RequestedToCapacityRatio != nil {
		errs = append(errs, field.Forbidden(strategyPath.Child("requestedToCapacityRatio"), "must be nil when type is not RequestedToCapacityRatio"))
	}
	return errs.ToAggregate()
}
