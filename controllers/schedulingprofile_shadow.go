package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Shadow is a shadow instance beside the scheduling loop (the scheduler's
// *scheduler.Shadow): built with FrameworkOptions, it evaluates placements
// from Start to Stop.
type Shadow interface {
	FrameworkOptions() []runtime.Option
	Start(fwk framework.Framework)
	Stop()
	Stats() scheduler.ShadowStats
}

// ShadowFunc prepares a shadow named after a SchedulingProfile of the pods
// of schedulerName of (the scheduler's NewShadow).
type ShadowFunc func(name, of string) Shadow

// DefaultShadowStatusPeriod is how often a shadow's counts are written to
// its status at most.
const DefaultShadowStatusPeriod = 10 * time.Second

// WithShadows lets profiles run in shadow (spec.shadowOf), prepared by
// newShadow, their counts written to status every period at most. Without
// it a shadow profile is refused; 0 for period means
// DefaultShadowStatusPeriod.
func WithShadows(newShadow ShadowFunc, period time.Duration) ProfileOption {
	if period <= 0 {
		period = DefaultShadowStatusPeriod
	}
	return func(r *SchedulingProfileReconciler) {
		r.newShadow, r.shadowStatusPeriod = newShadow, period
		r.shadows = map[string]runningShadow{}
	}
}

// runningShadow is the shadow a profile object runs.
type runningShadow struct {
	uid        types.UID
	of         string
	generation int64
	// specHash is profilebuild.SpecHash of generation's spec.
	specHash string
	plugins  *schedulingv1alpha1.ResolvedPlugins
	shadow   Shadow
	// countsWritten is when the counts were last written to status.
	countsWritten time.Time
}

// reconcileShadow runs sp, whose spec has shadowOf, in shadow: it builds
// the spec as any profile's (an invalid one is refused the same way),
// serves no schedulerName and claims none, and reports the shadow's counts
// in status. It comes back every shadowStatusPeriod to write them, so the
// status is written at a bounded rate, not per pod.
func (r *SchedulingProfileReconciler) reconcileShadow(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) (ctrl.Result, error) {
	of := *sp.Spec.ShadowOf
	// A profile that served until now gives its schedulerName up.
	r.stopServing(ctx, sp.Name, fmt.Sprintf("SchedulingProfile %s became a shadow of schedulerName %s", sp.Name, of))

	orig := sp.DeepCopy()
	status := &sp.Status
	status.ObservedGeneration = sp.Generation
	status.SchedulerName = ""
	status.ServingGeneration = 0
	status.ServingSpecHash = ""
	status.ServingRevision = nil
	meta.RemoveStatusCondition(&status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)

	if msg, err := r.shadowLimit(ctx, sp); err != nil {
		return ctrl.Result{}, err
	} else if msg != "" {
		r.stopShadow(ctx, sp.Name)
		status.Plugins, status.OmittedDefaultPlugins, status.Shadow = nil, nil, nil
		msg = "Generation " + fmt.Sprint(sp.Generation) + " does not run: " + msg
		return r.writeOutcome(ctx, orig, sp, of, claimOutcome(schedulingv1alpha1.ReasonTooManyShadows, msg, schedulingv1alpha1.ReasonNotServing))
	}

	r.mu.Lock()
	cur, running := r.shadows[sp.Name]
	r.mu.Unlock()
	if running && (cur.uid != sp.UID || cur.of != of) {
		r.stopShadow(ctx, sp.Name)
		running = false
	}
	plan, _ := r.planner.Plan(sp)
	if !running || cur.generation != sp.Generation {
		next, reason, msg, err := r.startShadow(ctx, sp, plan, of)
		if err != nil {
			// Not the spec's fault: retried with backoff.
			return ctrl.Result{}, fmt.Errorf("building generation %d of shadow SchedulingProfile %s: %w", sp.Generation, sp.Name, err)
		}
		if reason != "" {
			last := int64(0)
			if running {
				last = cur.generation
			} else {
				status.Plugins, status.OmittedDefaultPlugins, status.Shadow = nil, nil, nil
			}
			if orig.Status.ObservedGeneration != sp.Generation || !meta.IsStatusConditionFalse(orig.Status.Conditions, schedulingv1alpha1.ProfileAccepted) {
				klog.FromContext(ctx).Info("Refused a shadow profile spec", "schedulingProfile", klog.KObj(sp), "generation", sp.Generation, "reason", reason, "message", msg)
				r.recorder.Eventf(sp, nil, corev1.EventTypeWarning, reason, "Build", "%s", eventNote(msg))
			}
			if running {
				status.Shadow = shadowStatus(cur, cur.shadow.Stats())
			}
			return r.writeOutcome(ctx, orig, sp, of, refusedOutcome(reason, msg, last))
		}
		cur = next
		klog.FromContext(ctx).Info("Started shadow instance", "schedulingProfile", klog.KObj(sp), "shadowOf", of, "generation", sp.Generation)
		r.recorder.Eventf(sp, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonShadowing, "Shadow", "Generation %d evaluates placements of schedulerName %s in shadow", sp.Generation, of)
	}

	status.Plugins = cur.plugins
	status.OmittedDefaultPlugins = nil
	if plan != nil {
		status.OmittedDefaultPlugins = plan.OmittedDefaultPlugins
	}
	status.Shadow = shadowStatus(cur, cur.shadow.Stats())
	res, err := r.writeOutcome(ctx, orig, sp, of, builtOutcome(cur.generation))
	if err != nil {
		return res, err
	}
	// A shadow keeps no revision: it serves nothing a restart must restore.
	r.deleteRevision(ctx, sp, orig.Status.ServingRevision)
	return res, nil
}

// writeShadowStatus writes the status of a running shadow and has it
// reconciled again when the counts may next be written. A change of the
// counts alone is written at most once per shadowStatusPeriod: each write
// brings a reconcile of its own, and under a stream of placements the
// counts change on every one, so without the bound a shadow's status
// would be written once per round trip.
func (r *SchedulingProfileReconciler) writeShadowStatus(ctx context.Context, orig, sp *schedulingv1alpha1.SchedulingProfile) (ctrl.Result, error) {
	now := time.Now()
	r.mu.Lock()
	last := r.shadows[sp.Name].countsWritten
	r.mu.Unlock()
	if wait := r.shadowStatusPeriod - now.Sub(last); wait > 0 && onlyShadowCountsDiffer(orig.Status, sp.Status) {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := r.patchStatus(ctx, orig, sp); err != nil {
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	if cur, ok := r.shadows[sp.Name]; ok {
		cur.countsWritten = now
		r.shadows[sp.Name] = cur
	}
	r.mu.Unlock()
	return ctrl.Result{RequeueAfter: r.shadowStatusPeriod}, nil
}

// onlyShadowCountsDiffer says whether want differs from got in the
// shadow's counts alone, the shadow being the same generation of the same
// schedulerName.
func onlyShadowCountsDiffer(got, want schedulingv1alpha1.SchedulingProfileStatus) bool {
	if got.Shadow == nil || want.Shadow == nil || got.Shadow.Of != want.Shadow.Of || got.Shadow.Generation != want.Shadow.Generation || got.Shadow.SpecHash != want.Shadow.SpecHash {
		return false
	}
	got.Shadow, want.Shadow = nil, nil
	got.Conditions, _ = splitConditions(got.Conditions, ownsProfileCondition)
	want.Conditions, _ = splitConditions(want.Conditions, ownsProfileCondition)
	return equality.Semantic.DeepEqual(got, want)
}

// startShadow builds sp's spec as a shadow of of and starts it in place of
// the one sp ran, or says why it cannot: the reason and message of a
// refused spec.
func (r *SchedulingProfileReconciler) startShadow(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile, plan *profilebuild.Plan, of string) (runningShadow, string, string, error) {
	if r.newShadow == nil {
		return runningShadow{}, schedulingv1alpha1.ReasonInvalidSpec, "This operator runs no shadow profiles; remove spec.shadowOf", nil
	}
	sh := r.newShadow(sp.Name, of)
	fwk, reason, msg, err := r.buildSpec(ctx, sp, plan, nil, sh.FrameworkOptions()...)
	if fwk == nil {
		return runningShadow{}, reason, msg, err
	}
	next := runningShadow{uid: sp.UID, of: of, generation: sp.Generation, specHash: profilebuild.SpecHash(&sp.Spec), plugins: resolvedPlugins(fwk.ListPlugins()), shadow: sh}
	// The old one first: its series go when it stops, and the new one's
	// carry the same profile label.
	r.stopShadow(ctx, sp.Name)
	sh.Start(fwk)
	r.mu.Lock()
	r.shadows[sp.Name] = next
	r.mu.Unlock()
	return next, "", "", nil
}

// stopShadow stops the shadow objName runs, if any.
func (r *SchedulingProfileReconciler) stopShadow(ctx context.Context, objName string) {
	r.mu.Lock()
	cur, ok := r.shadows[objName]
	delete(r.shadows, objName)
	r.mu.Unlock()
	if ok {
		cur.shadow.Stop()
		klog.FromContext(ctx).Info("Stopped shadow instance", "schedulingProfile", objName, "shadowOf", cur.of, "generation", cur.generation)
	}
}

// stopShadowsAtShutdown has the shadows stop when the manager does: they
// run on the elected leader only, like the reconciler that starts them.
func (r *SchedulingProfileReconciler) stopShadowsAtShutdown(mgr ctrl.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.mu.Lock()
		names := slices.Collect(maps.Keys(r.shadows))
		r.mu.Unlock()
		for _, name := range names {
			r.stopShadow(ctx, name)
		}
		return nil
	}))
}

// shadowStatus is status.shadow for the counts of the shadow sh runs:
// counts only, never a pod (the shadow records those on the pods). Times
// have whole seconds, as stored, so that unchanged counts compare equal to
// the status as stored and cause no write.
func shadowStatus(sh runningShadow, st scheduler.ShadowStats) *schedulingv1alpha1.ShadowStatus {
	out := &schedulingv1alpha1.ShadowStatus{
		Of:         st.Of,
		Generation: sh.generation,
		SpecHash:   sh.specHash,
		Evaluated:  st.Evaluated,
		SameNode:   st.SameNode,
		OtherNode:  st.OtherNode,
		NoNode:     st.NoNode,
		Errors:     st.Errors,
		SampledOut: st.SampledOut,
		Dropped:    st.Dropped,
	}
	if !st.Since.IsZero() {
		since := metav1.NewTime(st.Since).Rfc3339Copy()
		out.Since = &since
	}
	return out
}
