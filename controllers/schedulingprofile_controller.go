package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

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
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
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

	// workloadAPI says whether the API server serves the workload API,
	// asked again every workloadAPIPeriod while workloadAware (guarded by
	// mu), the objects whose current spec is workload-aware, is not
	// empty (WithWorkloadAPI).
	workloadAPI       *WorkloadAPI
	workloadAPIPeriod time.Duration
	workloadAware     sets.Set[string]
	// workloadAPIServed is called before a workload-aware profile is built
	// while the API server serves the workload API (WithWorkloadAPI).
	workloadAPIServed func(context.Context) error
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
	// secrets is what the instance took from each Secret, by name.
	secrets map[string]secretVersion
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
		workloadAware:     sets.New[string](),
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
	if err := r.watchWorkloadAPI(mgr); err != nil {
		return err
	}
	secrets, err := r.watchSecrets(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("schedulingprofile").
		Watches(&schedulingv1alpha1.SchedulingProfile{}, handler.EnqueueRequestsFromMapFunc(r.withSameSchedulerName)).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(secrets).
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
	if reason, msg, err := r.refusal(ctx, sp, name, plan, planRefusals); err != nil {
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
		meta.RemoveStatusCondition(&sp.Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)
		if !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) || orig.Status.ObservedGeneration != sp.Generation {
			r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Claim", "%s", eventNote(msg))
		}
		if _, err := r.writeOutcome(ctx, orig, sp, name, claimOutcome(reason, msg, reason)); err != nil {
			return ctrl.Result{}, err
		}
		r.deleteRevision(ctx, sp, orig.Status.ServingRevision)
		return ctrl.Result{}, nil
	}

	// written is the status as last written: orig's, or the one saying
	// that the current generation is being built.
	written := orig
	rebuild := !serving || prev.generation != sp.Generation
	if !rebuild {
		// The serving instance holds TLS material of Secrets read when it
		// was built: material that changed or went makes it build again,
		// refused or with the new material.
		if rebuild, err = r.secretsChanged(ctx, sp.Name, prev.secrets); err != nil {
			return ctrl.Result{}, err
		}
	}
	if rebuild {
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
		read := map[string]secretVersion{}
		fwk, reason, msg, err := r.buildSpec(ctx, sp, plan, read)
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
			if serving {
				// A status written before the hash was recorded gets it.
				status.ServingSpecHash = prev.specHash
			}
			r.setExtendersCondition(sp, orig, prev, serving)
			if orig.Status.ObservedGeneration != sp.Generation || !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) {
				// A user's mistake, not the operator's: info level, and
				// the event and the condition tell the user why.
				klog.FromContext(ctx).Info("Refused a profile spec", "schedulingProfile", klog.KObj(sp), "generation", sp.Generation, "reason", reason, "message", msg)
				r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Build", "%s", eventNote(msg))
			}
			// No error and no requeue either way: retrying cannot help,
			// only a new spec (or Secret) can, and its update triggers a
			// reconcile.
			return r.writeOutcome(ctx, written, sp, name, refusedOutcome(reason, msg, servingGeneration(prev, serving)))
		}
		prev = servedProfile{uid: sp.UID, schedulerName: name, generation: sp.Generation, specHash: profilebuild.SpecHash(&sp.Spec), plugins: resolvedPlugins(fwk.ListPlugins()), hasExtenders: len(sp.Spec.Extenders) > 0, secrets: read}
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
	r.setExtendersCondition(sp, orig, prev, true)
	if _, err := r.writeOutcome(ctx, written, sp, name, builtOutcome(prev.generation)); err != nil {
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

// buildSpec compiles plan, sp's current spec, with opts after its own,
// recording in read (unless nil) what it took from each Secret, or says
// why it may not serve: it is too large (reason SpecTooLarge) or invalid
// (InvalidSpec), with every refusal in the message, or workload-aware
// while the API server does not serve the workload API
// (WorkloadAPINotServed, alone). The checks are the compiler's, as in the
// admission webhook, plus what only building it here shows: the
// extenders' TLS Secrets and the workload API. An error is a failure that is
// not the spec's, worth retrying.
func (r *SchedulingProfileReconciler) buildSpec(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, plan *profilebuild.Plan, read map[string]secretVersion, opts ...runtime.Option) (fwk framework.Framework, reason, msg string, err error) {
	r.noteWorkloadAware(sp.Name, plan.WorkloadAware)
	// Not built at all while the API is missing: its informers could
	// never sync.
	refusals, err := r.workloadAPIRefusal(ctx, plan)
	if err != nil {
		return nil, "", "", err
	}
	if len(refusals) > 0 {
		return nil, refusals.Reason(), refusals.Message(fmt.Sprintf("Generation %d", sp.Generation)), nil
	}
	fwk, refusals, err = profilebuild.Compile(ctx, r.build, plan, r.secretReader(sp.Name, read),
		append([]runtime.Option{runtime.WithExtenderObserver(r.extenderObserver(sp.Name, sp.Generation))}, opts...)...)
	if err != nil {
		return nil, "", "", err
	}
	if len(refusals) > 0 {
		return nil, refusals.Reason(), refusals.Message(fmt.Sprintf("Generation %d", sp.Generation)), nil
	}
	return fwk, "", "", nil
}

// refusal says why sp may not serve name: the name is reserved (the
// message then also says what else is wrong with the spec), or an older
// profile claims it. The oldest claimant wins whether or not its spec is
// valid, so a name never flaps between objects as specs change.
func (r *SchedulingProfileReconciler) refusal(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, name string, plan *profilebuild.Plan, planned profilebuild.Refusals) (reason, msg string, err error) {
	if planned.Reason() == schedulingv1alpha1.ReasonReservedSchedulerName {
		// Compiled only for its refusals, which the reserved name makes
		// sure of, as the webhook and validate report them.
		_, refusals, err := profilebuild.Compile(ctx, r.build, plan, r.secretReader(sp.Name, nil))
		if err != nil {
			return "", "", err
		}
		return refusals.Reason(), refusals.Message(fmt.Sprintf("Generation %d", sp.Generation)), nil
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
	r.workloadAware.Delete(objName)
	owned := ok && r.owners[sp.schedulerName] == objName
	if owned {
		delete(r.owners, sp.schedulerName)
	}
	r.mu.Unlock()
	if owned && r.profiles.Remove(sp.schedulerName, msg) {
		klog.FromContext(ctx).Info("Withdrew framework instance", "schedulingProfile", objName, "schedulerName", sp.schedulerName, "reason", msg)
	}
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
