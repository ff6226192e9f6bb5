package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

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
	if lastName := profilebuild.SchedulerName(&schedulingv1alpha1.SchedulingProfile{ObjectMeta: sp.ObjectMeta, Spec: *last}); lastName != name {
		return servedProfile{}, false
	}
	plan, _ := r.planner.PlanSpec(sp, last)
	refusals, err := r.workloadAPIRefusal(ctx, plan)
	if err == nil && len(refusals) > 0 {
		err = errors.New(refusals.Message(fmt.Sprintf("Generation %d", orig.Status.ServingGeneration)))
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "The last valid generation cannot be built now", "schedulingProfile", klog.KObj(sp), "generation", orig.Status.ServingGeneration)
		return servedProfile{}, false
	}
	read := map[string]secretVersion{}
	fwk, refusals, err := profilebuild.Compile(ctx, r.build, plan, r.secretReader(sp.Name, read), runtime.WithExtenderObserver(r.extenderObserver(sp.Name, orig.Status.ServingGeneration)))
	if err == nil && len(refusals) > 0 {
		err = errors.New(refusals.Message(fmt.Sprintf("Generation %d", orig.Status.ServingGeneration)))
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "The last valid generation no longer builds", "schedulingProfile", klog.KObj(sp), "generation", orig.Status.ServingGeneration)
		return servedProfile{}, false
	}
	served := servedProfile{uid: sp.UID, schedulerName: name, generation: orig.Status.ServingGeneration, specHash: profilebuild.SpecHash(last), plugins: resolvedPlugins(fwk.ListPlugins()), hasExtenders: len(last.Extenders) > 0, secrets: read}
	r.publish(sp.Name, served, fwk)
	klog.FromContext(ctx).Info("Restored the last valid framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", served.generation)
	return served, true
}

// WithRevisionNamespace sets the namespace of the ControllerRevisions that
// keep each profile's last valid spec: the operator's own. The default is
// the namespace of the service account the operator runs as, or "default"
// outside a cluster.
func WithRevisionNamespace(ns string) ProfileOption {
	return func(r *SchedulingProfileReconciler) { r.revisionNamespace = ns }
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OperatorNamespace is the namespace of the service account the operator
// runs as, or "default" outside a cluster.
func OperatorNamespace() string {
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
		Data:     k8sruntime.RawExtension{Raw: data},
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
	rev := &appsv1.ControllerRevision{}
	if err := r.getUncached(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), rev); err != nil {
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
	const maxPrefix = utilvalidation.DNS1123SubdomainMaxLength - 1 - 16
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
