// Package volumezone provides VolumeZone, the PreFilter/Filter plugin of
// kube-scheduler's default profile that keeps a pod off nodes outside the
// zone or region of the PersistentVolumes it already has.
//
// It matches upstream kube-scheduler 1.37: only PersistentVolumeClaims
// named in pod.spec.volumes are looked at (generic ephemeral volumes and
// inline volumes are not), the topology is read from the bound PV's
// topology.kubernetes.io/{zone,region} labels and their deprecated
// failure-domain.beta.kubernetes.io twins (a value may list several zones
// joined by "__"), claims still waiting for their first consumer are left
// to VolumeBinding, and nodes without any topology label accept every pod
// so single-zone clusters need no labels. PV node affinity is not checked
// here: VolumeBinding does that.
package volumezone

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "VolumeZone"
	// ErrReasonConflict is upstream's reason for a node outside the volumes' topology.
	ErrReasonConflict = "node(s) had no available volume zone"

	preFilterStateKey framework.StateKey = "PreFilter" + Name

	// zoneDelimiter separates the zones of a multi-zone PV label value
	// (cloud-provider's LabelMultiZoneDelimiter).
	zoneDelimiter = "__"
)

// topologyLabels are the PV labels that constrain nodes, beta labels first
// as upstream orders them (the order shows in which mismatch is logged). An
// array returned by value: nothing shared to change, nothing allocated.
func topologyLabels() [4]string {
	return [...]string{
		v1.LabelFailureDomainBetaZone,
		v1.LabelFailureDomainBetaRegion,
		v1.LabelTopologyZone,
		v1.LabelTopologyRegion,
	}
}

// gaLabel returns the GA twin of a deprecated beta topology label, so that a
// PV labelled before the GA labels existed still matches a node labelled
// after.
func gaLabel(key string) string {
	switch key {
	case v1.LabelFailureDomainBetaZone:
		return v1.LabelTopologyZone
	case v1.LabelFailureDomainBetaRegion:
		return v1.LabelTopologyRegion
	}
	return key
}

type volumeZone struct {
	pvLister  corelisters.PersistentVolumeLister
	pvcLister corelisters.PersistentVolumeClaimLister
	scLister  storagelisters.StorageClassLister
}

var (
	_ framework.PreFilterPlugin   = (*volumeZone)(nil)
	_ framework.FilterPlugin      = (*volumeZone)(nil)
	_ framework.EnqueueExtensions = (*volumeZone)(nil)
)

// New returns the plugin; it takes no args. Its listers come from the
// shared informers, which the scheduler starts and syncs for the instance.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	f := h.SharedInformerFactory()
	return &volumeZone{
		pvLister:  f.Core().V1().PersistentVolumes().Lister(),
		pvcLister: f.Core().V1().PersistentVolumeClaims().Lister(),
		scLister:  f.Storage().V1().StorageClasses().Lister(),
	}, nil
}

func (*volumeZone) Name() string { return Name }

// pvTopology is one topology label of a PV: the node must carry key (or
// its GA twin) with one of values.
type pvTopology struct {
	pvName string
	key    string
	values sets.Set[string]
}

// preFilterState is the topology of the pod's bound PVs. It never changes
// after PreFilter, so clones share it.
type preFilterState []pvTopology

func (s preFilterState) Clone() framework.StateData { return s }

// PreFilter resolves the PVs of the pod's claims once per cycle. A pod
// whose PVs carry no topology label has nothing to filter and skips.
func (pl *volumeZone) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	topologies, status := pl.podTopologies(klog.FromContext(ctx), pod)
	if !status.IsSuccess() {
		return nil, status
	}
	if len(topologies) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, preFilterState(topologies))
	return nil, nil
}

// PreFilterExtensions returns nil: other pods do not change a PV's topology.
func (*volumeZone) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// podTopologies returns the topology constraints of the PVs bound to the
// pod's claims. A claim or class that is missing, or a claim that is
// neither bound nor waiting for its first consumer, makes the pod
// unschedulable everywhere: no node can fix that.
func (pl *volumeZone) podTopologies(logger klog.Logger, pod *v1.Pod) ([]pvTopology, *framework.Status) {
	var out []pvTopology
	for i := range pod.Spec.Volumes {
		src := pod.Spec.Volumes[i].PersistentVolumeClaim
		if src == nil {
			continue
		}
		if src.ClaimName == "" {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "PersistentVolumeClaim had no name")
		}
		pvc, err := pl.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(src.ClaimName)
		if err != nil {
			return nil, lookupStatus(err)
		}
		if pvc.Spec.VolumeName == "" {
			scName := volumehelpers.GetPersistentVolumeClaimClass(pvc)
			if scName == "" {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "PersistentVolumeClaim had no pv name and storageClass name")
			}
			class, err := pl.scLister.Get(scName)
			if err != nil {
				return nil, lookupStatus(err)
			}
			if class.VolumeBindingMode == nil {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("VolumeBindingMode not set for StorageClass %q", scName))
			}
			if *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
				// VolumeBinding picks a PV (or provisions one) fitting the
				// node it chooses; there is no zone to enforce yet.
				continue
			}
			// An Immediate claim should have been bound already; until the
			// PV controller binds it no node can be chosen.
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "PersistentVolume had no name")
		}
		pv, err := pl.pvLister.Get(pvc.Spec.VolumeName)
		if err != nil {
			return nil, lookupStatus(err)
		}
		out = append(out, pvTopologies(logger, pv)...)
	}
	return out, nil
}

// lookupStatus turns a lister error into a status: a missing object is a
// rejection that waits for the object to appear, anything else an error.
func lookupStatus(err error) *framework.Status {
	if apierrors.IsNotFound(err) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	return framework.AsStatus(err)
}

// pvTopologies reads the topology labels of pv. A label whose value cannot
// be parsed is ignored rather than blocking the pod, as upstream does. The
// PV's spec.nodeAffinity is VolumeBinding's business, not this plugin's.
func pvTopologies(logger klog.Logger, pv *v1.PersistentVolume) []pvTopology {
	var out []pvTopology
	for _, key := range topologyLabels() {
		value, ok := pv.Labels[key]
		if !ok {
			continue
		}
		zones, err := parseZones(value)
		if err != nil {
			logger.V(5).Info("Ignoring unparsable topology label of PersistentVolume", "pv", klog.KObj(pv), "label", key+":"+value, "err", err)
			continue
		}
		out = append(out, pvTopology{pvName: pv.Name, key: key, values: zones})
	}
	return out
}

// parseZones splits a multi-zone label value; an empty element makes the
// whole value invalid.
func parseZones(value string) (sets.Set[string], error) {
	zones := sets.New[string]()
	for _, z := range strings.Split(value, zoneDelimiter) {
		z = strings.TrimSpace(z)
		if z == "" {
			return nil, fmt.Errorf("%q separated list (%q) must not contain an empty string", zoneDelimiter, value)
		}
		zones.Insert(z)
	}
	return zones, nil
}

// Filter rejects a node whose topology labels do not match every topology
// label of the pod's PVs. A node may carry labels the PVs do not have
// (e.g. a regional volume on a zonal node). Preemption cannot move a
// volume, hence UnschedulableAndUnresolvable.
func (pl *volumeZone) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	if len(pod.Spec.Volumes) == 0 {
		return nil
	}
	topologies, err := framework.ReadAs[preFilterState](state, preFilterStateKey)
	if err != nil {
		// Filter called without PreFilter (e.g. by an out-of-tree caller):
		// compute the same answer rather than fail.
		var status *framework.Status
		if topologies, status = pl.podTopologies(klog.FromContext(ctx), pod); !status.IsSuccess() {
			return status
		}
	}
	node := nodeInfo.Node()
	if !hasTopologyLabel(node) {
		// A node without any topology label is taken to be in the
		// cluster's only zone.
		return nil
	}
	for _, t := range topologies {
		v, ok := node.Labels[t.key]
		if !ok {
			v, ok = node.Labels[gaLabel(t.key)]
		}
		if !ok || !t.values.Has(v) {
			if logger := klog.FromContext(ctx).V(10); logger.Enabled() {
				logger.Info("Node does not match the topology of a PersistentVolume of the pod", "pod", klog.KObj(pod), "node", klog.KObj(node), "pv", klog.KRef("", t.pvName), "label", t.key)
			}
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
		}
	}
	return nil
}

func hasTopologyLabel(node *v1.Node) bool {
	for _, key := range topologyLabels() {
		if _, ok := node.Labels[key]; ok {
			return true
		}
	}
	return false
}

// EventsToRegister lists what can change the verdict: a node joining or
// getting topology labels, a WaitForFirstConsumer class appearing (the
// class's binding mode is immutable, so class updates never matter), the
// pod's claim appearing or getting bound, and a PV appearing or changing
// its topology labels. With queueing hints (GA since 1.34) upstream drops
// UpdateNodeTaint from the node event; node events have no hint.
func (pl *volumeZone) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add}, QueueingHintFn: pl.isSchedulableAfterStorageClassAdded},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterPersistentVolumeClaimChange},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}, QueueingHintFn: pl.isSchedulableAfterPersistentVolumeChange},
	}, nil
}

// isSchedulableAfterStorageClassAdded: only a WaitForFirstConsumer class
// can turn a rejection into a pass, by letting an unbound claim be skipped.
func (*volumeZone) isSchedulableAfterStorageClassAdded(logger klog.Logger, pod *v1.Pod, _, newObj any) (framework.QueueingHint, error) {
	_, class, err := helper.As[*storagev1.StorageClass](nil, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterStorageClassAdded: %w", err)
	}
	if class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		logger.V(5).Info("StorageClass added without WaitForFirstConsumer binding; it cannot make the pod schedulable", "pod", klog.KObj(pod), "storageClass", klog.KObj(class))
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("StorageClass with WaitForFirstConsumer binding added; it may make the pod schedulable", "pod", klog.KObj(pod), "storageClass", klog.KObj(class))
	return framework.Queue, nil
}

// isSchedulableAfterPersistentVolumeClaimChange queues the pod when one of
// its own claims was created or changed (e.g. got its volumeName).
func (*volumeZone) isSchedulableAfterPersistentVolumeClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	_, pvc, err := helper.As[*v1.PersistentVolumeClaim](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterPersistentVolumeClaimChange: %w", err)
	}
	if podUsesClaim(pod, pvc) {
		logger.V(5).Info("A PersistentVolumeClaim of the pod was added or updated; it may make the pod schedulable", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
		return framework.Queue, nil
	}
	logger.V(5).Info("A PersistentVolumeClaim the pod does not use was added or updated", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc))
	return framework.QueueSkip, nil
}

func podUsesClaim(pod *v1.Pod, pvc *v1.PersistentVolumeClaim) bool {
	if pvc == nil || pvc.Namespace != pod.Namespace {
		return false
	}
	for i := range pod.Spec.Volumes {
		if src := pod.Spec.Volumes[i].PersistentVolumeClaim; src != nil && src.ClaimName == pvc.Name {
			return true
		}
	}
	return false
}

// isSchedulableAfterPersistentVolumeChange queues on every new PV, and on
// an update only when the PV's topology labels changed. Which pod's claim
// the PV is bound to is not checked, as upstream does not.
func (*volumeZone) isSchedulableAfterPersistentVolumeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldPV, newPV, err := helper.As[*v1.PersistentVolume](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected objects in isSchedulableAfterPersistentVolumeChange: %w", err)
	}
	if oldPV == nil {
		logger.V(5).Info("PersistentVolume added; it may make the pod schedulable", "pod", klog.KObj(pod), "pv", klog.KObj(newPV))
		return framework.Queue, nil
	}
	if !equalTopologies(pvTopologies(logger, oldPV), pvTopologies(logger, newPV)) {
		logger.V(5).Info("Topology of a PersistentVolume changed; it may make the pod schedulable", "pod", klog.KObj(pod), "pv", klog.KObj(newPV))
		return framework.Queue, nil
	}
	logger.V(5).Info("PersistentVolume updated without a topology change", "pod", klog.KObj(pod), "pv", klog.KObj(newPV))
	return framework.QueueSkip, nil
}

// equalTopologies compares two results of pvTopologies of the same PV;
// both list labels in topologyLabels() order.
func equalTopologies(a, b []pvTopology) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || !a[i].values.Equal(b[i].values) {
			return false
		}
	}
	return true
}
