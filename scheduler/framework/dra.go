package framework

import (
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
