// Package volumerestrictions provides VolumeRestrictions, the
// PreFilter/Filter plugin of kube-scheduler's default profile that keeps a
// pod away from volumes it may not share.
//
// It matches upstream kube-scheduler 1.37 on two rules:
//
//   - disk conflicts with the pods already on the node, for the in-tree
//     sources whose disks attach to one node at a time: a GCE PD (same
//     pdName) may be shared only if every user mounts it read-only, an AWS
//     EBS volume (same volumeID) never, an RBD image (a shared Ceph monitor,
//     same pool and image) and an iSCSI disk (same IQN) only read-only.
//     Other volume kinds, PVC-backed ones included, are not checked here;
//   - ReadWriteOncePod claims: a pod whose claim has that access mode is
//     rejected on every node while any scheduled pod uses the claim.
//     PreFilter counts those users once per cycle and AddPod/RemovePod keep
//     the count in step, so DefaultPreemption can free the claim by evicting
//     its user, which is why the rejection is Unschedulable.
//
// Generic ephemeral volumes are not looked at, as upstream does not.
package volumerestrictions

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "VolumeRestrictions"

	// ErrReasonDiskConflict is upstream's reason for a disk already in use on the node.
	ErrReasonDiskConflict = "node(s) had no available disk"
	// ErrReasonReadWriteOncePodConflict is upstream's reason for a
	// ReadWriteOncePod claim already used by a scheduled pod.
	ErrReasonReadWriteOncePodConflict = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

	preFilterStateKey framework.StateKey = "PreFilter" + Name
)

type volumeRestrictions struct {
	pvcLister corelisters.PersistentVolumeClaimLister
	handle    framework.Handle
}

var (
	_ framework.PreFilterPlugin     = (*volumeRestrictions)(nil)
	_ framework.PreFilterExtensions = (*volumeRestrictions)(nil)
	_ framework.FilterPlugin        = (*volumeRestrictions)(nil)
	_ framework.EnqueueExtensions   = (*volumeRestrictions)(nil)
)

// New returns the plugin; it takes no args. Claims are read from the shared
// informer, which the scheduler starts and syncs for the instance; claim
// users from the cycle's snapshot.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return &volumeRestrictions{
		pvcLister: h.SharedInformerFactory().Core().V1().PersistentVolumeClaims().Lister(),
		handle:    h,
	}, nil
}

func (*volumeRestrictions) Name() string { return Name }

// preFilterState is what Filter needs for the ReadWriteOncePod rule,
// computed once per cycle. The disk rules read the pod itself, so that they
// give their verdict even when PreFilter did not run, as upstream's do.
type preFilterState struct {
	// rwopClaims are the names of the pod's ReadWriteOncePod claims.
	rwopClaims sets.Set[string]
	// conflictingRefs counts references to rwopClaims by scheduled pods,
	// as adjusted by AddPod/RemovePod.
	conflictingRefs int
}

// Clone copies the count, which AddPod/RemovePod change per clone; the
// claim names are read-only and shared.
func (s *preFilterState) Clone() framework.StateData {
	c := *s
	return &c
}

// refsOf counts the volumes of pod that use one of the ReadWriteOncePod claims.
func (s *preFilterState) refsOf(pod *v1.Pod) int {
	n := 0
	for i := range pod.Spec.Volumes {
		if src := pod.Spec.Volumes[i].PersistentVolumeClaim; src != nil && s.rwopClaims.Has(src.ClaimName) {
			n++
		}
	}
	return n
}

// PreFilter looks up the pod's claims and counts the scheduled users of
// its ReadWriteOncePod ones. A pod with no disk to check and no claim in
// use skips Filter. A missing claim cannot be fixed by any node choice,
// hence UnschedulableAndUnresolvable until it is created.
func (pl *volumeRestrictions) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	hasDisk := false
	for i := range pod.Spec.Volumes {
		if hasDiskRestrictions(&pod.Spec.Volumes[i]) {
			hasDisk = true
			break
		}
	}
	claims, err := pl.readWriteOncePodClaims(pod)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
		}
		return nil, framework.AsStatus(err)
	}
	refs := 0
	if len(claims) > 0 {
		storage := pl.handle.SnapshotSharedLister().StorageInfos()
		for name := range claims {
			// A ReadWriteOncePod claim has at most one user.
			if storage.IsPVCUsedByPods(pod.Namespace + "/" + name) {
				refs++
			}
		}
	}
	if !hasDisk && refs == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, &preFilterState{rwopClaims: claims, conflictingRefs: refs})
	return nil, nil
}

// readWriteOncePodClaims returns the names of the pod's claims with the
// ReadWriteOncePod access mode. Every claim must exist, whatever its mode.
func (pl *volumeRestrictions) readWriteOncePodClaims(pod *v1.Pod) (sets.Set[string], error) {
	claims := sets.New[string]()
	for i := range pod.Spec.Volumes {
		src := pod.Spec.Volumes[i].PersistentVolumeClaim
		if src == nil {
			continue
		}
		pvc, err := pl.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(src.ClaimName)
		if err != nil {
			return nil, err
		}
		if slices.Contains(pvc.Spec.AccessModes, v1.ReadWriteOncePod) {
			claims.Insert(pvc.Name)
		}
	}
	return claims, nil
}

// PreFilterExtensions returns the plugin itself: the ReadWriteOncePod count
// depends on which pods are assumed to run.
func (pl *volumeRestrictions) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod counts a pod that would run (a nominated pod) as a claim user.
func (*volumeRestrictions) AddPod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podInfoToAdd *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := readState(state)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.conflictingRefs += s.refsOf(podInfoToAdd.Pod)
	return nil
}

// RemovePod stops counting a pod that would be evicted, which is how
// preemption frees a ReadWriteOncePod claim.
func (*volumeRestrictions) RemovePod(_ context.Context, state *framework.CycleState, _ *v1.Pod, podInfoToRemove *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := readState(state)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.conflictingRefs -= s.refsOf(podInfoToRemove.Pod)
	return nil
}

// readState returns the cycle's preFilterState, with upstream's message
// when PreFilter did not write one.
func readState(state *framework.CycleState) (*preFilterState, error) {
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, fmt.Errorf("cannot read %q from cycleState", preFilterStateKey)
	}
	return s, err
}

// Filter rejects a node where one of the pod's disks is already in use
// incompatibly, then any node while a ReadWriteOncePod claim of the pod is
// in use. Both can be cured by evicting the other user. As upstream, the
// disk rules come first and do not need PreFilter's state.
func (*volumeRestrictions) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !hasDiskRestrictions(v) {
			continue
		}
		for _, existing := range nodeInfo.Pods {
			if conflictsWith(v, existing.Pod) {
				if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
					logger.Info("Disk in use on the node", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "volume", v.Name, "existingPod", klog.KObj(existing.Pod))
				}
				return framework.NewStatus(framework.Unschedulable, ErrReasonDiskConflict)
			}
		}
	}
	s, err := readState(state)
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.conflictingRefs > 0 {
		return framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict)
	}
	return nil
}

// hasDiskRestrictions reports whether v is of a kind the disk conflict rules cover.
func hasDiskRestrictions(v *v1.Volume) bool {
	return v.GCEPersistentDisk != nil || v.AWSElasticBlockStore != nil || v.RBD != nil || v.ISCSI != nil
}

// conflictsWith reports whether v uses a disk one of other's volumes
// already uses in a way that cannot be shared.
func conflictsWith(v *v1.Volume, other *v1.Pod) bool {
	for i := range other.Spec.Volumes {
		e := &other.Spec.Volumes[i]
		if v.GCEPersistentDisk != nil && e.GCEPersistentDisk != nil &&
			v.GCEPersistentDisk.PDName == e.GCEPersistentDisk.PDName && (!v.GCEPersistentDisk.ReadOnly || !e.GCEPersistentDisk.ReadOnly) {
			return true
		}
		// EBS volumes attach to a single instance, read-only or not.
		if v.AWSElasticBlockStore != nil && e.AWSElasticBlockStore != nil &&
			v.AWSElasticBlockStore.VolumeID == e.AWSElasticBlockStore.VolumeID {
			return true
		}
		if v.ISCSI != nil && e.ISCSI != nil &&
			v.ISCSI.IQN == e.ISCSI.IQN && (!v.ISCSI.ReadOnly || !e.ISCSI.ReadOnly) {
			return true
		}
		// An RBD image is identified by pool and name within a Ceph
		// cluster, which any shared monitor identifies.
		if v.RBD != nil && e.RBD != nil &&
			v.RBD.RBDPool == e.RBD.RBDPool && v.RBD.RBDImage == e.RBD.RBDImage &&
			shareMonitor(v.RBD.CephMonitors, e.RBD.CephMonitors) && (!v.RBD.ReadOnly || !e.RBD.ReadOnly) {
			return true
		}
	}
	return false
}

func shareMonitor(a, b []string) bool {
	for _, m := range a {
		if slices.Contains(b, m) {
			return true
		}
	}
	return false
}

// EventsToRegister: a deleted pod frees its disks and claims (an
// AssignedPod event, as upstream 1.37 registers it); a new node
// has no disk in use; a created claim lets PreFilter read its access mode.
// Volumes are immutable, so pod updates never matter, and claims' access
// modes are immutable, so only claim creation does. With queueing hints
// (GA since 1.34) upstream registers Node/Add alone, without a hint.
func (pl *volumeRestrictions) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodDeleted},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterPersistentVolumeClaimAdded},
	}, nil
}

// isSchedulableAfterPersistentVolumeClaimAdded queues the pod when one of
// its claims was created.
func (*volumeRestrictions) isSchedulableAfterPersistentVolumeClaimAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, pvc, err := helper.As[*v1.PersistentVolumeClaim](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterPersistentVolumeClaimAdded: %w", err)
	}
	if pvc.Namespace != pod.Namespace {
		return framework.QueueSkip, nil
	}
	for i := range pod.Spec.Volumes {
		if src := pod.Spec.Volumes[i].PersistentVolumeClaim; src != nil && src.ClaimName == pvc.Name {
			logger.V(5).Info("A PersistentVolumeClaim of the pod was created; it may make the pod schedulable", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
			return framework.Queue, nil
		}
	}
	logger.V(5).Info("A PersistentVolumeClaim the pod does not use was created", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
	return framework.QueueSkip, nil
}

// isSchedulableAfterAssignedPodDeleted queues the pod when the deleted pod held one
// of its disks or used one of its claims. Like upstream, it does not fetch
// the claim to check for ReadWriteOncePod (a lookup per event is too
// costly for a hint), and it only considers pods of the same namespace.
func (*volumeRestrictions) isSchedulableAfterAssignedPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterAssignedPodDeleted: %w", err)
	}
	if deleted.Namespace != pod.Namespace {
		return framework.QueueSkip, nil
	}
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; hasDiskRestrictions(v) && conflictsWith(v, deleted) {
			logger.V(5).Info("A pod holding a disk the pod needs was deleted; it may make the pod schedulable", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
			return framework.Queue, nil
		}
	}
	claims := sets.New[string]()
	for i := range pod.Spec.Volumes {
		if src := pod.Spec.Volumes[i].PersistentVolumeClaim; src != nil {
			claims.Insert(src.ClaimName)
		}
	}
	for i := range deleted.Spec.Volumes {
		if src := deleted.Spec.Volumes[i].PersistentVolumeClaim; src != nil && claims.Has(src.ClaimName) {
			logger.V(5).Info("A pod using a claim of the pod was deleted; it may make the pod schedulable", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
			return framework.Queue, nil
		}
	}
	logger.V(5).Info("An unrelated pod was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(deleted))
	return framework.QueueSkip, nil
}
