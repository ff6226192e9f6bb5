package dynamicresources

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// claimStore holds the pod's ResourceClaims, one per
// pod.spec.resourceClaims entry that has a claim, followed by the special
// claim of its extended resources backed by DRA, if any. Upstream's also
// holds the PodGroup a claim is bound to (DRAWorkloadResourceClaims, off
// by default), not built here.
//
// The zero value is usable and empty.
type claimStore struct {
	claims []*resourceapi.ResourceClaim
	// numUserClaims is the number of claims before the special one.
	numUserClaims int
	// initialExtendedResourceClaimUID is the special claim's UID as of
	// PreFilter (a made-up one while it only exists in memory), under
	// which Reserve recorded its allocation as in flight.
	initialExtendedResourceClaimUID types.UID
}

func newClaimStore(claims []*resourceapi.ResourceClaim, extendedResourceClaim *resourceapi.ResourceClaim) claimStore {
	cs := claimStore{claims: claims, numUserClaims: len(claims)}
	if extendedResourceClaim != nil {
		cs.claims = append(cs.claims, extendedResourceClaim)
		cs.initialExtendedResourceClaimUID = extendedResourceClaim.UID
	}
	return cs
}

// empty returns true when there are no ResourceClaims.
func (cs *claimStore) empty() bool {
	return len(cs.claims) == 0
}

// len returns the number of claims.
func (cs *claimStore) len() int {
	return len(cs.claims)
}

// all returns an iterator over all claims with their index.
func (cs *claimStore) all() iter.Seq2[int, *resourceapi.ResourceClaim] {
	return func(yield func(int, *resourceapi.ResourceClaim) bool) {
		for i, claim := range cs.claims {
			if !yield(i, claim) {
				return
			}
		}
	}
}

// allUserClaims returns an iterator over the claims of
// pod.spec.resourceClaims, without the special one.
func (cs *claimStore) allUserClaims() iter.Seq2[int, *resourceapi.ResourceClaim] {
	return func(yield func(int, *resourceapi.ResourceClaim) bool) {
		for i, claim := range cs.claims[:cs.numUserClaims] {
			if !yield(i, claim) {
				return
			}
		}
	}
}

// noUserClaim returns true when the pod has no claim of its own.
func (cs *claimStore) noUserClaim() bool {
	return cs.numUserClaims == 0
}

// extendedResourceClaim returns the special claim, or nil.
func (cs *claimStore) extendedResourceClaim() *resourceapi.ResourceClaim {
	if len(cs.claims) == cs.numUserClaims {
		return nil
	}
	return cs.claims[cs.numUserClaims]
}

// updateExtendedResourceClaim replaces the special claim with c, the
// claim PreBind created from it.
func (cs *claimStore) updateExtendedResourceClaim(c *resourceapi.ResourceClaim) error {
	if len(cs.claims) == cs.numUserClaims {
		return errors.New("no extended resource claim")
	}
	cs.claims[cs.numUserClaims] = c
	return nil
}

// toAllocate returns an iterator over the claims without an allocation
// result, with their index in the store (not sequential).
func (cs *claimStore) toAllocate() iter.Seq2[int, *resourceapi.ResourceClaim] {
	return func(yield func(int, *resourceapi.ResourceClaim) bool) {
		for i, claim := range cs.claims {
			if claim.Status.Allocation != nil {
				continue
			}
			if !yield(i, claim) {
				return
			}
		}
	}
}

// get returns the claim at index i.
func (cs *claimStore) get(i int) *resourceapi.ResourceClaim {
	return cs.claims[i]
}

// set replaces the claim at index i.
func (cs *claimStore) set(i int, c *resourceapi.ResourceClaim) {
	cs.claims[i] = c
}

// isSchedulableAfterClaimChange is invoked for add, update and delete
// claim events. It checks whether that change made a previously
// unschedulable pod schedulable, erring on the side of letting a
// scheduling attempt happen. A deletion the watch missed arrives with the
// last known claim (the queue unwraps tombstones), where upstream queues
// without looking.
func (pl *dynamicResources) isSchedulableAfterClaimChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	originalClaim, modifiedClaim, err := helper.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected object in isSchedulableAfterClaimChange: %w", err)
	}

	if modifiedClaim == nil {
		// Deleted, final state known. The allocation is expected to be
		// nil: events come through the claim assume cache and the
		// scheduler is the only one adding allocations, so the update
		// removing it cannot have been missed.
		if originalClaim.Status.Allocation == nil {
			logger.V(6).Info("claim with structured parameters got deleted, had no allocation")
			return framework.QueueSkip, nil
		}
		logger.V(6).Info("claim with structured parameters got deleted, had an allocation")
		return framework.Queue, nil
	}

	usesClaim := false
	if err := pl.foreachPodResourceClaim(pod, func(_ string, claim *resourceapi.ResourceClaim) {
		if claim.UID == modifiedClaim.UID {
			usesClaim = true
		}
	}); err != nil {
		// foreachPodResourceClaim only fails for "not schedulable".
		if loggerV := logger.V(6); loggerV.Enabled() {
			owner := metav1.GetControllerOf(modifiedClaim)
			loggerV.Info("pod is not schedulable after resource claim change", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim), "claimOwner", owner, "reason", err.Error())
		}
		return framework.QueueSkip, nil
	}

	if originalClaim != nil &&
		originalClaim.Status.Allocation != nil &&
		modifiedClaim.Status.Allocation == nil {
		// Deallocated: this might have made resources available for other pods.
		logger.V(6).Info("claim with structured parameters got deallocated", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim))
		return framework.Queue, nil
	}

	if !usesClaim {
		logger.V(6).Info("unrelated claim got modified", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim))
		return framework.QueueSkip, nil
	}

	if originalClaim == nil {
		logger.V(5).Info("claim for pod got created", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim))
		return framework.Queue, nil
	}

	// If the entire status is as before, something else changed that
	// does not matter (in practice, the driver adding its finalizer).
	if apiequality.Semantic.DeepEqual(&originalClaim.Status, &modifiedClaim.Status) {
		logger.V(6).Info("claim for pod got modified where the pod doesn't care", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim))
		return framework.QueueSkip, nil
	}

	logger.V(5).Info("status of claim for pod got updated", "pod", klog.KObj(pod), "claim", klog.KObj(modifiedClaim))
	return framework.Queue, nil
}

// isSchedulableAfterTargetPodUpdate is invoked for updates of the pod's
// generated claims: it queues once every claim the pod waits for exists.
func (pl *dynamicResources) isSchedulableAfterTargetPodUpdate(logger klog.Logger, pod *v1.Pod, _, newObj any) (framework.QueueingHint, error) {
	_, modifiedPod, err := helper.As[*v1.Pod](nil, newObj)
	if err != nil {
		return framework.Queue, fmt.Errorf("unexpected object in isSchedulableAfterTargetPodUpdate: %w", err)
	}
	if err := pl.foreachPodResourceClaim(modifiedPod, nil); err != nil {
		logger.V(6).Info("pod is not schedulable after being updated", "pod", klog.KObj(pod))
		return framework.QueueSkip, nil
	}
	logger.V(5).Info("pod got updated and is schedulable", "pod", klog.KObj(pod))
	return framework.Queue, nil
}

// podResourceClaims returns the ResourceClaims of pod.spec.resourceClaims.
func (pl *dynamicResources) podResourceClaims(pod *v1.Pod) ([]*resourceapi.ResourceClaim, error) {
	claims := make([]*resourceapi.ResourceClaim, 0, len(pod.Spec.ResourceClaims))
	if err := pl.foreachPodResourceClaim(pod, func(_ string, claim *resourceapi.ResourceClaim) {
		// The pointer is the cache's: a claim modified meanwhile is a new
		// object there, never this one mutated.
		claims = append(claims, claim)
	}); err != nil {
		return nil, err
	}
	return claims, nil
}

// foreachPodResourceClaim checks that each ResourceClaim of the pod
// exists, is not being deleted and, for one generated from a template,
// belongs to the pod. It calls cb, if any, for each claim.
func (pl *dynamicResources) foreachPodResourceClaim(pod *v1.Pod, cb func(podResourceName string, claim *resourceapi.ResourceClaim)) error {
	if pl.draManager == nil && len(pod.Spec.ResourceClaims) > 0 {
		return errNoManager
	}
	for _, resource := range pod.Spec.ResourceClaims {
		claimName, mustCheckOwner, err := resourceclaim.Name(pod, &resource)
		if err != nil {
			return err
		}
		// No claim was generated for this entry, which is valid.
		if claimName == nil {
			continue
		}
		claim, err := pl.draManager.ResourceClaims().Get(pod.Namespace, *claimName)
		if err != nil {
			return err
		}
		if claim.DeletionTimestamp != nil {
			return fmt.Errorf("resourceclaim %q is being deleted", claim.Name)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				return err
			}
		}
		if cb != nil {
			cb(resource.Name, claim)
		}
	}
	return nil
}

// bindClaim records, for a claim not reserved for the pod yet, the
// allocation made in Reserve (if any) and the pod in reservedFor. It
// returns the updated claim and a function to run once PreBind succeeded.
func (pl *dynamicResources) bindClaim(ctx context.Context, state *stateData, index int, pod *v1.Pod, nodeName string) (*resourceapi.ResourceClaim, func(), error) {
	logger := klog.FromContext(ctx)
	claim := state.claims.get(index)
	allocation := state.informationsForClaim[index].allocation
	isExtendedResourceClaim := false
	if claim == state.claims.extendedResourceClaim() {
		// The node's device plugins provide the extended resources.
		if allocation == nil && claim.Spec.Devices.Requests == nil {
			return claim, nil, nil
		}
		isExtendedResourceClaim = true
	}
	// The UID the allocation is in flight under: the special claim's
	// in-memory one until it is created.
	claimUID := claim.UID
	resourceClaimModified := false
	defer func() {
		if !resourceClaimModified {
			return
		}
		if isExtendedResourceClaim {
			// Created just now: the informer may not have it yet.
			pl.waitForExtendedClaimInAssumeCache(ctx, claim)
			return
		}
		// This can fail, but only for reasons that are okay (concurrent
		// delete or update).
		if err := pl.draManager.ResourceClaims().AssumeClaimAfterAPICall(claim); err != nil {
			logger.V(5).Info("Claim not stored in assume cache", "err", err, "claim", klog.KObj(claim), "uid", claim.UID, "resourceVersion", claim.ResourceVersion)
		} else {
			logger.V(5).Info("Claim stored in assume cache", "claim", klog.KObj(claim), "uid", claim.UID, "resourceVersion", claim.ResourceVersion)
		}
	}()

	// Run when PreBind succeeds: the allocation is written and assumed,
	// it is no longer in flight.
	successCleanup := func() {
		if allocation != nil && pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(claimUID, true) {
			logger.V(5).Info("Removed claim from in-flight claims", "claim", klog.KObj(claim), "uid", claimUID, "resourceVersion", claim.ResourceVersion, "allocation", klog.Format(allocation))
		}
	}

	if isExtendedResourceClaim && isSpecialClaimName(claim.Name) {
		created, err := pl.createExtendedResourceClaimInAPI(ctx, pod, nodeName, state)
		if err != nil {
			return nil, nil, err
		}
		claim = created
		resourceClaimModified = true
		// Unreserve deletes the claim from now on.
		if err := state.claims.updateExtendedResourceClaim(claim); err != nil {
			return nil, nil, fmt.Errorf("internal error: update extended ResourceClaim: %w", err)
		}
	}

	logger.V(5).Info("preparing claim status update", "claim", klog.KObj(claim), "allocation", klog.Format(allocation))

	// A conflict may come from benign concurrent changes: get the latest
	// claim and try again.
	refreshClaim := false
	claim = claim.DeepCopy()
	retryErr := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if refreshClaim {
			updatedClaim, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get updated claim %s after conflict: %w", klog.KObj(claim), err)
			}
			logger.V(5).Info("retrying update after conflict", "claim", klog.KObj(claim))
			claim = updatedClaim
		} else {
			// All future retries must get a new claim first.
			refreshClaim = true
		}

		if claim.DeletionTimestamp != nil {
			return fmt.Errorf("claim %s got deleted in the meantime", klog.KObj(claim))
		}

		// Do we need to store an allocation result from Reserve?
		if allocation != nil {
			if claim.Status.Allocation != nil {
				return fmt.Errorf("claim %s got allocated elsewhere in the meantime", klog.KObj(claim))
			}
			// The finalizer needs to be added in a normal update. If we
			// were interrupted in the past, it might already be set.
			if !sets.New(claim.Finalizers...).Has(resourceapi.Finalizer) {
				claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
				updatedClaim, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
				if err != nil {
					return fmt.Errorf("add finalizer to claim %s: %w", klog.KObj(claim), err)
				}
				claim = updatedClaim
			}
			claim.Status.Allocation = allocation
		}

		// Add the pod without checking preconditions: the API server
		// answers with a non-conflict error if this is not possible.
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{
			Resource: "pods",
			Name:     pod.Name,
			UID:      pod.UID,
		})
		if claim.Status.Allocation == nil {
			return fmt.Errorf("claim %s got deallocated elsewhere in the meantime", klog.KObj(claim))
		}
		if claim.Status.Allocation.AllocationTimestamp == nil {
			claim.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: time.Now()}
		}
		updatedClaim, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			if allocation != nil {
				return fmt.Errorf("add allocation and reservation to claim %s: %w", klog.KObj(claim), err)
			}
			return fmt.Errorf("add reservation to claim %s: %w", klog.KObj(claim), err)
		}
		claim = updatedClaim
		resourceClaimModified = true
		return nil
	})
	if retryErr != nil {
		return nil, nil, retryErr
	}
	logger.V(5).Info("reserved", "pod", klog.KObj(pod), "node", nodeName, "resourceclaim", klog.Format(claim))

	if isExtendedResourceClaim {
		if err := pl.patchPodExtendedResourceClaimStatus(ctx, pod, claim, nodeName, state); err != nil {
			return nil, nil, err
		}
	}
	return claim, successCleanup, nil
}
