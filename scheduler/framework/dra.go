package framework

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

// SharedDRAManager is the scheduler's view of Dynamic Resource Allocation
// objects, shared by every profile instance (upstream's SharedDRAManager):
// the ResourceClaims with the scheduler's own allocations applied, the
// ResourceSlices with DeviceTaintRules applied, and the DeviceClasses.
// One scheduler has one, so that an allocation a profile made in Reserve
// is seen by the cycles of every other profile.
type SharedDRAManager interface {
	ResourceClaims() ResourceClaimTracker
	ResourceSlices() ResourceSliceLister
	DeviceClasses() DeviceClassLister
	// DeviceClassResolver maps extended resource names to the
	// DeviceClasses that provide them (DRAExtendedResource).
	DeviceClassResolver() DeviceClassResolver
}

// DeviceClassResolver finds the DeviceClass behind an extended resource
// backed by DRA: the class whose spec.extendedResourceName is the name, or
// the class <name> of an implicit deviceclass.resource.kubernetes.io/<name>.
type DeviceClassResolver interface {
	// GetDeviceClass returns the class providing resourceName, or nil.
	// Callers must not modify it.
	GetDeviceClass(resourceName v1.ResourceName) *resourceapi.DeviceClass
}

// ResourceSliceLister lists ResourceSlices.
type ResourceSliceLister interface {
	// ListWithDeviceTaintRules returns the ResourceSlices with the taints
	// of matching DeviceTaintRules added to their devices. Callers must not
	// modify them.
	ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error)
}

// DeviceClassLister reads DeviceClasses.
type DeviceClassLister interface {
	List() ([]*resourceapi.DeviceClass, error)
	Get(className string) (*resourceapi.DeviceClass, error)
}

// ResourceClaimTracker reads ResourceClaims as the scheduler knows them and
// tracks the allocations it has decided but not written yet.
type ResourceClaimTracker interface {
	// List returns all claims, with written allocations the informer has
	// not seen yet applied.
	List() ([]*resourceapi.ResourceClaim, error)
	// Get returns one claim, likewise.
	Get(namespace, claimName string) (*resourceapi.ResourceClaim, error)
	// GatherAllocatedState returns the devices, shares and capacity in use
	// by allocated claims and by allocations in flight.
	GatherAllocatedState() (*structured.AllocatedState, error)

	// SignalClaimPendingAllocation records an allocation decided in
	// Reserve that PreBind has not written yet (in flight).
	SignalClaimPendingAllocation(claimUID types.UID, allocatedClaim *resourceapi.ResourceClaim) error
	// GetPendingAllocation returns the in-flight allocation of a claim, or nil.
	GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult
	// PendingExtendedResourceClaim returns the in-flight claim Reserve
	// made for the extended resources backed by DRA of the pod with
	// podUID, which PreBind has not created yet, or nil.
	PendingExtendedResourceClaim(podUID types.UID) *resourceapi.ResourceClaim
	// MaybeRemoveClaimPendingAllocation drops one user of an in-flight
	// allocation, or all with forceRemove, and reports whether the
	// allocation was removed.
	MaybeRemoveClaimPendingAllocation(claimUID types.UID, forceRemove bool) (deleted bool)

	// AssumeClaimAfterAPICall shows claim, just written, until the
	// informer has it.
	AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error
	// AssumedClaimRestore forgets what AssumeClaimAfterAPICall recorded.
	AssumedClaimRestore(namespace, claimName string)
}

// RequestsDRAExtendedResource reports whether pod requests some extended
// resource a DeviceClass provides, as upstream tells from the pod's
// requests. It looks at the containers' requests and the overhead, where
// those requests add up from (pod-level resources only cover cpu, memory
// and hugepages), so that a pod without such requests costs no
// aggregation.
func RequestsDRAExtendedResource(pod *v1.Pod, resolver DeviceClassResolver) bool {
	mapped := func(list v1.ResourceList) bool {
		for name, q := range list {
			// The resolver first: a map lookup, where the name check
			// formats and validates the name.
			if !q.IsZero() && resolver.GetDeviceClass(name) != nil && IsDRAExtendedResourceName(name) {
				return true
			}
		}
		return false
	}
	for _, containers := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			if mapped(containers[i].Resources.Requests) {
				return true
			}
		}
	}
	return mapped(pod.Spec.Overhead)
}
