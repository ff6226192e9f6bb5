package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// BuildFunc builds a framework instance for a profile, wired to the
// scheduling loop's cache, queue and clients (profilebuild.Builder of the
// scheduler). profilebuild.Compile hands it the profile's options.
type BuildFunc = profilebuild.BuildFunc

// SchedulingProfileReconciler turns SchedulingProfiles into live instances:
// it validates and builds each spec, publishes the instance under its
// schedulerName, and reports what serves in status. An invalid spec never
// replaces a serving instance.
type SchedulingProfileReconciler struct {
	client   client.Client
	profiles *profiles.Set
	build    BuildFunc
	recorder events.EventRecorder
	// planner plans every spec, the current one and a restored one.
	planner *profilebuild.Planner
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
	// failingExtenders is, per object name, the non-ignorable extenders
	// of a published generation whose calls fail, with the error.
	failingExtenders map[string]extenderFailures

	// wake reconciles a profile whose extenders became unreachable or
	// reachable again: the scheduling loop, not the API, saw the change.
	wake chan event.GenericEvent

	// newShadow prepares shadows (spec.shadowOf); nil refuses them. It,
	// shadowStatusPeriod and shadows are set by WithShadows.
	newShadow          ShadowFunc
	shadowStatusPeriod time.Duration
	// shadows is, per object name, the shadow it runs; guarded by mu.
	shadows map[string]runningShadow
	// maxShadows is how many shadows run at most (WithMaxShadows).
	maxShadows int
}

type extenderFailures struct {
	generation int64
	// errs is the failure, per urlPrefix.
	errs map[string]string
	// refused are the urlPrefixes whose failure is a refused reply.
	refused sets.Set[string]
}

type servedProfile struct {
	uid           types.UID
	schedulerName string
	generation    int64
	// specHash is profilebuild.SpecHash of generation's spec.
	specHash     string
	plugins      *schedulingv1alpha1.ResolvedPlugins
	hasExtenders bool
}

// NewSchedulingProfileReconciler returns a reconciler that publishes into
// set the instances build makes of the specs planner plans; the planner
// knows the schedulerNames it must never take.
func NewSchedulingProfileReconciler(c client.Client, set *profiles.Set, build BuildFunc, recorder events.EventRecorder, planner *profilebuild.Planner, opts ...ProfileOption) *SchedulingProfileReconciler {
	r := &SchedulingProfileReconciler{
		client:            c,
		profiles:          set,
		build:             build,
		recorder:          recorder,
		planner:           planner,
		revisionNamespace: OperatorNamespace(),
		served:            map[string]servedProfile{},
		owners:            map[string]string{},
		failingExtenders:  map[string]extenderFailures{},
		wake:              make(chan event.GenericEvent, wakeBuffer),
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
	if err := r.stopShadowsAtShutdown(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("schedulingprofile").
		Watches(&schedulingv1alpha1.SchedulingProfile{}, handler.EnqueueRequestsFromMapFunc(r.withSameSchedulerName)).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
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
	name := profilebuild.SchedulerName(sp)
	for i := range list.Items {
		other := &list.Items[i]
		// A shadow that goes may let a newer one refused for the
		// shadow limit run.
		if other.Name != sp.Name && (profilebuild.SchedulerName(other) == name || sp.Spec.ShadowOf != nil && other.Spec.ShadowOf != nil) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: other.Name}})
		}
	}
	return reqs
}

// Reconcile brings the live instance of one profile in line with its spec.
func (r *SchedulingProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sp := &schedulingv1alpha1.SchedulingProfile{}
	err := r.client.Get(ctx, req.NamespacedName, sp)
	if err == nil && meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileReconciling) {
		// Reconciling=True is written just before a build, and the
		// status written after it follows at once: the cache has most
		// likely not caught up with it yet (the first write's event
		// brought this reconcile). Acting on the stale view would build
		// again, repeat the build's event and rewrite status with new
		// transition times; the API server has the status as it is.
		sp = &schedulingv1alpha1.SchedulingProfile{}
		err = r.getUncached(ctx, req.NamespacedName, schedulingv1alpha1.GroupVersion.WithKind("SchedulingProfile"), sp)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.stopShadow(ctx, req.Name)
			r.stopServing(ctx, req.Name, fmt.Sprintf("SchedulingProfile %s was deleted", req.Name))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !sp.DeletionTimestamp.IsZero() {
		r.stopShadow(ctx, sp.Name)
		r.stopServing(ctx, sp.Name, fmt.Sprintf("SchedulingProfile %s is being deleted", sp.Name))
		return ctrl.Result{}, nil
	}
	if sp.Spec.ShadowOf != nil {
		return r.reconcileShadow(ctx, sp)
	}
	r.stopShadow(ctx, sp.Name)

	name := profilebuild.SchedulerName(sp)
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
	status.Shadow = nil

	plan, planRefusals := r.planner.Plan(sp)
	if reason, msg, err := r.refusal(ctx, sp, name, planRefusals); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		if serving {
			r.stopServing(ctx, sp.Name, msg)
		}
		status.ServingGeneration = 0
		status.ServingSpecHash = ""
		status.ServingRevision = nil
		status.Plugins = nil
		status.OmittedDefaultPlugins = nil
		r.setConditions(sp, metav1.ConditionFalse, reason, msg, metav1.ConditionFalse, reason, msg)
		setRolloutConditions(sp, rollout{schedulerName: name, reason: reason, msg: msg})
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)
		if !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) || orig.Status.ObservedGeneration != sp.Generation {
			r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Claim", "%s", eventNote(msg))
		}
		if err := r.patchStatus(ctx, orig, sp); err != nil {
			return ctrl.Result{}, err
		}
		r.deleteRevision(ctx, sp, orig.Status.ServingRevision)
		return ctrl.Result{}, nil
	}

	// written is the status as last written: orig's, or the one saying
	// that the current generation is being built.
	written := orig
	if !serving || prev.generation != sp.Generation {
		if orig.Status.ObservedGeneration != sp.Generation {
			// A new generation: say so before building it. kstatus
			// already reads a lagging observedGeneration as in progress,
			// but Ready of the old generation would stay True while the
			// build (plugins that wait for their informers to sync) runs,
			// and the message says what serves meanwhile. One more write
			// per spec change; a rebuild of an observed generation after
			// a restart writes nothing here, so that a restart does not
			// rewrite every profile.
			setRolloutConditions(sp, rollout{schedulerName: name, building: true, serving: servingGeneration(prev, serving)})
			if err := r.patchStatus(ctx, orig, sp); err != nil {
				return ctrl.Result{}, err
			}
			written = sp.DeepCopy()
		}
		fwk, reason, msg, err := r.buildSpec(ctx, sp, plan, planRefusals)
		if err != nil {
			// Not the spec's fault (the plugins' informers did not sync in
			// time): status says the generation is being built, and the
			// build is retried with backoff. After a restart nothing of
			// this profile serves meanwhile, which the status of the last
			// run does not say yet.
			if !serving {
				setRolloutConditions(sp, rollout{schedulerName: name, building: true})
				meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{
					Type: schedulingv1alpha1.ProfileActive, Status: metav1.ConditionFalse, Reason: schedulingv1alpha1.ReasonNotServing,
					Message: fmt.Sprintf("No generation of this profile serves until generation %d is built", sp.Generation), ObservedGeneration: sp.Generation,
				})
				if perr := r.patchStatus(ctx, written, sp); perr != nil {
					return ctrl.Result{}, perr
				}
			}
			return ctrl.Result{}, fmt.Errorf("building generation %d of SchedulingProfile %s: %w", sp.Generation, sp.Name, err)
		}
		if fwk == nil {
			if !serving {
				// After a restart or a leader change the last valid spec
				// is known only from its revision: serve it again.
				prev, serving = r.restore(ctx, sp, orig, name)
			}
			activeStatus, activeReason, activeMsg := metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this profile has been built"
			if serving {
				// A status written before the hash was recorded gets it.
				status.ServingSpecHash = prev.specHash
				activeStatus, activeReason = metav1.ConditionTrue, schedulingv1alpha1.ReasonServing
				activeMsg = fmt.Sprintf("Generation %d, the last valid one, keeps serving schedulerName %s", prev.generation, name)
			}
			r.setConditions(sp, metav1.ConditionFalse, reason, msg, activeStatus, activeReason, activeMsg)
			setRolloutConditions(sp, rollout{schedulerName: name, reason: reason, msg: msg, serving: servingGeneration(prev, serving)})
			r.setExtendersCondition(sp, orig, prev, serving)
			if orig.Status.ObservedGeneration != sp.Generation || !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) {
				// A user's mistake, not the operator's: info level, and
				// the event and the condition tell the user why.
				klog.FromContext(ctx).Info("Refused a profile spec", "schedulingProfile", klog.KObj(sp), "generation", sp.Generation, "reason", reason, "message", msg)
				r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Build", "%s", eventNote(msg))
			}
			// No error and no requeue either way: retrying cannot help,
			// only a new spec can, and its update triggers a reconcile.
			return ctrl.Result{}, r.patchStatus(ctx, written, sp)
		}
		prev = servedProfile{uid: sp.UID, schedulerName: name, generation: sp.Generation, specHash: profilebuild.SpecHash(&sp.Spec), plugins: resolvedPlugins(fwk.ListPlugins()), hasExtenders: len(sp.Spec.Extenders) > 0}
		r.publish(sp.Name, prev, fwk)
		klog.FromContext(ctx).Info("Published framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", sp.Generation)
		r.recorder.Eventf(sp, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonServing, "Publish", "Generation %d serves schedulerName %s", sp.Generation, name)
	}

	status.ServingGeneration = prev.generation
	status.ServingSpecHash = prev.specHash
	if prev.generation == sp.Generation {
		rev, err := r.recordRevision(ctx, sp, orig.Status.ServingRevision)
		if err != nil {
			return ctrl.Result{}, err
		}
		status.ServingRevision = rev
	}
	status.Plugins = prev.plugins
	status.OmittedDefaultPlugins = nil
	if plan != nil {
		status.OmittedDefaultPlugins = plan.OmittedDefaultPlugins
	}
	r.setConditions(sp,
		metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, fmt.Sprintf("Generation %d is valid and built", sp.Generation),
		metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, fmt.Sprintf("Generation %d serves schedulerName %s", prev.generation, name))
	setRolloutConditions(sp, rollout{schedulerName: name})
	r.setExtendersCondition(sp, orig, prev, true)
	if err := r.patchStatus(ctx, written, sp); err != nil {
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

// servingGeneration is the generation of served, 0 when nothing serves.
func servingGeneration(served servedProfile, serving bool) int64 {
	if !serving {
		return 0
	}
	return served.generation
}

// buildSpec compiles plan, sp's current spec planned with refusals, with
// opts after its own, or says why it may not serve: it is too large
// (reason SpecTooLarge) or invalid (InvalidSpec), with every refusal in
// the message. The checks are the compiler's, as in the admission
// webhook, plus what only building it here shows: the extenders' TLS
// Secrets. An error is a failure that is not the spec's, worth retrying.
func (r *SchedulingProfileReconciler) buildSpec(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, plan *profilebuild.Plan, refusals profilebuild.Refusals, opts ...runtime.Option) (fwk framework.Framework, reason, msg string, err error) {
	if len(refusals) == 0 {
		fwk, refusals, err = profilebuild.Compile(ctx, r.build, plan, r.secretReader(sp.Name),
			append([]runtime.Option{runtime.WithExtenderObserver(r.extenderObserver(sp.Name, sp.Generation))}, opts...)...)
		if err != nil {
			return nil, "", "", err
		}
	}
	if len(refusals) > 0 {
		return nil, refusals.Reason(), refusals.Message(fmt.Sprintf("Generation %d", sp.Generation)), nil
	}
	return fwk, "", "", nil
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
	if lastName := profilebuild.SchedulerName(&schedulingv1alpha1.SchedulingProfile{ObjectMeta: sp.ObjectMeta, Spec: *last}); lastName != name {
		return servedProfile{}, false
	}
	plan, refusals := r.planner.PlanSpec(sp, last)
	var fwk framework.Framework
	if len(refusals) == 0 {
		fwk, refusals, err = profilebuild.Compile(ctx, r.build, plan, r.secretReader(sp.Name), runtime.WithExtenderObserver(r.extenderObserver(sp.Name, orig.Status.ServingGeneration)))
	}
	if err == nil && len(refusals) > 0 {
		err = errors.New(refusals.Message(fmt.Sprintf("Generation %d", orig.Status.ServingGeneration)))
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "The last valid generation no longer builds", "schedulingProfile", klog.KObj(sp), "generation", orig.Status.ServingGeneration)
		return servedProfile{}, false
	}
	served := servedProfile{uid: sp.UID, schedulerName: name, generation: orig.Status.ServingGeneration, specHash: profilebuild.SpecHash(last), plugins: resolvedPlugins(fwk.ListPlugins()), hasExtenders: len(last.Extenders) > 0}
	r.publish(sp.Name, served, fwk)
	klog.FromContext(ctx).Info("Restored the last valid framework instance", "schedulingProfile", klog.KObj(sp), "schedulerName", name, "generation", served.generation)
	return served, true
}

// refusal says why sp may not serve name: the name is reserved (the
// message then also says what else is wrong with the spec), or an older
// profile claims it. The oldest claimant wins whether or not its spec is
// valid, so a name never flaps between objects as specs change.
func (r *SchedulingProfileReconciler) refusal(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, name string, planned profilebuild.Refusals) (reason, msg string, err error) {
	if planned.Reason() == schedulingv1alpha1.ReasonReservedSchedulerName {
		return planned.Reason(), planned.Message(fmt.Sprintf("Generation %d", sp.Generation)), nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := r.client.List(ctx, &list); err != nil {
		return "", "", err
	}
	for i := range list.Items {
		other := &list.Items[i]
		// A shadow claims no schedulerName.
		if other.UID == sp.UID || !other.DeletionTimestamp.IsZero() || other.Spec.ShadowOf != nil || profilebuild.SchedulerName(other) != name {
			continue
		}
		if profilebuild.Older(other, sp) {
			return schedulingv1alpha1.ReasonSchedulerNameConflict,
				fmt.Sprintf("schedulerName %s is claimed by the older SchedulingProfile %s", name, other.Name), nil
		}
	}
	return "", "", nil
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
	delete(r.failingExtenders, objName)
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

// patchStatus writes the status fields the reconciler owns, as sp has
// them, only when they differ from orig's, so re-applying the same manifest
// causes no churn. It applies them as the field manager
// profile-scheduler-profiles: conditions of other types stay with their
// writers, even ones the reconciler's cached orig does not show yet.
func (r *SchedulingProfileReconciler) patchStatus(ctx context.Context, orig, sp *schedulingv1alpha1.SchedulingProfile) error {
	want := sp.Status.DeepCopy()
	want.Conditions, _ = splitConditions(want.Conditions, ownsProfileCondition)
	for i := range want.Conditions {
		// Stored times have whole seconds; so has what is compared with
		// them, or the status as stored would never show want.
		want.Conditions[i].LastTransitionTime = want.Conditions[i].LastTransitionTime.Rfc3339Copy()
	}
	if profileShows(orig.Status, *want) {
		return nil
	}
	stored := &schedulingv1alpha1.SchedulingProfile{}
	return applyStatus(ctx, r.client, profileFieldManager, sp, want, stored,
		func() bool { return profileShows(stored.Status, *want) },
		func() {
			_, others := splitConditions(stored.Status.Conditions, ownsProfileCondition)
			want.DeepCopyInto(&stored.Status)
			stored.Status.Conditions = append(stored.Status.Conditions, others...)
		})
}

// profileConditionTypes are the SchedulingProfile condition types the
// reconciler writes. Other writers may add conditions of other types.
func profileConditionTypes() [6]string {
	return [...]string{
		schedulingv1alpha1.ProfileAccepted, schedulingv1alpha1.ProfileActive, schedulingv1alpha1.ProfileExtendersReachable,
		schedulingv1alpha1.ProfileReady, schedulingv1alpha1.ProfileReconciling, schedulingv1alpha1.ProfileStalled,
	}
}

func ownsProfileCondition(t string) bool {
	mine := profileConditionTypes()
	return slices.Contains(mine[:], t)
}

// profileShows reports whether status got shows want, whose conditions
// are the reconciler's sorted by type, in every field the reconciler
// writes.
func profileShows(got, want schedulingv1alpha1.SchedulingProfileStatus) bool {
	got.Conditions, _ = splitConditions(got.Conditions, ownsProfileCondition)
	return equality.Semantic.DeepEqual(got, want)
}

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

// getUncached reads key into obj, of kind gvk, from the API server. The
// manager's client serves typed reads from its cache, which would list and
// watch every object of the kind the operator may read (every
// ControllerRevision or Secret of its namespace); unstructured reads go
// to the API server.
func (r *SchedulingProfileReconciler) getUncached(ctx context.Context, key client.ObjectKey, gvk schema.GroupVersionKind, obj any) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.client.Get(ctx, key, u); err != nil {
		return err
	}
	return k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
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
