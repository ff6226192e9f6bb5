package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
)

// The TLS material of extenders is read from Secrets in the operator's
// namespace only. list and watch feed a metadata-only watch of the
// labelled ones there, so that a profile refused for a Secret is built
// again when the Secret appears or changes; no Secret's data is cached.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch,namespace=system

// secretRefIndex indexes SchedulingProfiles by the Secrets their
// extenders reference.
const secretRefIndex = "spec.extenders.tlsConfig.secretRefs"

// secretVersion is what a build took from one Secret: a digest of its
// data, so that a change of its metadata alone rebuilds nothing.
type secretVersion struct {
	digest string
}

// secretReader reads the Secrets that hold TLS material for profile's
// extenders, and records in read (unless nil) what it took from each.
func (r *SchedulingProfileReconciler) secretReader(profile string, read map[string]secretVersion) profilebuild.SecretReader {
	return func(ctx context.Context, ref profilebuild.SecretRef) (map[string][]byte, error) {
		path := strings.TrimPrefix(ref.Field, "spec.")
		secret, err := r.extenderSecret(ctx, path, profile, ref.Name, ref.Keys...)
		if err != nil {
			return nil, err
		}
		if err := checkTLSMaterial(path, secret, ref.Keys); err != nil {
			return nil, err
		}
		if read != nil {
			read[ref.Name] = secretVersion{digest: secretDigest(secret)}
		}
		return secret.Data, nil
	}
}

// checkTLSMaterial says what is wrong with the material secret holds
// under keys: a certificate and its key (two keys), or a CA bundle (one).
// The extender would refuse it when built, with a message that names no
// Secret; the Secret is labelled for this profile, so its owner may learn
// what is wrong with it.
func checkTLSMaterial(path string, secret *corev1.Secret, keys []string) error {
	switch len(keys) {
	case 1:
		if !x509.NewCertPool().AppendCertsFromPEM(secret.Data[keys[0]]) {
			return fmt.Errorf("%s: key %s of Secret %s/%s holds no PEM certificate; put the CA bundle there, and the profile is built again",
				path, keys[0], secret.Namespace, secret.Name)
		}
	case 2:
		if _, err := tls.X509KeyPair(secret.Data[keys[0]], secret.Data[keys[1]]); err != nil {
			return fmt.Errorf("%s: keys %s and %s of Secret %s/%s are not a PEM certificate and its key (%v); put them there, and the profile is built again",
				path, keys[0], keys[1], secret.Namespace, secret.Name, err)
		}
	}
	return nil
}

// watchSecrets has a profile reconciled when a Secret its extenders
// reference appears, changes or goes. The watch is of the operator's
// namespace only, of Secrets carrying the extender TLS label (a Secret
// gains it when it is made usable), and of their metadata only: the data
// is read, as before, when a profile is built.
func (r *SchedulingProfileReconciler) watchSecrets(mgr ctrl.Manager) (source.TypedSource[reconcile.Request], error) {
	labelled, err := labels.NewRequirement(schedulingv1alpha1.ExtenderTLSLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{r.revisionNamespace: {}},
		DefaultLabelSelector: labels.NewSelector().Add(*labelled),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &schedulingv1alpha1.SchedulingProfile{}, secretRefIndex, func(obj client.Object) []string {
		sp, ok := obj.(*schedulingv1alpha1.SchedulingProfile)
		if !ok {
			return nil
		}
		return profilebuild.ReferencedSecrets(&sp.Spec)
	}); err != nil {
		return nil, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return source.Kind(secrets, obj, handler.TypedEnqueueRequestsFromMapFunc(r.profilesOfSecret)), nil
}

// profilesOfSecret are the profiles whose extenders reference secret.
func (r *SchedulingProfileReconciler) profilesOfSecret(ctx context.Context, secret *metav1.PartialObjectMetadata) []reconcile.Request {
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.client.List(ctx, &list, client.MatchingFields{secretRefIndex: secret.Name}); err != nil {
		klog.FromContext(ctx).Error(err, "Listing the SchedulingProfiles that reference a Secret", "secret", klog.KObj(secret))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

// secretsChanged says whether a Secret the serving instance of profile
// took TLS material from no longer gives the same: its data changed, or
// it is gone, or no longer labelled for profile. Metadata alone (an
// annotation) does not count.
func (r *SchedulingProfileReconciler) secretsChanged(ctx context.Context, profile string, read map[string]secretVersion) (bool, error) {
	for name, v := range read {
		secret := &corev1.Secret{}
		err := r.getUncached(ctx, client.ObjectKey{Namespace: r.revisionNamespace, Name: name}, corev1.SchemeGroupVersion.WithKind("Secret"), secret)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading Secrets of namespace %s: %w", r.revisionNamespace, err)
		}
		if secret.Labels[schedulingv1alpha1.ExtenderTLSLabel] != profile || secretDigest(secret) != v.digest {
			return true, nil
		}
	}
	return false, nil
}

// secretDigest hashes secret's data.
func secretDigest(secret *corev1.Secret) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(secret.Data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(secret.Data[k]))
		h.Write(secret.Data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// extenderSecret reads a Secret of the operator's namespace
// that holds TLS material for profile's extenders: labelled for profile
// (schedulingv1alpha1.ExtenderTLSLabel) and with every key set. Whether
// the Secret is missing, labelled for no profile or another one, or lacks
// a key, the error is the same, so that writing profiles tells nothing of
// the other Secrets of the namespace. It reads from the API server: the
// manager's client would otherwise cache, and so list and watch, every
// Secret it may read.
func (r *SchedulingProfileReconciler) extenderSecret(ctx context.Context, path, profile, name string, keys ...string) (*corev1.Secret, error) {
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
	return secret, nil
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
