// Package feature holds the features the plugins run with, as upstream's
// plugins/feature holds the gates they are built with: the Dynamic
// Resource Allocation features, and the feature gates that change what a
// plugin does. It is a leaf: DynamicResources allocates with these
// features and NodeResourcesFit and NodeResourcesBalancedAllocation match
// devices to nodes with them, without either depending on the other.
package feature

import "k8s.io/dynamic-resource-allocation/structured"

// Features carries the feature gates that plugins read, by upstream's
// field names (plugins/feature.Features). The zero value is kube-scheduler
// 1.37.2's defaults: each of these gates is off by default there.
type Features struct {
	// EnableGenericWorkload follows GenericWorkload (beta), and is on only
	// for a profile that opted in to workload-aware scheduling: pods of
	// a PodGroup are preempted as upstream's workload-aware preemption
	// does, and DefaultPreemption preempts for pod groups.
	EnableGenericWorkload bool
	// EnableInPlacePodVerticalScalingSchedulerPreemption follows the gate
	// of that name (alpha, needs InPlacePodVerticalScaling): bound pods
	// whose resize the kubelet deferred go through the scheduler.
	EnableInPlacePodVerticalScalingSchedulerPreemption bool
}

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
