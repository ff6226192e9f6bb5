package controllers

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// The devices a held pod would get, which its WaitingPod shows: the
// scheduler decided them in Reserve, and no API object shows them until
// PreBind writes them, after Permit.

// ClaimAllocations is the scheduler's own view of ResourceClaims, which
// the ResourceClaimTracker of its DRA manager gives: a held pod's devices
// are set aside there in Reserve and written to its claims only in PreBind,
// after Permit, so no API object shows them while the pod waits.
type ClaimAllocations interface {
	// Get returns a claim as the scheduler knows it.
	Get(namespace, claimName string) (*resourceapi.ResourceClaim, error)
	// GetPendingAllocation returns the allocation of a claim decided in
	// Reserve and not written yet, or nil.
	GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult
	// PendingExtendedResourceClaim returns the claim, in memory until
	// PreBind creates it, whose allocation Reserve decided for the
	// extended resources backed by DRA of the pod with podUID, or nil.
	PendingExtendedResourceClaim(podUID types.UID) *resourceapi.ResourceClaim
}

// heldDevices are the devices a held pod would get: per claim it names,
// and for its extended resources backed by DRA.
type heldDevices struct {
	claims   []schedulingv1alpha1.ClaimAllocation
	extended []schedulingv1alpha1.AllocatedDevice
}

// devicesOf is, while the record's pod is held, the devices it would get,
// read from the scheduler's memory: those set aside for its extended
// resources backed by DRA, and for each of its ResourceClaims the
// allocation made in Reserve for the pod, or the claim's own allocation
// when it was allocated before (a claim shared with a running pod). Only
// the pod's own claims are read, found as DynamicResources finds them: the
// claim an entry names, or the one made from its template for this pod. A
// claim not made yet, or without an allocation, is left out: it holds no
// devices for the pod.
func (m *WaitingPodMirror) devicesOf(ctx context.Context, rec *record) heldDevices {
	if rec.pod == nil || !rec.observed || rec.resolved {
		return heldDevices{}
	}
	pod := rec.pod
	var held heldDevices
	if claim := m.claims.PendingExtendedResourceClaim(pod.UID); claim != nil && claim.Status.Allocation != nil {
		held.extended = allocatedDevices(claim.Status.Allocation)
	}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, podClaim)
		if err != nil || name == nil {
			continue
		}
		claim, err := m.claims.Get(pod.Namespace, *name)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Claim of held pod not known to the scheduler", "pod", klog.KObj(pod), "resourceClaim", *name, "err", err)
			continue
		}
		if mustCheckOwner && resourceclaim.IsForPod(pod, claim, false) != nil {
			// Made from the template for another pod of the name
			// (PodGroup claims, DRAWorkloadResourceClaims, are off
			// by default upstream and not built).
			continue
		}
		allocation := m.claims.GetPendingAllocation(claim.UID)
		if allocation == nil {
			allocation = claim.Status.Allocation
		}
		if allocation == nil {
			continue
		}
		held.claims = append(held.claims, schedulingv1alpha1.ClaimAllocation{
			Name: podClaim.Name, ResourceClaim: claim.Name, Devices: allocatedDevices(allocation),
		})
	}
	return held
}

// allocatedDevices are the devices of allocation, in its order.
func allocatedDevices(allocation *resourceapi.AllocationResult) []schedulingv1alpha1.AllocatedDevice {
	var out []schedulingv1alpha1.AllocatedDevice
	for _, r := range allocation.Devices.Results {
		out = append(out, schedulingv1alpha1.AllocatedDevice{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	return out
}
