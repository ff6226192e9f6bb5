// Package volumebinding implements the VolumeBinding plugin of
// kube-scheduler's default profile: it schedules pods with
// PersistentVolumeClaims (including generic ephemeral volumes) and, for
// WaitForFirstConsumer claims, takes part in binding them.
//
// It matches upstream 1.37 with its default feature gates:
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
//   - Score (StorageCapacityScoring, beta and on since 1.37) rates each
//     node by the storage utilization the pod's new volumes would cause,
//     per StorageClass, through the args' shape (by default 100 at 0%
//     down to 0 at 100%, so emptier storage wins), averaged over the
//     classes: static bindings by the chosen PVs' capacity, otherwise
//     provisioned volumes by the node's CSIStorageCapacity. Nodes where
//     the pod needs neither, and pods without claims, score 0.
//   - Reserve assumes the chosen PVs and selected-node annotations in
//     assume caches layered on the PV and PVC informers, so following
//     cycles see them taken; Unreserve reverts that.
//   - PreBind writes the bindings through the API and polls the informers
//     every second, up to bindTimeoutSeconds, until the PV controller has
//     completed them. Nothing is written during the scheduling cycle.
//
// Events and queueing hints are upstream's.
package volumebinding
