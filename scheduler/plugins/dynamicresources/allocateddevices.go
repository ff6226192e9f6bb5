package dynamicresources

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// foreachAllocatedDevice calls, for each device of the claim's allocation
// result, sharedDeviceCallback (and consumedCapacityCallback when it
// consumes capacity) for a share of a device with consumable capacity,
// dedicatedDeviceCallback otherwise. Devices allocated with admin access
// can be shared with other claims and are skipped. It does nothing if the
// claim is not allocated. DRAConsumableCapacity is on by default in 1.37.
func foreachAllocatedDevice(claim *resourceapi.ResourceClaim,
	dedicatedDeviceCallback func(deviceID structured.DeviceID),
	sharedDeviceCallback func(structured.SharedDeviceID),
	consumedCapacityCallback func(structured.DeviceConsumedCapacity)) {
	if claim.Status.Allocation == nil {
		return
	}
	for _, result := range claim.Status.Allocation.Devices.Results {
		if ptr.Deref(result.AdminAccess, false) {
			// Is not considered as allocated.
			continue
		}
		deviceID := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
		if result.ShareID != nil {
			sharedDeviceCallback(structured.MakeSharedDeviceID(deviceID, result.ShareID))
			if result.ConsumedCapacity != nil {
				consumedCapacityCallback(structured.NewDeviceConsumedCapacity(deviceID, result.ConsumedCapacity))
			}
			continue
		}
		dedicatedDeviceCallback(deviceID)
	}
}

// allocatedDevices reacts to the claim cache's events and maintains the
// set of all allocated devices, which is cheaper than listing the claims
// in every PreFilter.
//
// Each change bumps a revision counter, like resourceVersion in the API
// server: a caller compares it with Revision to tell whether results it
// read are still current. All methods are safe for concurrent use; Get,
// GetSharedDeviceIDs and Capacities return copies.
type allocatedDevices struct {
	logger klog.Logger

	mutex      sync.RWMutex
	revision   int64
	ids        sets.Set[structured.DeviceID]
	shareIDs   sets.Set[structured.SharedDeviceID]
	capacities structured.ConsumedCapacityCollection
}

func newAllocatedDevices(logger klog.Logger) *allocatedDevices {
	return &allocatedDevices{
		logger:     logger,
		ids:        sets.New[structured.DeviceID](),
		shareIDs:   sets.New[structured.SharedDeviceID](),
		capacities: structured.NewConsumedCapacityCollection(),
	}
}

func (a *allocatedDevices) Get() (sets.Set[structured.DeviceID], int64) {
	a.mutex.RLock()
	defer a.mutex.RUnlock()
	return a.ids.Clone(), a.revision
}

func (a *allocatedDevices) GetSharedDeviceIDs() (sets.Set[structured.SharedDeviceID], int64) {
	a.mutex.RLock()
	defer a.mutex.RUnlock()
	return a.shareIDs.Clone(), a.revision
}

func (a *allocatedDevices) Capacities() (structured.ConsumedCapacityCollection, int64) {
	a.mutex.RLock()
	defer a.mutex.RUnlock()
	return a.capacities.Clone(), a.revision
}

func (a *allocatedDevices) Revision() int64 {
	a.mutex.RLock()
	defer a.mutex.RUnlock()
	return a.revision
}

func (a *allocatedDevices) handlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    a.onAdd,
		UpdateFunc: a.onUpdate,
		DeleteFunc: a.onDelete,
	}
}

func (a *allocatedDevices) onAdd(obj any) {
	claim, _, err := helper.As[*resourceapi.ResourceClaim](obj, nil)
	if err != nil {
		a.logger.Error(err, "Unexpected object in allocatedDevices.onAdd")
		return
	}
	a.addDevices(claim)
}

func (a *allocatedDevices) onUpdate(oldObj, newObj any) {
	originalClaim, modifiedClaim, err := helper.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		a.logger.Error(err, "Unexpected object in allocatedDevices.onUpdate")
		return
	}
	switch {
	case originalClaim.Status.Allocation == nil && modifiedClaim.Status.Allocation != nil:
		a.addDevices(modifiedClaim)
	case originalClaim.Status.Allocation != nil && modifiedClaim.Status.Allocation == nil:
		a.removeDevices(originalClaim)
	default:
		// Either both nil or both non-nil, in which case the content
		// also must be the same (immutable).
	}
}

func (a *allocatedDevices) onDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, _, err := helper.As[*resourceapi.ResourceClaim](obj, nil)
	if err != nil {
		a.logger.Error(err, "Unexpected object in allocatedDevices.onDelete")
		return
	}
	a.removeDevices(claim)
}

// collect lists the devices of claim, without holding the mutex.
func (a *allocatedDevices) collect(claim *resourceapi.ResourceClaim, verb string) ([]structured.DeviceID, []structured.SharedDeviceID, []structured.DeviceConsumedCapacity) {
	var (
		deviceIDs        []structured.DeviceID
		shareIDs         []structured.SharedDeviceID
		deviceCapacities []structured.DeviceConsumedCapacity
	)
	foreachAllocatedDevice(claim,
		func(deviceID structured.DeviceID) {
			a.logger.V(6).Info("Observed device "+verb, "device", deviceID, "claim", klog.KObj(claim))
			deviceIDs = append(deviceIDs, deviceID)
		},
		func(sharedDeviceID structured.SharedDeviceID) {
			a.logger.V(6).Info("Observed shared device "+verb, "shared device", sharedDeviceID, "claim", klog.KObj(claim))
			shareIDs = append(shareIDs, sharedDeviceID)
		},
		func(capacity structured.DeviceConsumedCapacity) {
			a.logger.V(6).Info("Observed consumed capacity "+verb, "device", capacity.DeviceID, "consumed capacity", capacity.ConsumedCapacity, "claim", klog.KObj(claim))
			deviceCapacities = append(deviceCapacities, capacity)
		})
	return deviceIDs, shareIDs, deviceCapacities
}

func (a *allocatedDevices) addDevices(claim *resourceapi.ResourceClaim) {
	deviceIDs, shareIDs, capacities := a.collect(claim, "allocation")
	if len(deviceIDs) == 0 && len(shareIDs) == 0 && len(capacities) == 0 {
		return
	}
	a.mutex.Lock()
	defer a.mutex.Unlock()
	a.revision++
	a.ids.Insert(deviceIDs...)
	a.shareIDs.Insert(shareIDs...)
	for _, capacity := range capacities {
		a.capacities.Insert(capacity)
	}
}

func (a *allocatedDevices) removeDevices(claim *resourceapi.ResourceClaim) {
	deviceIDs, shareIDs, capacities := a.collect(claim, "deallocation")
	if len(deviceIDs) == 0 && len(shareIDs) == 0 && len(capacities) == 0 {
		return
	}
	a.mutex.Lock()
	defer a.mutex.Unlock()
	a.revision++
	a.ids.Delete(deviceIDs...)
	a.shareIDs.Delete(shareIDs...)
	for _, capacity := range capacities {
		a.capacities.Remove(capacity)
	}
}
