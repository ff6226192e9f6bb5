// Package feature holds the Dynamic Resource Allocation features the
// plugins run with, as upstream's plugins/feature holds the gates they are
// built with. It is a leaf: DynamicResources allocates with these features
// and NodeResourcesFit and NodeResourcesBalancedAllocation match devices
// to nodes with them, without either depending on the other.
package feature

import "k8s.io/dynamic-resource-allocation/structured"

// AllocatorFeatures returns the allocator features kube-scheduler 1.37.2
// enables with its default gates: admin access, prioritized lists,
// partitionable devices, device taints, binding conditions with device
// status, and consumable capacity. The alpha ones (list-type and derived
// attributes, optional node operations, compatibility groups) and
// DRAFractionalCapacityRange, on only with --min-compatibility-version
// 1.37 (the default is 1.36), stay off.
func AllocatorFeatures() structured.Features {
	return structured.Features{
		AdminAccess:            true,
		PrioritizedList:        true,
		PartitionableDevices:   true,
		DeviceTaints:           true,
		DeviceBindingAndStatus: true,
		ConsumableCapacity:     true,
	}
}
