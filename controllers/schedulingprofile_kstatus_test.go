package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// kstatusOf is what Flux computes from sp.
func kstatusOf(t *testing.T, sp *schedulingv1alpha1.SchedulingProfile) *status.Result {
	t.Helper()
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(sp)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(schedulingv1alpha1.GroupVersion.WithKind("SchedulingProfile"))
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSetRolloutConditions(t *testing.T) {
	const built = "Generation 5 cannot be built: plugin \"Unknown\" is not registered"
	cond := func(condType string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: s, Reason: reason, Message: msg, ObservedGeneration: 5}
	}
	// before is what an earlier reconcile left: generation 4 stalled
	// while being built, which no state leaves in place.
	before := []metav1.Condition{
		{Type: schedulingv1alpha1.ProfileReady, Status: metav1.ConditionFalse, Reason: "Old", ObservedGeneration: 4},
		{Type: schedulingv1alpha1.ProfileReconciling, Status: metav1.ConditionTrue, Reason: "Old", ObservedGeneration: 4},
		{Type: schedulingv1alpha1.ProfileStalled, Status: metav1.ConditionTrue, Reason: "Old", ObservedGeneration: 4},
	}
	for _, tc := range []struct {
		name        string
		r           rollout
		want        []metav1.Condition
		wantKstatus status.Status
	}{{
		name: "the current generation serves",
		r:    rollout{schedulerName: "x", serving: 5},
		want: []metav1.Condition{
			cond(schedulingv1alpha1.ProfileReady, metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 5 serves schedulerName x"),
		},
		wantKstatus: status.CurrentStatus,
	}, {
		name: "a new generation is being built while the last serves",
		r:    rollout{schedulerName: "x", building: true, serving: 4},
		want: []metav1.Condition{
			cond(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, schedulingv1alpha1.ReasonBuilding, "Generation 5 is being built; generation 4 serves schedulerName x until it is swapped in"),
			cond(schedulingv1alpha1.ProfileReconciling, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilding, "Generation 5 is being built; generation 4 serves schedulerName x until it is swapped in"),
		},
		wantKstatus: status.InProgressStatus,
	}, {
		name: "a first generation is being built",
		r:    rollout{schedulerName: "x", building: true},
		want: []metav1.Condition{
			cond(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, schedulingv1alpha1.ReasonBuilding, "Generation 5 is being built; no generation of this profile serves schedulerName x yet"),
			cond(schedulingv1alpha1.ProfileReconciling, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilding, "Generation 5 is being built; no generation of this profile serves schedulerName x yet"),
		},
		wantKstatus: status.InProgressStatus,
	}, {
		name: "an invalid generation while the last valid one serves",
		r:    rollout{schedulerName: "x", reason: schedulingv1alpha1.ReasonInvalidSpec, msg: built, serving: 4},
		want: []metav1.Condition{
			cond(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, built+"; generation 4, the last valid one, keeps serving schedulerName x"),
			cond(schedulingv1alpha1.ProfileStalled, metav1.ConditionTrue, schedulingv1alpha1.ReasonInvalidSpec, built+"; generation 4, the last valid one, keeps serving schedulerName x"),
		},
		wantKstatus: status.FailedStatus,
	}, {
		name: "a schedulerName another profile holds",
		r:    rollout{schedulerName: "x", reason: schedulingv1alpha1.ReasonSchedulerNameConflict, msg: "schedulerName x is claimed by the older SchedulingProfile y"},
		want: []metav1.Condition{
			cond(schedulingv1alpha1.ProfileReady, metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, "schedulerName x is claimed by the older SchedulingProfile y; no generation of this profile serves"),
			cond(schedulingv1alpha1.ProfileStalled, metav1.ConditionTrue, schedulingv1alpha1.ReasonSchedulerNameConflict, "schedulerName x is claimed by the older SchedulingProfile y; no generation of this profile serves"),
		},
		wantKstatus: status.FailedStatus,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newProfile("p", "x", 0, 10)
			sp.Generation = 5
			sp.Status.ObservedGeneration = 5
			sp.Status.Conditions = append([]metav1.Condition(nil), before...)
			setRolloutConditions(sp, tc.r)
			if diff := cmp.Diff(tc.want, sp.Status.Conditions, ignoreTransitionTime); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := kstatusOf(t, sp); got.Status != tc.wantKstatus {
				t.Errorf("kstatus %s (%s), want %s", got.Status, got.Message, tc.wantKstatus)
			}
		})
	}
}

func TestStalledMessageKeepsWhatServes(t *testing.T) {
	sp := newProfile("p", "x", 0, 10)
	setRolloutConditions(sp, rollout{schedulerName: "x", reason: schedulingv1alpha1.ReasonInvalidSpec, msg: strings.Repeat("é", maxConditionMessage), serving: 4})
	c := meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileStalled)
	const tail = "; generation 4, the last valid one, keeps serving schedulerName x"
	if len(c.Message) > maxConditionMessage || !strings.HasSuffix(c.Message, "..."+tail) {
		t.Errorf("Stalled message of %d bytes ends %q; want at most %d bytes, the reason's message cut before %q", len(c.Message), c.Message[len(c.Message)-80:], maxConditionMessage, tail)
	}
}

// TestANewGenerationIsInProgressWhileItBuilds checks what GitOps tools
// read while an instance is built: a new generation says so before its
// build starts, so that Ready of the generation serving meanwhile does not
// stand for it.
func TestANewGenerationIsInProgressWhileItBuilds(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
	var during []*status.Result
	f.beforeBuild = func() { during = append(during, kstatusOf(t, f.get(t, "p"))) }
	f.reconcile(t, "p")
	f.update(t, "p", newProfile("p", "", 0, 20).Spec)
	f.reconcile(t, "p")
	f.update(t, "p", invalidSpec())
	f.reconcile(t, "p")
	if len(during) != 3 {
		t.Fatalf("%d builds, want 3", len(during))
	}
	for i, res := range during {
		if res.Status != status.InProgressStatus || !strings.Contains(res.Message, "is being built") {
			t.Errorf("build of generation %d: kstatus %s (%s), want InProgress, being built", i+1, res.Status, res.Message)
		}
	}
	if got := kstatusOf(t, f.get(t, "p")); got.Status != status.FailedStatus {
		t.Errorf("after the invalid generation: kstatus %s (%s), want Failed", got.Status, got.Message)
	}

	// A restart rebuilds generation 1 from its revision and says nothing
	// new: a restart is not a change of the profile.
	f.restart()
	during = nil
	f.reconcile(t, "p")
	for _, res := range during {
		if res.Status != status.FailedStatus {
			t.Errorf("rebuild after a restart: kstatus %s (%s), want Failed as before", res.Status, res.Message)
		}
	}
	if len(during) != 2 {
		t.Errorf("%d builds after the restart, want 2: the invalid generation, then the restored one", len(during))
	}
}

// TestABuildThatFailsForNoFaultOfTheSpecIsRetried checks that a build
// failing for a reason that is not the spec's (the plugins' informers did
// not sync in time) is retried and never reported as an invalid spec.
func TestABuildThatFailsForNoFaultOfTheSpecIsRetried(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
	f.reconcile(t, "p")
	f.update(t, "p", newProfile("p", "", 0, 20).Spec)
	f.buildErr = errors.New("informers for [*v1.PersistentVolume] did not sync within 30s")
	ctx := klog.NewContext(context.Background(), klog.Background())
	if _, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "p"}}); err == nil {
		t.Fatal("reconcile succeeded; want the build's error, so that it is retried")
	}
	if got := kstatusOf(t, f.get(t, "p")); got.Status != status.InProgressStatus {
		t.Errorf("while the build fails: kstatus %s (%s), want InProgress", got.Status, got.Message)
	}
	if events := f.events(); slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, schedulingv1alpha1.ReasonInvalidSpec) }) {
		t.Errorf("events %q: the spec is not invalid", events)
	}
	f.buildErr = nil
	f.reconcile(t, "p")
	if got := kstatusOf(t, f.get(t, "p")); got.Status != status.CurrentStatus {
		t.Errorf("after the retry: kstatus %s (%s), want Current", got.Status, got.Message)
	}
	if got := f.serving(t, "p").profile.PercentageOfNodesToScore; got == nil || *got != 20 {
		t.Errorf("serving percentageOfNodesToScore %v, want 20: the retried generation", got)
	}

	// After a restart the same failure leaves nothing serving: status
	// must not keep saying the profile is ready.
	f.restart()
	f.buildErr = errors.New("informers for [*v1.PersistentVolume] did not sync within 30s")
	if _, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "p"}}); err == nil {
		t.Fatal("reconcile after a restart succeeded; want the build's error")
	}
	if got := kstatusOf(t, f.get(t, "p")); got.Status != status.InProgressStatus {
		t.Errorf("after a restart, nothing serving: kstatus %s (%s), want InProgress", got.Status, got.Message)
	}
	if c := meta.FindStatusCondition(f.get(t, "p").Status.Conditions, schedulingv1alpha1.ProfileActive); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Active %+v after a restart with nothing serving, want False", c)
	}
}

// TestAStaleViewOfABuildInProgressIsReadAgain checks the reconcile the
// "being built" write itself brings, when the cache does not show the
// status written after the build yet: it must not build again, repeat
// the event, or rewrite status.
func TestAStaleViewOfABuildInProgressIsReadAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec schedulingv1alpha1.SchedulingProfileSpec
	}{
		{name: "built", spec: newProfile("p", "", 0, 20).Spec},
		{name: "refused", spec: invalidSpec()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
			f.reconcile(t, "p")
			f.update(t, "p", tc.spec)
			var building *schedulingv1alpha1.SchedulingProfile
			f.beforeBuild = func() { building = f.get(t, "p") }
			f.reconcile(t, "p")
			f.beforeBuild = nil
			if !meta.IsStatusConditionTrue(building.Status.Conditions, schedulingv1alpha1.ProfileReconciling) {
				t.Fatalf("during the build: conditions %+v, want Reconciling=True", building.Status.Conditions)
			}
			before := f.get(t, "p")
			f.events()
			builds, writes := len(f.built), f.statusWrites

			f.stale = building
			f.reconcile(t, "p")
			f.stale = nil
			if got := f.statusWrites - writes; got != 0 {
				t.Errorf("%d status writes from the stale view, want none", got)
			}
			if got := len(f.built) - builds; got != 0 {
				t.Errorf("%d builds from the stale view, want none", got)
			}
			if evs := f.events(); len(evs) != 0 {
				t.Errorf("events %q from the stale view, want none", evs)
			}
			if after := f.get(t, "p"); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("resourceVersion %s, then %s: status rewritten", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}
