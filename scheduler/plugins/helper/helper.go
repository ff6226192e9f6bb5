// Package helper holds small pieces shared by the built-in plugins: score
// normalization, scoring shapes and typed access to the objects of cluster
// events. They
// follow kube-scheduler's plugins/helper and scheduler/util so that ported
// plugins compute exactly what upstream computes.
package helper

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// DefaultNormalizeScore scales scores from [0, max(scores)] to
// [0, maxPriority] and, when reverse is set, mirrors them (maxPriority -
// score). When every score is 0 the scores stay 0, or all become
// maxPriority when reversed. Scores must be non-negative. Integer division
// truncates exactly as upstream's helper does, so normalized scores match
// kube-scheduler's to the unit.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores framework.NodeScoreList) *framework.Status {
	var maxCount int64
	for i := range scores {
		if scores[i].Score > maxCount {
			maxCount = scores[i].Score
		}
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return nil
	}
	for i := range scores {
		score := maxPriority * scores[i].Score / maxCount
		if reverse {
			score = maxPriority - score
		}
		scores[i].Score = score
	}
	return nil
}

// As converts the old and new objects of a cluster event to T. Either may
// be nil (Add has no old object, Delete no new one); a deleted object that
// the informer only knew as a tombstone is unwrapped.
func As[T any](oldObj, newObj any) (T, T, error) {
	var oldTyped, newTyped T
	var ok bool
	if newObj != nil {
		if newTyped, ok = newObj.(T); !ok {
			return oldTyped, newTyped, fmt.Errorf("expected %T, but got %T", newTyped, newObj)
		}
	}
	if oldObj != nil {
		if tombstone, isTombstone := oldObj.(cache.DeletedFinalStateUnknown); isTombstone {
			oldObj = tombstone.Obj
		}
		if oldTyped, ok = oldObj.(T); !ok {
			return oldTyped, newTyped, fmt.Errorf("expected %T, but got %T", oldTyped, oldObj)
		}
	}
	return oldTyped, newTyped, nil
}

// DoNotScheduleTaint reports whether a taint keeps pods that do not
// tolerate it off the node: NoSchedule and NoExecute do, PreferNoSchedule
// only lowers the node's score.
func DoNotScheduleTaint(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}
