// Package resourcescore holds what NodeResourcesFit's scoring strategies and
// NodeResourcesBalancedAllocation share: the configured resources resolved
// once, the pod's requests per resource, and a node's allocatable and
// allocated amounts, computed as kube-scheduler's resourceAllocationScorer
// does.
package resourcescore

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

type kind uint8

const (
	kindCPU kind = iota
	kindMemory
	kindEphemeralStorage
	kindOther
)

// Resource is one configured resource with its weight, resolved once so
// that per-node scoring compares no strings.
type Resource struct {
	Name   v1.ResourceName
	Weight int64
	kind   kind
	// scalar resources (extended resources, hugepages, ...) are left out
	// of a node's score when the pod does not request them.
	scalar bool
}

// NewResources resolves the configured resources, in order.
func NewResources(specs []configv1.ResourceSpec) []Resource {
	out := make([]Resource, len(specs))
	for i, s := range specs {
		name := v1.ResourceName(s.Name)
		r := Resource{Name: name, Weight: s.Weight, kind: kindOther, scalar: framework.IsScalarResourceName(name)}
		switch name {
		case v1.ResourceCPU:
			r.kind = kindCPU
		case v1.ResourceMemory:
			r.kind = kindMemory
		case v1.ResourceEphemeralStorage:
			r.kind = kindEphemeralStorage
		}
		out[i] = r
	}
	return out
}

// PodRequests returns what pod requests of each resource (milli-CPU for
// cpu, the plain value otherwise), computed with component-helpers so
// that init and sidecar containers, overhead and pod-level resources
// count as the kubelet counts them.
func PodRequests(pod *v1.Pod, resources []Resource, opts resourcehelper.PodResourcesOptions) []int64 {
	reqs := resourcehelper.PodRequests(pod, opts)
	out := make([]int64, len(resources))
	for i := range resources {
		q, ok := reqs[resources[i].Name]
		if !ok {
			continue
		}
		if resources[i].kind == kindCPU {
			out[i] = q.MilliValue()
		} else {
			out[i] = q.Value()
		}
	}
	return out
}

// IsBestEffort reports whether every request is zero.
func IsBestEffort(podRequests []int64) bool {
	for _, r := range podRequests {
		if r != 0 {
			return false
		}
	}
	return true
}

// NodeAmounts returns the node's allocatable amount of r and the amount
// already allocated to its pods. useRequested picks NodeInfo.Requested for
// cpu and memory; otherwise NonZeroRequested, which counts default
// requests for containers that set none. A scalar resource the pod does
// not request, and a resource the node does not have, yield allocatable 0,
// which scorers skip. An extended resource backed by DRA that the node
// does not have as allocatable counts the node's devices, with dra (nil
// when no scored resource is backed by DRA).
func (r *Resource) NodeAmounts(ctx context.Context, ni *framework.NodeInfo, podRequest int64, useRequested bool, dra *DRA) (allocatable, allocated int64) {
	if podRequest == 0 && r.scalar {
		return 0, 0
	}
	requested := ni.NonZeroRequested
	if useRequested {
		requested = ni.Requested
	}
	switch r.kind {
	case kindCPU:
		return ni.Allocatable.MilliCPU, requested.MilliCPU
	case kindMemory:
		return ni.Allocatable.Memory, requested.Memory
	case kindEphemeralStorage:
		return ni.Allocatable.EphemeralStorage, ni.Requested.EphemeralStorage
	}
	a, ok := ni.Allocatable.ScalarResources[r.Name]
	if a == 0 && dra != nil {
		if capacity, inUse := dra.amounts(ctx, ni.Node(), r.Name); capacity > 0 {
			return capacity, inUse
		}
	}
	if ok {
		return a, ni.Requested.ScalarResources[r.Name]
	}
	return 0, 0
}

// ValidateWeights checks upstream's range (0, 100] for each resource weight.
func ValidateWeights(resources []configv1.ResourceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range resources {
		if r.Weight <= 0 || r.Weight > 100 {
			errs = append(errs, field.Invalid(path.Index(i).Child("weight"), r.Weight,
				fmt.Sprintf("resource weight of %v not in valid range (0, 100]", r.Name)))
		}
	}
	return errs
}
