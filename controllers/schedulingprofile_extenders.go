package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
)

// The TLS material of extenders is read from Secrets in the operator's
// namespace only.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=system

// secretReader reads the Secrets that hold TLS material for profile's
// extenders.
func (r *SchedulingProfileReconciler) secretReader(profile string) profilebuild.SecretReader {
	return func(ctx context.Context, ref profilebuild.SecretRef) (map[string][]byte, error) {
		return r.extenderSecret(ctx, strings.TrimPrefix(ref.Field, "spec."), profile, ref.Name, ref.Keys...)
	}
}

// extenderSecret reads the data of a Secret of the operator's namespace
// that holds TLS material for profile's extenders: labelled for profile
// (schedulingv1alpha1.ExtenderTLSLabel) and with every key set. Whether
// the Secret is missing, labelled for no profile or another one, or lacks
// a key, the error is the same, so that writing profiles tells nothing of
// the other Secrets of the namespace. It reads from the API server: the
// manager's client would otherwise cache, and so list and watch, every
// Secret it may read.
func (r *SchedulingProfileReconciler) extenderSecret(ctx context.Context, path, profile, name string, keys ...string) (map[string][]byte, error) {
	unusable := fmt.Errorf("%s: no Secret %s in namespace %s is labelled %s=%s and holds %s; create Secret %s/%s with that label and %s, and the profile is built again",
		path, name, r.revisionNamespace, schedulingv1alpha1.ExtenderTLSLabel, profile, strings.Join(keys, " and "),
		r.revisionNamespace, name, keyList(keys))
	secret := &corev1.Secret{}
	if err := r.getUncached(ctx, client.ObjectKey{Namespace: r.revisionNamespace, Name: name}, corev1.SchemeGroupVersion.WithKind("Secret"), secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, unusable
		}
		// Not about this Secret: the API server or the operator's rights.
		return nil, fmt.Errorf("%s: reading Secrets of namespace %s: %w", path, r.revisionNamespace, err)
	}
	if secret.Labels[schedulingv1alpha1.ExtenderTLSLabel] != profile {
		return nil, unusable
	}
	for _, k := range keys {
		if len(secret.Data[k]) == 0 {
			return nil, unusable
		}
	}
	return secret.Data, nil
}

// wakeBuffer bounds the extender reachability changes waiting for a
// reconcile. The observer must not block a scheduling cycle, so a change
// beyond it is dropped; the next change or resync of the profile reports
// the state, which failingExtenders always holds.
const wakeBuffer = 1024

// extenderObserver records, for generation of profile objName, which
// non-ignorable extenders fail, and has the profile reconciled so that
// its status and events say so.
func (r *SchedulingProfileReconciler) extenderObserver(objName string, generation int64) extender.Observer {
	return func(url string, err error) {
		r.mu.Lock()
		f, ok := r.failingExtenders[objName]
		switch {
		case ok && f.generation > generation:
			// An older instance finishing its last cycles.
			r.mu.Unlock()
			return
		case !ok || f.generation < generation:
			f = extenderFailures{generation: generation, errs: map[string]string{}, refused: sets.New[string]()}
		}
		var refused *extender.ReplyError
		switch {
		case errors.As(err, &refused):
			f.errs[url] = err.Error()
			f.refused.Insert(url)
		case err != nil:
			f.errs[url] = err.Error()
			f.refused.Delete(url)
		default:
			delete(f.errs, url)
			f.refused.Delete(url)
		}
		r.failingExtenders[objName] = f
		r.mu.Unlock()
		select {
		case r.wake <- event.GenericEvent{Object: &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: objName}}}:
		default:
		}
	}
}

// setExtendersCondition reports whether the non-ignorable extenders of the
// serving generation can be reached, on profiles whose serving generation
// has extenders, with a Warning event when one becomes unreachable.
func (r *SchedulingProfileReconciler) setExtendersCondition(sp, orig *schedulingv1alpha1.SchedulingProfile, served servedProfile, serving bool) {
	if !serving || !served.hasExtenders {
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)
		return
	}
	r.mu.Lock()
	var failing []string
	refused := false
	if f, ok := r.failingExtenders[sp.Name]; ok && f.generation == served.generation {
		for _, url := range sets.List(sets.KeySet(f.errs)) {
			failing = append(failing, fmt.Sprintf("%s: %s", url, f.errs[url]))
		}
		refused = f.refused.Len() > 0
	}
	r.mu.Unlock()
	cond := metav1.Condition{
		Type: schedulingv1alpha1.ProfileExtendersReachable, Status: metav1.ConditionTrue, ObservedGeneration: sp.Generation,
		Reason: schedulingv1alpha1.ReasonExtendersReachable, Message: fmt.Sprintf("No call to a non-ignorable extender of generation %d is failing", served.generation),
	}
	if len(failing) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, schedulingv1alpha1.ReasonExtenderUnreachable
		summary := "Calls to extenders of generation %d fail; pods they see cannot be scheduled: %s"
		if refused {
			// Also for ignorable extenders, whose pods still schedule.
			cond.Reason = schedulingv1alpha1.ReasonExtenderReplyRefused
			summary = "Replies of extenders of generation %d were refused, and calls fail: %s"
		}
		cond.Message = truncate(fmt.Sprintf(summary, served.generation, strings.Join(failing, "; ")), maxConditionMessage)
		if old := meta.FindStatusCondition(orig.Status.Conditions, cond.Type); old == nil || old.Status != metav1.ConditionFalse || old.Message != cond.Message {
			r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, cond.Reason, "CallExtender", "%s", eventNote(cond.Message))
		}
	}
	meta.SetStatusCondition(&sp.Status.Conditions, cond)
}

// keyList words the keys a Secret needs: "key ca.crt", "keys tls.crt and tls.key".
func keyList(keys []string) string {
	if len(keys) == 1 {
		return "key " + keys[0]
	}
	return "keys " + strings.Join(keys, " and ")
}
