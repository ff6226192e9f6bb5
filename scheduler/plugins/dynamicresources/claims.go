package dynamicresources

import (
	"iter"

	resourceapi "k8s.io/api/resource/v1"
)

// claimStore holds the pod's ResourceClaims, one per
// pod.spec.resourceClaims entry that has a claim. Upstream's also holds
// the special claim of extended resources backed by DRA and the PodGroup a
// claim is bound to; neither is built here (UnsupportedFeatures refuses
// those pods).
//
// The zero value is usable and empty.
type claimStore struct {
	claims []*resourceapi.ResourceClaim
}

func newClaimStore(claims []*resourceapi.ResourceClaim) claimStore {
	return claimStore{claims: claims}
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
