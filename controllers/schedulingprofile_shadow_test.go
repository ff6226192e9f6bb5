package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// fakeShadow records what the reconciler does with a shadow.
type fakeShadow struct {
	name, of string
	fwk      framework.Framework
	stopped  int
	stats    scheduler.ShadowStats
}

func (s *fakeShadow) FrameworkOptions() []fwkruntime.Option { return nil }
func (s *fakeShadow) Start(fwk framework.Framework)         { s.fwk = fwk }
func (s *fakeShadow) Stop()                                 { s.stopped++ }
func (s *fakeShadow) Stats() scheduler.ShadowStats          { return s.stats }

// withShadows gives the fixture's reconciler shadows; it returns those
// it prepared, in order.
func (f *profileFixture) withShadows() *[]*fakeShadow {
	var made []*fakeShadow
	f.r = NewSchedulingProfileReconciler(f.client, f.set, f.build, f.recorder, testPlanner(f.reserved), WithRevisionNamespace(revisionNS),
		WithShadows(func(name, of string) Shadow {
			sh := &fakeShadow{name: name, of: of, stats: scheduler.ShadowStats{Of: of}}
			made = append(made, sh)
			return sh
		}, shadowPeriod))
	return &made
}

// shadowPeriod is how often the fixture's shadows write their counts.
const shadowPeriod = 200 * time.Millisecond

func (f *profileFixture) reconcileShadow(t *testing.T, name string) {
	t.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background())
	got, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
	if diff := cmp.Diff(ctrl.Result{RequeueAfter: shadowPeriod}, got); diff != "" {
		t.Errorf("reconcile %s: result (-want +got), a shadow comes back to write its counts:\n%s", name, diff)
	}
}

func shadowProfile(name, of string, age time.Duration) *schedulingv1alpha1.SchedulingProfile {
	sp := newProfile(name, "", age, 50)
	sp.Spec.ShadowOf = ptr.To(of)
	return sp
}

func TestShadowClaimsNoSchedulerName(t *testing.T) {
	// The shadow is older and named like the schedulerName the newer
	// profile claims: were it counted, it would win the name.
	f := newProfileFixture(t, nil, shadowProfile("p", "p", -time.Minute), newProfile("q", "p", 0, 10))
	shadows := f.withShadows()
	f.reconcileShadow(t, "p")
	f.reconcile(t, "q")
	if fwk := f.serving(t, "p"); fwk == nil || *fwk.profile.PercentageOfNodesToScore != 10 {
		t.Fatalf("serving %+v, want q's instance", fwk)
	}
	if len(*shadows) != 1 || (*shadows)[0].of != "p" || (*shadows)[0].fwk == nil {
		t.Fatalf("shadows %+v, want one started of p", *shadows)
	}
	sh := (*shadows)[0]
	if got := *sh.fwk.(*builtFramework).profile.PercentageOfNodesToScore; got != 50 {
		t.Errorf("the shadow runs an instance with percentageOfNodesToScore %d, want its own spec's 50", got)
	}

	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sh.stats = scheduler.ShadowStats{Of: "p", Since: since, Evaluated: 3, SameNode: 1, OtherNode: 1, NoNode: 1, Dropped: 2}
	time.Sleep(shadowPeriod) // counts alone are written once per period
	f.reconcileShadow(t, "p")
	got := f.get(t, "p").Status
	want := &schedulingv1alpha1.ShadowStatus{Of: "p", Generation: 1, SpecHash: profilebuild.SpecHash(&f.get(t, "p").Spec), Since: ptr.To(metav1.NewTime(since)),
		Evaluated: 3, SameNode: 1, OtherNode: 1, NoNode: 1, Dropped: 2}
	if diff := cmp.Diff(want, got.Shadow); diff != "" {
		t.Errorf("status.shadow (-want +got):\n%s", diff)
	}
	wantConds := append(conditions(1, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, "Generation 1 is valid and built",
		metav1.ConditionFalse, schedulingv1alpha1.ReasonShadowing, "Generation 1 evaluates placements of schedulerName p in shadow; it places no pod"),
		metav1.Condition{Type: schedulingv1alpha1.ProfileReady, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonShadowing,
			Message: "Generation 1 evaluates placements of schedulerName p in shadow", ObservedGeneration: 1})
	if diff := cmp.Diff(wantConds, got.Conditions, ignoreTransitionTime); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got.SchedulerName != "" || got.ServingGeneration != 0 || got.ServingRevision != nil || got.ServingSpecHash != "" {
		t.Errorf("the shadow claims schedulerName %q, serves generation %d, revision %+v; want none", got.SchedulerName, got.ServingGeneration, got.ServingRevision)
	}

	if err := f.client.Delete(context.Background(), f.get(t, "p")); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "p")
	if sh.stopped != 1 {
		t.Errorf("the deleted profile's shadow stopped %d times, want once", sh.stopped)
	}
}

func TestServingProfileBecomesAShadowAndBack(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
	shadows := f.withShadows()
	f.reconcile(t, "p")
	served := f.serving(t, "p")
	if served == nil {
		t.Fatal("not serving")
	}
	rev := f.get(t, "p").Status.ServingRevision

	spec := f.get(t, "p").Spec
	spec.ShadowOf = ptr.To("other")
	f.update(t, "p", spec)
	f.reconcileShadow(t, "p")
	if fwk := f.serving(t, "p"); fwk != nil {
		t.Errorf("serving %+v as a shadow, want nothing", fwk)
	}
	if served.closed != 1 {
		t.Errorf("the serving instance closed %d times, want once", served.closed)
	}
	if _, err := f.revision(rev); err == nil {
		t.Error("the revision of the serving generation is kept by a shadow")
	}
	if got := f.get(t, "p").Status.Shadow; got == nil || got.Of != "other" || got.Generation != 2 {
		t.Errorf("status.shadow %+v, want the counts of generation 2 of other", got)
	}

	// A new generation replaces the shadow, the old one stopped first.
	spec.PercentageOfNodesToScore = ptr.To[int32](20)
	f.update(t, "p", spec)
	f.reconcileShadow(t, "p")
	if len(*shadows) != 2 || (*shadows)[0].stopped != 1 || (*shadows)[1].fwk == nil {
		t.Fatalf("shadows %+v, want the first stopped and the second started", *shadows)
	}

	// An invalid generation keeps the last valid shadow running.
	f.update(t, "p", schedulingv1alpha1.SchedulingProfileSpec{ShadowOf: ptr.To("other"), Plugins: invalidSpec().Plugins})
	f.reconcileShadow(t, "p")
	if (*shadows)[1].stopped != 0 || len(*shadows) != 3 {
		t.Errorf("shadows %+v: the last valid one must keep running", *shadows)
	}
	if got := f.get(t, "p").Status; got.Shadow == nil || got.Shadow.Generation != 3 {
		t.Errorf("status.shadow %+v, want the counts of generation 3, the last valid one", got.Shadow)
	}

	spec.ShadowOf = nil
	f.update(t, "p", spec)
	f.reconcile(t, "p")
	if (*shadows)[1].stopped != 1 {
		t.Errorf("the shadow stopped %d times when the profile serves again, want once", (*shadows)[1].stopped)
	}
	if fwk := f.serving(t, "p"); fwk == nil {
		t.Error("not serving again")
	}
	if got := f.get(t, "p").Status.Shadow; got != nil {
		t.Errorf("status.shadow %+v on a serving profile, want none", got)
	}
}

func TestShadowsRefusedWithoutShadowSupport(t *testing.T) {
	f := newProfileFixture(t, nil, shadowProfile("p", "q", 0))
	f.reconcile(t, "p")
	got := f.get(t, "p").Status
	msg := "This operator runs no shadow profiles; remove spec.shadowOf"
	want := append(conditions(1, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, msg,
		metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this shadow has been built"),
		stalled(1, schedulingv1alpha1.ReasonInvalidSpec, msg+"; no generation of this shadow runs")...)
	if diff := cmp.Diff(want, got.Conditions, ignoreTransitionTime); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestShadowCountsAreWrittenAtMostOncePerPeriod checks that the reconciles
// a shadow's own status writes bring do not write again while placements
// stream in: counts alone are written once per period.
func TestShadowCountsAreWrittenAtMostOncePerPeriod(t *testing.T) {
	f := newProfileFixture(t, nil, shadowProfile("p", "q", 0))
	shadows := f.withShadows()
	f.reconcileShadow(t, "p")
	sh := (*shadows)[0]
	writes := f.statusWrites
	ctx := klog.NewContext(context.Background(), klog.Background())
	for i := range 20 {
		sh.stats.Evaluated = int64(i + 1)
		got, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "p"}})
		if err != nil {
			t.Fatal(err)
		}
		if got.RequeueAfter <= 0 || got.RequeueAfter > shadowPeriod {
			t.Fatalf("reconcile %d: requeue after %v, want within the period", i, got.RequeueAfter)
		}
	}
	if n := f.statusWrites - writes; n != 0 {
		t.Errorf("%d status writes for counts within one period, want none", n)
	}
	time.Sleep(shadowPeriod)
	f.reconcileShadow(t, "p")
	if n := f.statusWrites - writes; n != 1 {
		t.Errorf("%d status writes once the period passed, want 1", n)
	}
	if got := f.get(t, "p").Status.Shadow.Evaluated; got != 20 {
		t.Errorf("status.shadow.evaluated %d, want the latest count 20", got)
	}
}

func TestShadowLimitRefusesTheNewest(t *testing.T) {
	f := newProfileFixture(t, nil, shadowProfile("old", "p", -2*time.Minute), shadowProfile("new", "p", -time.Minute))
	shadows := f.withShadows()
	WithMaxShadows(1)(f.r)
	f.reconcileShadow(t, "old")
	ctx := klog.NewContext(context.Background(), klog.Background())
	if _, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "new"}}); err != nil {
		t.Fatal(err)
	}
	if len(*shadows) != 1 || (*shadows)[0].name != "old" {
		t.Fatalf("shadows started %+v, want the oldest alone", *shadows)
	}
	st := f.get(t, "new").Status
	stalled := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.ProfileStalled)
	if stalled == nil || stalled.Reason != schedulingv1alpha1.ReasonTooManyShadows || !strings.Contains(stalled.Message, "at most 1 shadow profiles (its --max-shadows), and 1 older ones exist: old") {
		t.Errorf("Stalled condition %+v, want reason %s naming the older shadow", stalled, schedulingv1alpha1.ReasonTooManyShadows)
	}
	if st.Shadow != nil {
		t.Errorf("status.shadow %+v, want none for a refused shadow", st.Shadow)
	}
}
