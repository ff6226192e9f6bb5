package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
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
func NewSchedulingProfileReconciler(c client.Client, set *profiles.Set, build BuildFunc, recorder events.EventRecorder, reserved []string) *SchedulingProfileReconciler {
	return &SchedulingProfileReconciler{
		client:   c,
		profiles: set,
		build:    build,
		recorder: recorder,
		reserved: sets.New(reserved...),
		served:   map[string]servedProfile{},
		owners:   map[string]string{},
	}
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
		status.ServingSpec = nil
		status.Plugins = nil
		status.OmittedDefaultPlugins = nil
		r.setConditions(sp, metav1.ConditionFalse, reason, msg, metav1.ConditionFalse, reason, msg)
		if !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) || orig.Status.ObservedGeneration != sp.Generation {
			r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Claim", "%s", msg)
		}
		return ctrl.Result{}, r.patchStatus(ctx, orig, sp)
	}

	profile := upstreamProfile(name, &sp.Spec)
	if !serving || prev.generation != sp.Generation {
		fwk, err := r.build(ctx, profile)
		if err != nil {
			if !serving {
				// After a restart or a leader change the last valid spec
				// is known only from status: serve it again.
				prev, serving = r.restore(ctx, sp, orig, name)
			}
			msg := fmt.Sprintf("Generation %d cannot be built: %v", sp.Generation, err)
			activeStatus, activeReason, activeMsg := metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this profile has been built"
			if serving {
				activeStatus, activeReason = metav1.ConditionTrue, schedulingv1alpha1.ReasonServing
				activeMsg = fmt.Sprintf("Generation %d, the last valid one, keeps serving schedulerName %s", prev.generation, name)
			}
			r.setConditions(sp, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, msg, activeStatus, activeReason, activeMsg)
			if orig.Status.ObservedGeneration != sp.Generation || !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) {
				r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, schedulingv1alpha1.ReasonInvalidSpec, "Build", "%s", msg)
			}
			if perr := r.patchStatus(ctx, orig, sp); perr != nil {
				return ctrl.Result{}, perr
			}
			// Retrying cannot help: only a new spec can.
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		prev = servedProfile{uid: sp.UID, schedulerName: name, generation: sp.Generation, plugins: resolvedPlugins(fwk.ListPlugins())}
		r.publish(sp.Name, prev, fwk)
		klog.FromContext(ctx).Info("Published framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", sp.Generation)
		r.recorder.Eventf(sp, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonServing, "Publish", "Generation %d serves schedulerName %s", sp.Generation, name)
	}

	status.ServingGeneration = prev.generation
	if prev.generation == sp.Generation {
		status.ServingSpec = sp.Spec.DeepCopy()
	}
	status.Plugins = prev.plugins
	status.OmittedDefaultPlugins = plugins.OmittedDefaultPluginsFor(profile)
	r.setConditions(sp,
		metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, fmt.Sprintf("Generation %d is valid and built", sp.Generation),
		metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, fmt.Sprintf("Generation %d serves schedulerName %s", prev.generation, name))
	return ctrl.Result{}, r.patchStatus(ctx, orig, sp)
}

// restore publishes the last valid spec recorded in status, if it claims
// the same schedulerName and still builds.
func (r *SchedulingProfileReconciler) restore(ctx context.Context, sp, orig *schedulingv1alpha1.SchedulingProfile, name string) (servedProfile, bool) {
	last := orig.Status.ServingSpec
	if last == nil || orig.Status.ServingGeneration == 0 {
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
		Type: schedulingv1alpha1.ProfileAccepted, Status: accepted, Reason: acceptedReason, Message: acceptedMsg, ObservedGeneration: sp.Generation,
	})
	meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
		Type: schedulingv1alpha1.ProfileActive, Status: active, Reason: activeReason, Message: activeMsg, ObservedGeneration: sp.Generation,
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
