// Package volumebinding implements the VolumeBinding plugin of
// kube-scheduler's default profile: it schedules pods with
// PersistentVolumeClaims (including generic ephemeral volumes) and, for
// WaitForFirstConsumer claims, takes part in binding them.
//
// It matches upstream 1.36 with its default feature gates:
//
//   - PreFilter skips pods without claims and rejects, as
//     UnschedulableAndUnresolvable, pods whose claims are missing, lost,
//     being deleted, not created for the pod (ephemeral), or Immediate and
//     not bound yet ("pod has unbound immediate PersistentVolumeClaims").
//   - Filter checks each bound claim's PV node affinity (in-tree PVs read
//     in their CSI form when the node's CSINode says the plugin is
//     migrated) and, for each unbound WaitForFirstConsumer claim, looks for
//     the smallest available PV that fits the node
//     (component-helpers' FindMatchingVolume), else for dynamic
//     provisioning: a real provisioner, the class's allowedTopologies, and
//     CSIStorageCapacity when the CSI driver tracks capacity.
//   - Score is skipped: StorageCapacityScoring is off at 1.36, and
//     bindTimeoutSeconds is the only accepted arg (shape is refused).
//   - Reserve assumes the chosen PVs and selected-node annotations in
//     assume caches layered on the PV and PVC informers, so following
//     cycles see them taken; Unreserve reverts that.
//   - PreBind writes the bindings through the API and polls the informers
//     every second, up to bindTimeoutSeconds, until the PV controller has
//     completed them. Nothing is written during the scheduling cycle.
//
// Events and queueing hints are upstream's.
package volumebinding
