// Package nodevolumelimits implements the NodeVolumeLimits plugin of
// kube-scheduler's default profile (upstream's CSILimits): it keeps a node
// from being given more CSI volumes than each driver can attach to it.
//
// A driver's limit is the allocatable.count it reports in the node's
// CSINode; a driver without one, or a node without a CSINode, has no limit.
// A node fails with Unschedulable "node(s) exceed max volume count" when,
// for some driver the pod uses, the volumes already in use on the node
// plus the pod's volumes not yet among them exceed the limit.
//
// Volumes are told apart by "<driver>/<volumeHandle>", so a volume shared by
// several pods counts once. In use on the node means used by a pod on it,
// or attached according to a VolumeAttachment naming the node (counted
// unconditionally at 1.37's default feature gates). A volume comes from a
// PVC (or the PVC of a generic ephemeral volume) bound to a CSI PV; an
// unbound PVC, or one whose PV is missing, counts against its
// StorageClass's provisioner under a per-instance made-up handle. In-tree
// AWS EBS, GCE PD, Azure Disk, Cinder and Portworx volumes, whether PVs,
// inline volumes or StorageClass provisioners, are counted against the CSI
// driver they migrate to (through k8s.io/csi-translation-lib) on every
// node that has a CSINode: as upstream 1.37, the CSINode's
// storage.alpha.kubernetes.io/migrated-plugins annotation is not consulted,
// the migration of these plugins being locked on. Other in-tree volumes are
// not counted.
//
// A PVC of the incoming pod that does not exist makes every node fail with
// UnschedulableAndUnresolvable until it is created; a generic ephemeral
// volume's PVC not owned by the pod is an internal error. Pods without PVC,
// ephemeral or migratable in-tree volumes skip the plugin (PreFilter Skip).
//
// The pod's own volumes are resolved once in PreFilter, for nodes with and
// without a CSINode; Filter then resolves the volumes of the pods on the
// node and reads the node's VolumeAttachments through an index by node name.
//
// Before the limits, as upstream 1.37 with VolumeLimitScaling (beta, on):
// a node whose CSINode does not list a driver of the pod's volumes, or that
// has no CSINode, fails with Unschedulable "<driver> CSI driver is not
// installed on the node" when that driver's CSIDriver sets
// preventPodSchedulingIfMissing. Drivers without a CSIDriver, or that do
// not set it, are not checked.
package nodevolumelimits
