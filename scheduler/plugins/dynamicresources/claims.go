package dynamicresources

import (
	"errors"
	"iter"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
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
