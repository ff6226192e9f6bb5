package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
)

// BuildFunc builds a framework instance for a profile, wired to the
// scheduling loop's cache, queue and clients (the scheduler's NewFramework).
type BuildFunc func(ctx context.Context, profile *configv1.KubeSchedulerProfile) (framework.Framework, error)

// SchedulingProfileReconciler turns SchedulingProfiles into live instances:
// it validates and builds each spec, publishes the instance under its
// schedulerName, and reports what serves in status. An invalid spec never
// replaces a serving instance.
type SchedulingProfileReconciler struct {
	client   client.Client
	profiles *profiles.Set
	build    BuildFunc
	recorder events.EventRecorder
	reserved sets.Set[string]
	// revisionNamespace holds the ControllerRevisions of every profile.
	revisionNamespace string

	// mu guards served and owners. Reconciles of different profiles may
	// run concurrently, and a schedulerName can pass from one object to
	// another.
	mu sync.Mutex
	// served is, per object name, the instance this object published.
	served map[string]servedProfile
	// owners is, per schedulerName, the object whose instance is published.
	owners map[string]string
}

type servedProfile struct {
	uid           types.UID
	schedulerName string
	generation    int64
	plugins       *schedulingv1alpha1.ResolvedPlugins
}

// NewSchedulingProfileReconciler returns a reconciler that publishes into
// set the instances build makes. reserved names the schedulerNames it must
// never take: another scheduler serves them.
func NewSchedulingProfileReconciler(c client.Client, set *profiles.Set, build BuildFunc, recorder events.EventRecorder, reserved []string, opts ...ProfileOption) *SchedulingProfileReconciler {
	r := &SchedulingProfileReconciler{
		client:            c,
		profiles:          set,
		build:             build,
		recorder:          recorder,
		reserved:          sets.New(reserved...),
		revisionNamespace: defaultRevisionNamespace(),
		served:            map[string]servedProfile{},
		owners:            map[string]string{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetupWithManager registers the reconciler. Every change to a profile also
// reconciles the other profiles that claim the same schedulerName, so that a
// newer one takes the name over when the older one goes or moves.
func (r *SchedulingProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("schedulingprofile").
		Watches(&schedulingv1alpha1.SchedulingProfile{}, handler.EnqueueRequestsFromMapFunc(r.withSameSchedulerName)).
		Complete(r)
}

func (r *SchedulingProfileReconciler) withSameSchedulerName(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetName()}}}
	sp, ok := obj.(*schedulingv1alpha1.SchedulingProfile)
	if !ok {
		return reqs
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.client.List(ctx, &list); err != nil {
		klog.FromContext(ctx).Error(err, "Listing SchedulingProfiles")
		return reqs
	}
	name := schedulerNameOf(sp)
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name != sp.Name && schedulerNameOf(other) == name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: other.Name}})
		}
	}
	return reqs
}

// Reconcile brings the live instance of one profile in line with its spec.
func (r *SchedulingProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sp := &schedulingv1alpha1.SchedulingProfile{}
	if err := r.client.Get(ctx, req.NamespacedName, sp); err != nil {
		if apierrors.IsNotFound(err) {
			r.stopServing(ctx, req.Name, fmt.Sprintf("SchedulingProfile %s was deleted", req.Name))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !sp.DeletionTimestamp.IsZero() {
		r.stopServing(ctx, sp.Name, fmt.Sprintf("SchedulingProfile %s is being deleted", sp.Name))
		return ctrl.Result{}, nil
	}

	name := schedulerNameOf(sp)
	r.mu.Lock()
	prev, serving := r.served[sp.Name]
	r.mu.Unlock()
	if serving && (prev.uid != sp.UID || prev.schedulerName != name) {
		r.stopServing(ctx, sp.Name, fmt.Sprintf("SchedulingProfile %s no longer serves schedulerName %s", sp.Name, prev.schedulerName))
		serving = false
	}

	orig := sp.DeepCopy()
	status := &sp.Status
	status.ObservedGeneration = sp.Generation
	status.SchedulerName = name

	if reason, msg, err := r.refusal(ctx, sp, name); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		if serving {
			r.stopServing(ctx, sp.Name, msg)
		}
		status.ServingGeneration = 0
		status.ServingRevision = nil
		status.Plugins = nil
		status.OmittedDefaultPlugins = nil
		r.setConditions(sp, metav1.ConditionFalse, reason, msg, metav1.ConditionFalse, reason, msg)
		if !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) || orig.Status.ObservedGeneration != sp.Generation {
			r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Claim", "%s", eventNote(msg))
		}
		if err := r.patchStatus(ctx, orig, sp); err != nil {
			return ctrl.Result{}, err
		}
		r.deleteRevision(ctx, sp, orig.Status.ServingRevision)
		return ctrl.Result{}, nil
	}

	profile := upstreamProfile(name, &sp.Spec)
	if !serving || prev.generation != sp.Generation {
		fwk, reason, msg := r.buildSpec(ctx, sp, profile)
		if fwk == nil {
			if !serving {
				// After a restart or a leader change the last valid spec
				// is known only from its revision: serve it again.
				prev, serving = r.restore(ctx, sp, orig, name)
			}
			activeStatus, activeReason, activeMsg := metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this profile has been built"
			if serving {
				activeStatus, activeReason = metav1.ConditionTrue, schedulingv1alpha1.ReasonServing
				activeMsg = fmt.Sprintf("Generation %d, the last valid one, keeps serving schedulerName %s", prev.generation, name)
			}
			r.setConditions(sp, metav1.ConditionFalse, reason, msg, activeStatus, activeReason, activeMsg)
			if orig.Status.ObservedGeneration != sp.Generation || !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) {
				// A user's mistake, not the operator's: info level, and
				// the event and the condition tell the user why.
				klog.FromContext(ctx).Info("Refused a profile spec", "schedulingProfile", klog.KObj(sp), "generation", sp.Generation, "reason", reason, "message", msg)
				r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Build", "%s", eventNote(msg))
			}
			// No error and no requeue either way: retrying cannot help,
			// only a new spec can, and its update triggers a reconcile.
			return ctrl.Result{}, r.patchStatus(ctx, orig, sp)
		}
		prev = servedProfile{uid: sp.UID, schedulerName: name, generation: sp.Generation, plugins: resolvedPlugins(fwk.ListPlugins())}
		r.publish(sp.Name, prev, fwk)
		klog.FromContext(ctx).Info("Published framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", sp.Generation)
		r.recorder.Eventf(sp, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonServing, "Publish", "Generation %d serves schedulerName %s", sp.Generation, name)
	}

	status.ServingGeneration = prev.generation
	if prev.generation == sp.Generation {
		rev, err := r.recordRevision(ctx, sp, orig.Status.ServingRevision)
		if err != nil {
			return ctrl.Result{}, err
		}
		status.ServingRevision = rev
	}
	status.Plugins = prev.plugins
	status.OmittedDefaultPlugins = plugins.OmittedDefaultPluginsFor(profile)
	r.setConditions(sp,
		metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, fmt.Sprintf("Generation %d is valid and built", sp.Generation),
		metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, fmt.Sprintf("Generation %d serves schedulerName %s", prev.generation, name))
	if err := r.patchStatus(ctx, orig, sp); err != nil {
		return ctrl.Result{}, err
	}
	if prevRev := orig.Status.ServingRevision; prevRev != nil && (status.ServingRevision == nil || *prevRev != *status.ServingRevision) {
		// Only after status no longer names it, so that a crash in
		// between leaves an extra revision (garbage-collected with the
		// profile), never a status naming a missing one.
		r.deleteRevision(ctx, sp, prevRev)
	}
	return ctrl.Result{}, nil
}

// buildSpec builds sp's current spec, or says why it may not serve: it is
// too large (reason SpecTooLarge) or invalid (InvalidSpec).
func (r *SchedulingProfileReconciler) buildSpec(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, profile *configv1.KubeSchedulerProfile) (fwk framework.Framework, reason, msg string) {
	data, err := json.Marshal(&sp.Spec)
	if err != nil {
		return nil, schedulingv1alpha1.ReasonInvalidSpec, fmt.Sprintf("Generation %d cannot be serialized: %v", sp.Generation, err)
	}
	if len(data) > MaxSpecBytes {
		return nil, schedulingv1alpha1.ReasonSpecTooLarge, fmt.Sprintf(
			"Generation %d is %d bytes as JSON, more than the %d bytes a profile spec may have; split it or shorten the plugin args", sp.Generation, len(data), MaxSpecBytes)
	}
	fwk, err = r.build(ctx, profile)
	if err != nil {
		return nil, schedulingv1alpha1.ReasonInvalidSpec, fmt.Sprintf("Generation %d cannot be built: %v", sp.Generation, err)
	}
	return fwk, "", ""
}

// restore publishes the last valid spec, from the revision status names, if
// it is intact, claims the same schedulerName and still builds.
func (r *SchedulingProfileReconciler) restore(ctx context.Context, sp, orig *schedulingv1alpha1.SchedulingProfile, name string) (servedProfile, bool) {
	ref := orig.Status.ServingRevision
	if ref == nil || orig.Status.ServingGeneration == 0 {
		return servedProfile{}, false
	}
	last, err := r.readRevision(ctx, sp, ref)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read the last valid generation back", "schedulingProfile", klog.KObj(sp),
			"generation", orig.Status.ServingGeneration, "controllerRevision", klog.KRef(ref.Namespace, ref.Name))
		return servedProfile{}, false
	}
	if lastName := schedulerNameOf(&schedulingv1alpha1.SchedulingProfile{ObjectMeta: sp.ObjectMeta, Spec: *last}); lastName != name {
		return servedProfile{}, false
	}
	fwk, err := r.build(ctx, upstreamProfile(name, last))
	if err != nil {
		klog.FromContext(ctx).Error(err, "The last valid generation no longer builds", "schedulingProfile", klog.KObj(sp), "generation", orig.Status.ServingGeneration)
		return servedProfile{}, false
	}
	served := servedProfile{uid: sp.UID, schedulerName: name, generation: orig.Status.ServingGeneration, plugins: resolvedPlugins(fwk.ListPlugins())}
	r.publish(sp.Name, served, fwk)
	klog.FromContext(ctx).Info("Restored the last valid framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", served.generation)
	return served, true
}

// refusal says why sp may not serve name: the name is reserved, or an older
// profile claims it. The oldest claimant wins whether or not its spec is
// valid, so a name never flaps between objects as specs change.
func (r *SchedulingProfileReconciler) refusal(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, name string) (reason, msg string, err error) {
	if r.reserved.Has(name) {
		return schedulingv1alpha1.ReasonReservedSchedulerName,
			fmt.Sprintf("schedulerName %s is reserved for another scheduler; choose another name", name), nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.client.List(ctx, &list); err != nil {
		return "", "", err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == sp.UID || !other.DeletionTimestamp.IsZero() || schedulerNameOf(other) != name {
			continue
		}
		if older(other, sp) {
			return schedulingv1alpha1.ReasonSchedulerNameConflict,
				fmt.Sprintf("schedulerName %s is claimed by the older SchedulingProfile %s", name, other.Name), nil
		}
	}
	return "", "", nil
}

func older(a, b *schedulingv1alpha1.SchedulingProfile) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// publish makes fwk serve sp.schedulerName for objName. When the name passes
// from another object (one being deleted, or moved to another name, whose
// own reconcile has not withdrawn it yet), that object's generations are
// withdrawn first rather than merely replaced: pods they hold must not be
// approved and bound in the name of a profile that no longer serves.
func (r *SchedulingProfileReconciler) publish(objName string, sp servedProfile, fwk framework.Framework) {
	r.mu.Lock()
	prevOwner, ok := r.owners[sp.schedulerName]
	takeover := ok && prevOwner != objName
	if prev, served := r.served[prevOwner]; takeover && served && prev.schedulerName == sp.schedulerName {
		// Its instances are withdrawn here; its own stopServing must
		// not withdraw this object's.
		delete(r.served, prevOwner)
	}
	r.served[objName] = sp
	r.owners[sp.schedulerName] = objName
	r.mu.Unlock()
	if takeover {
		r.profiles.Remove(sp.schedulerName, fmt.Sprintf("SchedulingProfile %s no longer serves schedulerName %s", prevOwner, sp.schedulerName))
	}
	r.profiles.Publish(sp.schedulerName, fwk)
}

// stopServing withdraws the instance objName published, unless another
// object has already taken its schedulerName over.
func (r *SchedulingProfileReconciler) stopServing(ctx context.Context, objName, msg string) {
	r.mu.Lock()
	sp, ok := r.served[objName]
	delete(r.served, objName)
	owned := ok && r.owners[sp.schedulerName] == objName
	if owned {
		delete(r.owners, sp.schedulerName)
	}
	r.mu.Unlock()
	if owned && r.profiles.Remove(sp.schedulerName, msg) {
		klog.FromContext(ctx).Info("Withdrew framework instance", "schedulingProfile", objName, "schedulerName", sp.schedulerName, "reason", msg)
	}
}

func (r *SchedulingProfileReconciler) setConditions(sp *schedulingv1alpha1.SchedulingProfile,
	accepted metav1.ConditionStatus, acceptedReason, acceptedMsg string,
	active metav1.ConditionStatus, activeReason, activeMsg string) {
	meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
		Type: schedulingv1alpha1.ProfileAccepted, Status: accepted, Reason: acceptedReason, Message: truncate(acceptedMsg, maxConditionMessage), ObservedGeneration: sp.Generation,
	})
	meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
		Type: schedulingv1alpha1.ProfileActive, Status: active, Reason: activeReason, Message: truncate(activeMsg, maxConditionMessage), ObservedGeneration: sp.Generation,
	})
}

// patchStatus writes status only when it changed, so re-applying the same
// manifest causes no churn.
func (r *SchedulingProfileReconciler) patchStatus(ctx context.Context, orig, sp *schedulingv1alpha1.SchedulingProfile) error {
	if equality.Semantic.DeepEqual(orig.Status, sp.Status) {
		return nil
	}
	return r.client.Status().Patch(ctx, sp, client.MergeFrom(orig))
}

// schedulerNameOf is the schedulerName a profile claims: spec.schedulerName,
// else its name (the API server makes sure that is then a DNS-1123 label).
func schedulerNameOf(sp *schedulingv1alpha1.SchedulingProfile) string {
	if sp.Spec.SchedulerName != nil && *sp.Spec.SchedulerName != "" {
		return *sp.Spec.SchedulerName
	}
	return sp.Name
}

// MaxSpecBytes is the largest spec, as JSON, a profile may have. The API
// server stores an object of up to 1.5 MiB (etcd's default request limit);
// a spec of at most 1 MiB leaves half a MiB for the profile's metadata and
// status, and its ControllerRevision fits with room to spare.
const MaxSpecBytes = 1 << 20

const (
	// maxConditionMessage is metav1.Condition's limit on a message.
	maxConditionMessage = 32768
	// maxEventNote is events.k8s.io/v1's limit on a note.
	maxEventNote = 1024
)

// ProfileOption configures a SchedulingProfileReconciler.
type ProfileOption func(*SchedulingProfileReconciler)

// WithRevisionNamespace sets the namespace of the ControllerRevisions that
// keep each profile's last valid spec: the operator's own. The default is
// the namespace of the service account the operator runs as, or "default"
// outside a cluster.
func WithRevisionNamespace(ns string) ProfileOption {
	return func(r *SchedulingProfileReconciler) { r.revisionNamespace = ns }
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func defaultRevisionNamespace() string {
	if data, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return metav1.NamespaceDefault
}

// recordRevision makes sure a ControllerRevision owned by sp holds its
// current spec, and returns the reference for status. Only a spec that
// changed costs a request: the reference in status already names the
// revision of a spec that did not.
func (r *SchedulingProfileReconciler) recordRevision(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, current *schedulingv1alpha1.RevisionReference) (*schedulingv1alpha1.RevisionReference, error) {
	data, err := json.Marshal(&sp.Spec)
	if err != nil {
		return nil, err
	}
	ref := &schedulingv1alpha1.RevisionReference{
		Namespace: r.revisionNamespace,
		Name:      revisionName(sp, data),
		Hash:      dataHash(data),
	}
	if current != nil && *current == *ref {
		// Status says it is recorded; make sure it still is, so that a
		// revision deleted by someone is written again before a restart
		// needs it.
		_, err := r.readRevision(ctx, sp, ref)
		if err == nil {
			return ref, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ref.Namespace,
			Name:      ref.Name,
			Labels:    map[string]string{revisionProfileLabel: sp.Name},
			// No blockOwnerDeletion: that would need the right to set
			// finalizers on profiles, and nothing waits for revisions.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: schedulingv1alpha1.GroupVersion.String(),
				Kind:       "SchedulingProfile",
				Name:       sp.Name,
				UID:        sp.UID,
				Controller: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: sp.Generation,
	}
	err = r.client.Create(ctx, rev)
	if apierrors.IsAlreadyExists(err) {
		// Written before a crash, or by someone else: keep it only if it
		// is this profile's and holds this spec.
		_, rerr := r.readRevision(ctx, sp, ref)
		if rerr == nil {
			return ref, nil
		}
		klog.FromContext(ctx).Info("Replacing a ControllerRevision that does not hold the spec", "schedulingProfile", klog.KObj(sp), "controllerRevision", klog.KRef(ref.Namespace, ref.Name), "problem", rerr.Error())
		r.deleteRevision(ctx, sp, ref)
		return nil, fmt.Errorf("ControllerRevision %s/%s did not hold generation %d; replacing it", ref.Namespace, ref.Name, sp.Generation)
	}
	if err != nil {
		return nil, fmt.Errorf("recording generation %d in ControllerRevision %s/%s: %w", sp.Generation, ref.Namespace, ref.Name, err)
	}
	return ref, nil
}

// readRevision reads the spec a revision holds, after checking that sp
// owns it and that its data has the recorded hash. It reads from the API
// server, not the cache, through an unstructured object (the manager's
// client caches only typed reads): a restore is rare, and a cache would
// watch every ControllerRevision of the cluster.
func (r *SchedulingProfileReconciler) readRevision(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, ref *schedulingv1alpha1.RevisionReference) (*schedulingv1alpha1.SchedulingProfileSpec, error) {
	rev, err := r.ownRevision(ctx, sp, ref)
	if err != nil {
		return nil, err
	}
	if got := dataHash(rev.Data.Raw); got != ref.Hash {
		return nil, fmt.Errorf("ControllerRevision %s/%s has data hash %s, status records %s", ref.Namespace, ref.Name, got, ref.Hash)
	}
	spec := &schedulingv1alpha1.SchedulingProfileSpec{}
	if err := json.Unmarshal(rev.Data.Raw, spec); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return spec, nil
}

// ownRevision reads the revision ref names, if it is in the operator's
// revision namespace and controlled by sp: status is writable by others,
// and must not make the operator read or delete revisions that are not
// its own (a DaemonSet's, say).
func (r *SchedulingProfileReconciler) ownRevision(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, ref *schedulingv1alpha1.RevisionReference) (*appsv1.ControllerRevision, error) {
	if ref.Namespace != r.revisionNamespace {
		return nil, fmt.Errorf("ControllerRevision %s/%s is not in the operator's namespace %s", ref.Namespace, ref.Name, r.revisionNamespace)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ControllerRevision"))
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, err
	}
	rev := &appsv1.ControllerRevision{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rev); err != nil {
		return nil, err
	}
	if owner := metav1.GetControllerOf(rev); owner == nil || owner.UID != sp.UID {
		return nil, fmt.Errorf("ControllerRevision %s/%s is not controlled by this profile", ref.Namespace, ref.Name)
	}
	return rev, nil
}

// deleteRevision deletes a revision of sp that status no longer names; a
// revision that is not sp's own is left alone. A failure only leaves it
// for the garbage collector, when the profile goes.
func (r *SchedulingProfileReconciler) deleteRevision(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, ref *schedulingv1alpha1.RevisionReference) {
	if ref == nil {
		return
	}
	logger := klog.FromContext(ctx)
	rev, err := r.ownRevision(ctx, sp, ref)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Info("Not deleting a ControllerRevision", "schedulingProfile", klog.KObj(sp), "controllerRevision", klog.KRef(ref.Namespace, ref.Name), "problem", err.Error())
		}
		return
	}
	if err := r.client.Delete(ctx, rev, client.Preconditions{UID: &rev.UID}); err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting a ControllerRevision no longer needed", "schedulingProfile", klog.KObj(sp), "controllerRevision", klog.KObj(rev))
	}
}

// revisionProfileLabel names, on a ControllerRevision, the profile it is for.
const revisionProfileLabel = "scheduling.schedprofiles.io/schedulingprofile"

// revisionName is unique per profile object and spec, and a valid name
// however long the profile's name is.
func revisionName(sp *schedulingv1alpha1.SchedulingProfile, data []byte) string {
	h := sha256.New()
	h.Write([]byte(sp.UID))
	h.Write(data)
	const maxPrefix = validation.DNS1123SubdomainMaxLength - 1 - 16
	return fmt.Sprintf("%s-%s", strings.TrimRight(truncate(sp.Name, maxPrefix), "-."), hex.EncodeToString(h.Sum(nil))[:16])
}

// dataHash hashes the canonical form of JSON data (keys sorted, no
// spacing): the API server stores a revision's data in its own encoding,
// so the bytes read back may differ from those written.
func dataHash(data []byte) string {
	var v any
	if err := json.Unmarshal(data, &v); err == nil {
		if canonical, err := json.Marshal(v); err == nil {
			data = canonical
		}
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// truncate shortens s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func eventNote(msg string) string { return truncate(msg, maxEventNote) }
