// Package balancedallocation provides NodeResourcesBalancedAllocation,
// kube-scheduler's Score plugin that favours nodes whose resource usage stays
// balanced across the configured resources (cpu and memory by default). As in
// Kubernetes 1.37, a node is rated by how placing the pod changes its balance:
// 50 + (50 + balanceWithPod - balanceWithoutPod) / 2, where a balance is
// (1 - standard deviation of the usage fractions) × 100.
package balancedallocation

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/resourcescore"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodeResourcesBalancedAllocation"

	preScoreStateKey framework.StateKey = "PreScore" + Name
)

type balancedAllocation struct {
	resources []resourcescore.Resource
	// dra and matches count the devices behind extended resources
	// backed by DRA; dra is nil in an instance built to validate a profile.
	dra     framework.SharedDRAManager
	matches *resourcescore.MatchCache
}

var (
	_ framework.PreScorePlugin = (*balancedAllocation)(nil)
	_ framework.ScorePlugin    = (*balancedAllocation)(nil)
)

// New returns the plugin for *configv1.NodeResourcesBalancedAllocationArgs;
// nil args get upstream's defaults (cpu and memory).
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	args := &configv1.NodeResourcesBalancedAllocationArgs{}
	if obj != nil {
		var ok bool
		if args, ok = obj.(*configv1.NodeResourcesBalancedAllocationArgs); !ok {
			return nil, fmt.Errorf("want args to be of type NodeResourcesBalancedAllocationArgs, got %T", obj)
		}
	} else {
		SetDefaultArgs(args)
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	// Upstream's BalancedAllocation has no CEL cache of its own and would
	// crash on a class selector; it gets one as NodeResourcesFit has.
	return &balancedAllocation{resources: resourcescore.NewResources(args.Resources), dra: h.SharedDRAManager(), matches: resourcescore.NewMatchCache()}, nil
}

func (*balancedAllocation) Name() string { return Name }

// requestOptions follow the 1.37 defaults: pod-level resources and, for
// running pods, the resources in status (in-place resize) count. Unlike
// NodeResourcesFit no default requests are added, so a pod requesting
// nothing is best-effort.
var requestOptions = resourcehelper.PodResourcesOptions{
	UseStatusResources: true,
	InPlacePodLevelResourcesVerticalScalingEnabled: true,
}

type preScoreState struct {
	podRequests []int64
	// dra counts the devices behind scored extended resources backed by
	// DRA; nil if none is.
	dra *resourcescore.DRA
}

// Clone shares the state: it does not depend on other pods.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore computes the pod's requests once per cycle. A best-effort pod
// skips scoring (upstream #129138): rating it would pile such pods on one node.
func (pl *balancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	reqs := resourcescore.PodRequests(pod, pl.resources, requestOptions)
	if resourcescore.IsBestEffort(reqs) {
		return framework.NewStatus(framework.Skip)
	}
	dra, err := resourcescore.NewDRA(pl.dra, pl.resources, pl.matches)
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, &preScoreState{podRequests: reqs, dra: dra})
	return nil
}

// Score rates how placing the pod changes the node's balance.
func (pl *balancedAllocation) Score(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		// PreScore was disabled in the profile: compute here, as upstream does.
		podRequests := resourcescore.PodRequests(pod, pl.resources, requestOptions)
		if resourcescore.IsBestEffort(podRequests) {
			return 0, nil
		}
		dra, err := resourcescore.NewDRA(pl.dra, pl.resources, pl.matches)
		if err != nil {
			return 0, framework.AsStatus(err)
		}
		s = &preScoreState{podRequests: podRequests, dra: dra}
	}
	return pl.score(ctx, nodeInfo, s.podRequests, s.dra), nil
}

// maxInlineResources bounds the resources whose fractions live on the
// stack; more (an unusual profile) costs one allocation per node.
const maxInlineResources = 8

func (pl *balancedAllocation) score(ctx context.Context, ni *framework.NodeInfo, podRequests []int64, dra *resourcescore.DRA) int64 {
	var withBuf, withoutBuf [maxInlineResources]float64
	with, without := withBuf[:0], withoutBuf[:0]
	for i := range pl.resources {
		allocatable, allocated := pl.resources[i].NodeAmounts(ctx, ni, podRequests[i], true, dra)
		if allocatable == 0 {
			continue
		}
		with = append(with, fraction(allocated+podRequests[i], allocatable))
		without = append(without, fraction(allocated, allocatable))
	}
	// Both balances lie in [50, 100], so their difference in [-50, 50];
	// this maps it back to [50, 100] around 75 for an unchanged balance.
	return framework.MaxNodeScore/2 + (framework.MaxNodeScore/2+balance(with)-balance(without))/2
}

func fraction(requested, allocatable int64) float64 {
	return min(float64(requested)/float64(allocatable), 1)
}

// balance is (1 - std) × 100 of the fractions. For two resources the
// standard deviation is |f1 - f2| / 2; the general formula is used for
// more, and one resource is perfectly balanced. Float operations are
// upstream's, in upstream's order, so truncation matches.
func balance(fractions []float64) int64 {
	std := 0.0
	switch n := len(fractions); {
	case n == 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	case n > 2:
		var total float64
		for _, f := range fractions {
			total += f
		}
		mean := total / float64(n)
		var sum float64
		for _, f := range fractions {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(n))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}

// ScoreExtensions returns nil: scores are already 0..100.
func (*balancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }

// SetDefaultArgs applies upstream's v1 defaults: cpu and memory, weight 1.
func SetDefaultArgs(args *configv1.NodeResourcesBalancedAllocationArgs) {
	if len(args.Resources) == 0 {
		args.Resources = []configv1.ResourceSpec{
			{Name: string(v1.ResourceCPU), Weight: 1},
			{Name: string(v1.ResourceMemory), Weight: 1},
		}
		return
	}
	for i := range args.Resources {
		if args.Resources[i].Weight == 0 {
			args.Resources[i].Weight = 1
		}
	}
}

// ValidateArgs is upstream's validation: resources are named once and,
// since balance ignores weights, every weight must be 1.
func ValidateArgs(args *configv1.NodeResourcesBalancedAllocationArgs) error {
	path := field.NewPath("resources")
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, r := range args.Resources {
		if seen.Has(r.Name) {
			errs = append(errs, field.Duplicate(path.Index(i).Child("name"), r.Name))
		}
		seen.Insert(r.Name)
		if r.Weight != 1 {
			errs = append(errs, field.Invalid(path.Index(i).Child("weight"), r.Weight, "must be 1"))
		}
	}
	return errs.ToAggregate()
}
