package testing

import (
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Storage builders shared by the storage plugins' tests (VolumeBinding,
// VolumeZone, NodeVolumeLimits, VolumeRestrictions). Each returns a wrapper
// whose Obj() yields the API object; the wrapper embeds the object so a
// test can set a field no builder covers.

// PVWrapper builds a v1.PersistentVolume: st.MakePV("pv").Capacity("1Gi").Obj().
type PVWrapper struct{ v1.PersistentVolume }

// MakePV returns a PV named name with resourceVersion "1", Available, and
// without capacity, class or source.
func MakePV(name string) *PVWrapper {
	return &PVWrapper{v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Status:     v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}}
}

// Obj returns the built PV.
func (w *PVWrapper) Obj() *v1.PersistentVolume { return &w.PersistentVolume }

// ResourceVersion sets metadata.resourceVersion.
func (w *PVWrapper) ResourceVersion(rv string) *PVWrapper { w.SetResourceVersion(rv); return w }

// Annotation sets an annotation.
func (w *PVWrapper) Annotation(k, v string) *PVWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// Label sets a label.
func (w *PVWrapper) Label(k, v string) *PVWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Capacity sets spec.capacity[storage].
func (w *PVWrapper) Capacity(q string) *PVWrapper {
	w.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
	return w
}

// StorageClass sets spec.storageClassName.
func (w *PVWrapper) StorageClass(name string) *PVWrapper { w.Spec.StorageClassName = name; return w }

// AccessModes sets spec.accessModes.
func (w *PVWrapper) AccessModes(modes ...v1.PersistentVolumeAccessMode) *PVWrapper {
	w.Spec.AccessModes = modes
	return w
}

// VolumeMode sets spec.volumeMode.
func (w *PVWrapper) VolumeMode(m v1.PersistentVolumeMode) *PVWrapper {
	w.Spec.VolumeMode = &m
	return w
}

// ClaimRef pre-binds the PV to the claim namespace/name (with uid, which may be empty).
func (w *PVWrapper) ClaimRef(namespace, name, uid string) *PVWrapper {
	w.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name, UID: types.UID(uid)}
	return w
}

// Phase sets status.phase.
func (w *PVWrapper) Phase(p v1.PersistentVolumePhase) *PVWrapper { w.Status.Phase = p; return w }

// NodeAffinityIn requires nodes whose label key has one of values (one
// more term ORed with those already set).
func (w *PVWrapper) NodeAffinityIn(key string, values ...string) *PVWrapper {
	if w.Spec.NodeAffinity == nil {
		w.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{}}
	}
	w.Spec.NodeAffinity.Required.NodeSelectorTerms = append(w.Spec.NodeAffinity.Required.NodeSelectorTerms,
		LabelTerm(key, v1.NodeSelectorOpIn, values...))
	return w
}

// HostPath gives the PV a hostPath source (not migratable to CSI).
func (w *PVWrapper) HostPath(path string) *PVWrapper {
	w.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}
	return w
}

// CSI gives the PV a CSI source of driver.
func (w *PVWrapper) CSI(driver, handle string) *PVWrapper {
	w.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}
	return w
}

// AWSEBS gives the PV an in-tree AWS EBS source, migratable to CSI.
func (w *PVWrapper) AWSEBS(volumeID string) *PVWrapper {
	w.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: volumeID}}
	return w
}

// PVCWrapper builds a v1.PersistentVolumeClaim: st.MakePVC("default", "c").Request("1Gi").Obj().
type PVCWrapper struct{ v1.PersistentVolumeClaim }

// MakePVC returns a Pending claim namespace/name with UID name and
// resourceVersion "1".
func MakePVC(namespace, name string) *PVCWrapper {
	return &PVCWrapper{v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name), ResourceVersion: "1"},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}}
}

// Obj returns the built claim.
func (w *PVCWrapper) Obj() *v1.PersistentVolumeClaim { return &w.PersistentVolumeClaim }

// UID sets metadata.uid.
func (w *PVCWrapper) UID(uid string) *PVCWrapper { w.SetUID(types.UID(uid)); return w }

// ResourceVersion sets metadata.resourceVersion.
func (w *PVCWrapper) ResourceVersion(rv string) *PVCWrapper { w.SetResourceVersion(rv); return w }

// Annotation sets an annotation.
func (w *PVCWrapper) Annotation(k, v string) *PVCWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// StorageClass sets spec.storageClassName.
func (w *PVCWrapper) StorageClass(name string) *PVCWrapper {
	w.Spec.StorageClassName = &name
	return w
}

// Request sets spec.resources.requests[storage].
func (w *PVCWrapper) Request(q string) *PVCWrapper {
	w.Spec.Resources.Requests = v1.ResourceList{v1.ResourceStorage: resource.MustParse(q)}
	return w
}

// Selector sets spec.selector to match PVs labelled key=value.
func (w *PVCWrapper) Selector(key, value string) *PVCWrapper {
	w.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	return w
}

// AccessModes sets spec.accessModes.
func (w *PVCWrapper) AccessModes(modes ...v1.PersistentVolumeAccessMode) *PVCWrapper {
	w.Spec.AccessModes = modes
	return w
}

// VolumeMode sets spec.volumeMode.
func (w *PVCWrapper) VolumeMode(m v1.PersistentVolumeMode) *PVCWrapper {
	w.Spec.VolumeMode = &m
	return w
}

// VolumeName sets spec.volumeName (a claim pre-bound to, or bound to, a PV).
func (w *PVCWrapper) VolumeName(pv string) *PVCWrapper { w.Spec.VolumeName = pv; return w }

// Bound makes the claim fully bound to pv, as the PV controller leaves it:
// volumeName set, the bind-completed annotation and phase Bound.
func (w *PVCWrapper) Bound(pv string) *PVCWrapper {
	w.Spec.VolumeName = pv
	w.Status.Phase = v1.ClaimBound
	return w.Annotation("pv.kubernetes.io/bind-completed", "yes")
}

// Phase sets status.phase.
func (w *PVCWrapper) Phase(p v1.PersistentVolumeClaimPhase) *PVCWrapper { w.Status.Phase = p; return w }

// OwnedBy makes pod the claim's controller, as the ephemeral volume
// controller does for generic ephemeral volumes.
func (w *PVCWrapper) OwnedBy(pod *v1.Pod) *PVCWrapper {
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
	})
	return w
}

// Deleting sets a deletion timestamp.
func (w *PVCWrapper) Deleting() *PVCWrapper {
	now := metav1.Now()
	w.DeletionTimestamp = &now
	return w
}

// StorageClassWrapper builds a storagev1.StorageClass.
type StorageClassWrapper struct{ storagev1.StorageClass }

// MakeStorageClass returns a class named name with provisioner
// "kubernetes.io/no-provisioner" and volumeBindingMode Immediate, as the
// API server defaults it.
func MakeStorageClass(name string) *StorageClassWrapper {
	return &StorageClassWrapper{storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}}
}

// Obj returns the built class.
func (w *StorageClassWrapper) Obj() *storagev1.StorageClass { return &w.StorageClass }

// Provisioner sets the provisioner.
func (w *StorageClassWrapper) Provisioner(p string) *StorageClassWrapper {
	w.StorageClass.Provisioner = p
	return w
}

// WaitForFirstConsumer sets volumeBindingMode WaitForFirstConsumer.
func (w *StorageClassWrapper) WaitForFirstConsumer() *StorageClassWrapper {
	w.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	return w
}

// BindingMode sets volumeBindingMode; nil leaves it unset.
func (w *StorageClassWrapper) BindingMode(m *storagev1.VolumeBindingMode) *StorageClassWrapper {
	w.VolumeBindingMode = m
	return w
}

// AllowedTopology adds a term allowing nodes whose label key has one of values.
func (w *StorageClassWrapper) AllowedTopology(key string, values ...string) *StorageClassWrapper {
	w.AllowedTopologies = append(w.AllowedTopologies, v1.TopologySelectorTerm{
		MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{Key: key, Values: values}},
	})
	return w
}

// CSINodeWrapper builds a storagev1.CSINode.
type CSINodeWrapper struct{ storagev1.CSINode }

// MakeCSINode returns the CSINode of node name, with no drivers.
func MakeCSINode(name string) *CSINodeWrapper {
	return &CSINodeWrapper{storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}}
}

// Obj returns the built CSINode.
func (w *CSINodeWrapper) Obj() *storagev1.CSINode { return &w.CSINode }

// Annotation sets an annotation, e.g. v1.MigratedPluginsAnnotationKey.
func (w *CSINodeWrapper) Annotation(k, v string) *CSINodeWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// Driver adds a driver with nodeID and, when count is not nil, an allocatable volume count.
func (w *CSINodeWrapper) Driver(name, nodeID string, count *int32) *CSINodeWrapper {
	d := storagev1.CSINodeDriver{Name: name, NodeID: nodeID}
	if count != nil {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: count}
	}
	w.Spec.Drivers = append(w.Spec.Drivers, d)
	return w
}

// CSIDriverWrapper builds a storagev1.CSIDriver.
type CSIDriverWrapper struct{ storagev1.CSIDriver }

// MakeCSIDriver returns the CSIDriver name with an empty spec.
func MakeCSIDriver(name string) *CSIDriverWrapper {
	return &CSIDriverWrapper{storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}}
}

// Obj returns the built CSIDriver.
func (w *CSIDriverWrapper) Obj() *storagev1.CSIDriver { return &w.CSIDriver }

// StorageCapacity sets spec.storageCapacity.
func (w *CSIDriverWrapper) StorageCapacity(b bool) *CSIDriverWrapper {
	w.Spec.StorageCapacity = &b
	return w
}

// PreventPodSchedulingIfMissing sets spec.preventPodSchedulingIfMissing.
func (w *CSIDriverWrapper) PreventPodSchedulingIfMissing(b bool) *CSIDriverWrapper {
	w.Spec.PreventPodSchedulingIfMissing = &b
	return w
}

// CSIStorageCapacityWrapper builds a storagev1.CSIStorageCapacity.
type CSIStorageCapacityWrapper struct{ storagev1.CSIStorageCapacity }

// MakeCSIStorageCapacity returns the capacity namespace/name of storageClass,
// with no topology (which matches no node) and no capacity.
func MakeCSIStorageCapacity(namespace, name, storageClass string) *CSIStorageCapacityWrapper {
	return &CSIStorageCapacityWrapper{storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		StorageClassName: storageClass,
	}}
}

// Obj returns the built capacity.
func (w *CSIStorageCapacityWrapper) Obj() *storagev1.CSIStorageCapacity { return &w.CSIStorageCapacity }

// Topology sets nodeTopology to match nodes labelled key=value.
func (w *CSIStorageCapacityWrapper) Topology(key, value string) *CSIStorageCapacityWrapper {
	w.NodeTopology = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	return w
}

// Capacity sets capacity.
func (w *CSIStorageCapacityWrapper) Capacity(q string) *CSIStorageCapacityWrapper {
	w.CSIStorageCapacity.Capacity = ptr.To(resource.MustParse(q))
	return w
}

// MaximumVolumeSize sets maximumVolumeSize.
func (w *CSIStorageCapacityWrapper) MaximumVolumeSize(q string) *CSIStorageCapacityWrapper {
	w.CSIStorageCapacity.MaximumVolumeSize = ptr.To(resource.MustParse(q))
	return w
}
