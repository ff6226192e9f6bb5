package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Field managers of the operator's status writers. Each applies the status
// fields it owns with server-side apply, as cluster-api's condition
// ownership has each writer set its own condition types only: a writer
// never removes what another wrote, and managedFields say who wrote what.
const (
	// waitingPodFieldManager is the WaitingPodMirror's: the whole status
	// of a WaitingPod except condition types other writers add.
	waitingPodFieldManager = "profile-scheduler-waitingpods"
	// profileFieldManager is the SchedulingProfileReconciler's: the status
	// of a SchedulingProfile except condition types other writers add.
	profileFieldManager = "profile-scheduler-profiles"
	// podConditionFieldManager is the WaitingPodMirror's on Pods: the
	// WaitingAtPermit condition of a held pod's status, nothing else.
	podConditionFieldManager = "profile-scheduler-permit"
)

// applyStatus applies status, the status fields manager owns, to obj's
// status subresource, and decodes the object as stored into stored. It
// forces ownership: a field of manager's that someone else changed is taken
// back. Fields manager applied before and leaves out now are removed, unless
// another manager holds them too: they wrote the same value, or changed the
// field with an update. Then shows, which tells whether stored shows status
// in every field manager owns, is false, and a second write removes them:
// a merge patch of stored after dropLeftovers set it to status and the
// conditions of other writers. Its resourceVersion precondition keeps it from dropping
// a condition written meanwhile.
//
// status goes out as its JSON: a field it leaves empty is not applied, so
// the manager gives it up.
func applyStatus(ctx context.Context, c client.Client, manager string, obj client.Object, status any, stored client.Object, shows func() bool, dropLeftovers func()) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Numbers stay as written: an int64 such as observedGeneration must not
	// pass through float64.
	dec.UseNumber()
	fields := map[string]any{}
	if err := dec.Decode(&fields); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": fields}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return err
	}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, stored); err != nil {
		return err
	}
	if shows() {
		return nil
	}
	base, ok := stored.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", stored)
	}
	dropLeftovers()
	return c.Status().Patch(ctx, stored, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(manager))
}

// splitConditions splits conds into the ones of the types owns reports
// (sorted by type, nil if none) and the others, which another writer owns.
func splitConditions(conds []metav1.Condition, owns func(string) bool) (own, others []metav1.Condition) {
	for _, c := range conds {
		if owns(c.Type) {
			own = append(own, c)
		} else {
			others = append(others, c)
		}
	}
	slices.SortFunc(own, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	return own, others
}
