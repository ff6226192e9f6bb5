// Package dynamicresources implements the DynamicResources plugin of
// kube-scheduler's default profile: it schedules pods with ResourceClaims
// (Dynamic Resource Allocation) and allocates their devices with
// k8s.io/dynamic-resource-allocation's structured allocator, the one
// kube-scheduler uses.
//
// It is a port of upstream 1.37.2's plugin with its default feature gates
// (admin access, prioritized lists, partitionable devices, device taints
// and DeviceTaintRules, consumable capacity, binding conditions with
// device status, the filter timeout, extended resources backed by DRA):
//
//   - PreEnqueue keeps pods whose claims are missing, being deleted or not
//     owned by the pod out of the active queue.
//   - PreFilter skips pods without claims or extended resources backed
//     by DRA, finds or makes in memory the special claim of the latter
//     (extendeddynamicresources.go), refuses pods whose allocated
//     claim is in use by others ("resourceclaim in use"), whose claim is
//     being allocated for another pod, or whose request names a missing
//     DeviceClass, and builds the allocator over the ResourceSlices (with
//     DeviceTaintRules applied) and the devices in use. In a pod-group
//     cycle, a pod sharing a claim whose allocation an earlier pod of
//     the cycle made in Reserve reuses that allocation (podgroup.go).
//   - Filter checks allocated claims' node selectors and binding
//     conditions, gives the special claim the node's device requests for
//     the extended resources not allocatable there, and allocates the
//     other claims on the node, within filterTimeout.
//   - PostFilter deallocates an allocated claim unavailable on the nodes
//     that no other pod uses, or deletes a special claim left from an
//     earlier attempt; it runs before DefaultPreemption.
//   - Score prefers nodes where prioritized lists (firstAvailable) got
//     earlier alternatives.
//   - Reserve records the node's allocations as in flight in the shared
//     DRA manager, so the next cycles count their devices as taken;
//     Unreserve releases them (an allocation pods of a pod-group cycle
//     share, once the last of them is released), removes the pod from
//     reservedFor and deletes a special claim PreBind created.
//   - PodGroupPostFilter does for each pod of a group the pod-group cycle
//     could not place what PostFilter does for a pod alone.
//   - PreBind creates the special claim, writes the allocation and the
//     pod in reservedFor to the claims' status, records the special claim
//     in pod.status.extendedResourceClaimStatus, assumes the written
//     claims until the informer has them, and waits up to bindingTimeout
//     for binding conditions.
//
// Nothing is written during the scheduling cycle except PostFilter's
// deallocation or deletion, as upstream. Upstream's node-allocatable
// resources and PodGroup claims, behind gates off by default, are not
// ported.
//
// A part has upstream's file name where upstream gives it a file of its
// own: dynamicresources.go holds the plugin and its extension points;
// claims.go the pod's claims (the store PreFilter fills, reading them,
// the queueing hints on their changes, and writing the allocation and
// reservedFor in PreBind); extendeddynamicresources.go the special claim
// of extended resources backed by DRA; bindingconditions.go the binding
// conditions PreBind waits for; dra_manager.go and allocateddevices.go
// the scheduler's shared DRA manager.
package dynamicresources
