package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// builtFramework is what the fake BuildFunc returns: it remembers the
// profile it was built from and whether the set closed it, and may hold a
// pod at Permit. The reconciler and the set use no other method.
type builtFramework struct {
	framework.Framework
	profile *configv1.KubeSchedulerProfile
	closed  int
	held    *heldPod
}

// heldPod records why the set rejected it when its profile stopped serving.
type heldPod struct {
	framework.WaitingPod
	rejections []string
}

func (p *heldPod) Reject(_, msg string) bool {
	p.rejections = append(p.rejections, msg)
	return true
}

func (f *builtFramework) ListPlugins() *configv1.Plugins {
	return &configv1.Plugins{Score: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "NodeResourcesFit"}}}}
}

func (f *builtFramework) IterateOverWaitingPods(fn func(framework.WaitingPod)) {
	if f.held != nil {
		fn(f.held)
	}
}

func (f *builtFramework) Close() error {
	f.closed++
	return nil
}

// unknownPlugin is a plugin the fake BuildFunc refuses, as the registry
// refuses a plugin it does not know.
const unknownPlugin = "Unknown"

const revisionNS = "profile-scheduler-system"

// profileFixture is a SchedulingProfile reconciler on a fake API server.
type profileFixture struct {
	client   client.Client
	set      *profiles.Set
	recorder *events.FakeRecorder
	r        *SchedulingProfileReconciler
	reserved []string
	// built is every instance the BuildFunc returned, in order.
	built []*builtFramework
	// statusWrites counts the reconcilers' status applies and patches.
	statusWrites int
	// beforeBuild, when set, runs at the start of every build.
	beforeBuild func()
	// buildErr, when set, is returned by every build, as a failure that
	// is not the spec's (informers that did not sync).
	buildErr error
	// stale, when set, is what typed reads of that profile return, as a
	// cache that has not caught up does; unstructured reads, which go to
	// the API server, see the profile as it is.
	stale *schedulingv1alpha1.SchedulingProfile
}

func newProfileFixture(t *testing.T, reserved []string, objs ...client.Object) *profileFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	f := &profileFixture{
		reserved: reserved,
	}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&schedulingv1alpha1.SchedulingProfile{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if sp, ok := obj.(*schedulingv1alpha1.SchedulingProfile); ok && f.stale != nil && f.stale.Name == key.Name {
					f.stale.DeepCopyInto(sp)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				f.statusWrites++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
			SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
				f.statusWrites++
				return c.SubResource(sub).Apply(ctx, obj, opts...)
			},
		}).Build()
	f.restart()
	return f
}

// restart replaces the reconciler and its set with new ones on the same
// API server, as a restart or a leader change does.
func (f *profileFixture) restart() {
	f.set = profiles.NewSet(klog.Background())
	f.recorder = events.NewFakeRecorder(100)
	f.r = NewSchedulingProfileReconciler(f.client, f.set, f.build, f.recorder, testPlanner(f.reserved), WithRevisionNamespace(revisionNS))
}

func (f *profileFixture) build(_ context.Context, profile *configv1.KubeSchedulerProfile, _ ...fwkruntime.Option) (framework.Framework, error) {
	if f.beforeBuild != nil {
		f.beforeBuild()
	}
	if f.buildErr != nil {
		return nil, f.buildErr
	}
	if profile.Plugins != nil {
		for _, p := range profile.Plugins.MultiPoint.Enabled {
			if p.Name == unknownPlugin {
				return nil, &fwkruntime.ConfigError{Reason: fmt.Sprintf("plugin %q is not registered", p.Name)}
			}
		}
	}
	fwk := &builtFramework{profile: profile}
	f.built = append(f.built, fwk)
	return fwk, nil
}

func (f *profileFixture) reconcile(t *testing.T, name string) {
	t.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background())
	got, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
	if diff := cmp.Diff(ctrl.Result{}, got); diff != "" {
		t.Errorf("reconcile %s: result (-want +got):\n%s", name, diff)
	}
}

func (f *profileFixture) get(t *testing.T, name string) *schedulingv1alpha1.SchedulingProfile {
	t.Helper()
	sp := &schedulingv1alpha1.SchedulingProfile{}
	if err := f.client.Get(context.Background(), types.NamespacedName{Name: name}, sp); err != nil {
		t.Fatal(err)
	}
	return sp
}

// update changes a profile's spec and bumps its generation, as the API
// server does (the fake one leaves generations to the caller).
func (f *profileFixture) update(t *testing.T, name string, spec schedulingv1alpha1.SchedulingProfileSpec) {
	t.Helper()
	sp := f.get(t, name)
	sp.Spec = spec
	sp.Generation++
	if err := f.client.Update(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
}

func (f *profileFixture) revision(ref *schedulingv1alpha1.RevisionReference) (*appsv1.ControllerRevision, error) {
	rev := &appsv1.ControllerRevision{}
	err := f.client.Get(context.Background(), types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, rev)
	return rev, err
}

// serving returns the instance serving schedulerName, or nil.
func (f *profileFixture) serving(t *testing.T, schedulerName string) *builtFramework {
	t.Helper()
	fwk := f.set.Get(schedulerName)
	if fwk == nil {
		return nil
	}
	return fwk.(*builtFramework)
}

// events drains the events recorded so far.
func (f *profileFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newProfile is generation 1 of a profile claiming schedulerName (its own
// name when empty) with a percentageOfNodesToScore that tells its builds
// apart, created age after a fixed reference time.
func newProfile(name, schedulerName string, age time.Duration, percentage int32) *schedulingv1alpha1.SchedulingProfile {
	sp := &schedulingv1alpha1.SchedulingProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(created.Add(age))},
		Spec:       schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To(percentage)},
	}
	if schedulerName != "" {
		sp.Spec.SchedulerName = ptr.To(schedulerName)
	}
	return sp
}

func invalidSpec() schedulingv1alpha1.SchedulingProfileSpec {
	return schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
		MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: unknownPlugin}}},
	}}
}

// tooLargeSpec is valid but larger, as JSON, than profilebuild.MaxSpecBytes.
func tooLargeSpec() schedulingv1alpha1.SchedulingProfileSpec {
	args := fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", profilebuild.MaxSpecBytes))
	return schedulingv1alpha1.SchedulingProfileSpec{PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: runtime.RawExtension{Raw: []byte(args)}}}}
}

var ignoreTransitionTime = cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")

func conditions(generation int64, acceptedStatus metav1.ConditionStatus, acceptedReason, acceptedMsg string, activeStatus metav1.ConditionStatus, activeReason, activeMsg string) []metav1.Condition {
	return []metav1.Condition{
		{Type: schedulingv1alpha1.ProfileAccepted, Status: acceptedStatus, Reason: acceptedReason, Message: acceptedMsg, ObservedGeneration: generation},
		{Type: schedulingv1alpha1.ProfileActive, Status: activeStatus, Reason: activeReason, Message: activeMsg, ObservedGeneration: generation},
	}
}

// ready is the Ready condition of generation g of a profile serving
// schedulerName p, as kstatus needs it.
func ready(g int64) []metav1.Condition {
	return []metav1.Condition{{Type: schedulingv1alpha1.ProfileReady, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonServing,
		Message: fmt.Sprintf("Generation %d serves schedulerName p", g), ObservedGeneration: g}}
}

// stalled is Ready=False and Stalled=True of generation g, which cannot
// serve for reason.
func stalled(g int64, reason, msg string) []metav1.Condition {
	return []metav1.Condition{
		{Type: schedulingv1alpha1.ProfileReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: g},
		{Type: schedulingv1alpha1.ProfileStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: g},
	}
}

func TestReconcileStatus(t *testing.T) {
	servingPlugins := &schedulingv1alpha1.ResolvedPlugins{Score: []schedulingv1alpha1.ResolvedPlugin{{Name: "NodeResourcesFit", Weight: 1}}}
	for _, tc := range []struct {
		name string
		// lastValid, when set, is generation 1, reconciled before spec
		// becomes generation 2.
		lastValid *schedulingv1alpha1.SchedulingProfileSpec
		spec      schedulingv1alpha1.SchedulingProfileSpec
		// older claims the same schedulerName, "p".
		older    bool
		reserved []string

		wantServing           int64
		wantRevision          bool
		wantPlugins           *schedulingv1alpha1.ResolvedPlugins
		wantOmittedDefaults   bool
		wantConditions        func(generation int64) []metav1.Condition
		wantEventReasonPrefix string
	}{{
		name:                "a valid spec serves",
		spec:                schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To[int32](10)},
		wantServing:         1,
		wantRevision:        true,
		wantPlugins:         servingPlugins,
		wantOmittedDefaults: true,
		wantConditions: func(g int64) []metav1.Condition {
			return append(conditions(g, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, "Generation 1 is valid and built",
				metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 1 serves schedulerName p"), ready(g)...)
		},
		wantEventReasonPrefix: "Normal Serving",
	}, {
		name: "an invalid first generation does not serve",
		spec: invalidSpec(),
		wantConditions: func(g int64) []metav1.Condition {
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, `Generation 1 cannot be built: plugin "Unknown" is not registered`,
				metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this profile has been built"),
				stalled(g, schedulingv1alpha1.ReasonInvalidSpec, `Generation 1 cannot be built: plugin "Unknown" is not registered; no generation of this profile serves`)...)
		},
		wantEventReasonPrefix: "Warning InvalidSpec",
	}, {
		name:                "an invalid update keeps the last valid generation serving",
		lastValid:           &schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To[int32](10)},
		spec:                invalidSpec(),
		wantServing:         1,
		wantRevision:        true,
		wantPlugins:         servingPlugins,
		wantOmittedDefaults: true,
		wantConditions: func(g int64) []metav1.Condition {
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, `Generation 2 cannot be built: plugin "Unknown" is not registered`,
				metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 1, the last valid one, keeps serving schedulerName p"),
				stalled(g, schedulingv1alpha1.ReasonInvalidSpec, `Generation 2 cannot be built: plugin "Unknown" is not registered; generation 1, the last valid one, keeps serving schedulerName p`)...)
		},
		wantEventReasonPrefix: "Warning InvalidSpec",
	}, {
		name:                "a too-large update keeps the last valid generation serving",
		lastValid:           &schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To[int32](10)},
		spec:                tooLargeSpec(),
		wantServing:         1,
		wantRevision:        true,
		wantPlugins:         servingPlugins,
		wantOmittedDefaults: true,
		wantConditions: func(g int64) []metav1.Condition {
			msg := fmt.Sprintf("Generation 2 is %d bytes as JSON, more than the %d bytes a profile spec may have; split it or shorten the plugin args", len(`{"pluginConfig":[{"name":"NodeResourcesFit","args":{"note":""}}]}`)+profilebuild.MaxSpecBytes, profilebuild.MaxSpecBytes)
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonSpecTooLarge, msg,
				metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 1, the last valid one, keeps serving schedulerName p"),
				stalled(g, schedulingv1alpha1.ReasonSpecTooLarge, msg+"; generation 1, the last valid one, keeps serving schedulerName p")...)
		},
		wantEventReasonPrefix: "Warning SpecTooLarge",
	}, {
		name:  "a schedulerName an older profile claims is refused",
		spec:  schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To[int32](10)},
		older: true,
		wantConditions: func(g int64) []metav1.Condition {
			const msg = "schedulerName p is claimed by the older SchedulingProfile first"
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, msg,
				metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, msg),
				stalled(g, schedulingv1alpha1.ReasonSchedulerNameConflict, msg+"; no generation of this profile serves")...)
		},
		wantEventReasonPrefix: "Warning SchedulerNameConflict",
	}, {
		name:      "a conflict withdraws the last valid generation",
		lastValid: &schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("mine")},
		spec:      schedulingv1alpha1.SchedulingProfileSpec{},
		older:     true,
		wantConditions: func(g int64) []metav1.Condition {
			const msg = "schedulerName p is claimed by the older SchedulingProfile first"
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, msg,
				metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, msg),
				stalled(g, schedulingv1alpha1.ReasonSchedulerNameConflict, msg+"; no generation of this profile serves")...)
		},
		wantEventReasonPrefix: "Warning SchedulerNameConflict",
	}, {
		name:     "a reserved schedulerName is refused",
		spec:     schedulingv1alpha1.SchedulingProfileSpec{},
		reserved: []string{"default-scheduler", "p"},
		wantConditions: func(g int64) []metav1.Condition {
			const msg = "schedulerName p is reserved for another scheduler; choose another name"
			return append(conditions(g, metav1.ConditionFalse, schedulingv1alpha1.ReasonReservedSchedulerName, msg,
				metav1.ConditionFalse, schedulingv1alpha1.ReasonReservedSchedulerName, msg),
				stalled(g, schedulingv1alpha1.ReasonReservedSchedulerName, msg+"; no generation of this profile serves")...)
		},
		wantEventReasonPrefix: "Warning ReservedSchedulerName",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newProfile("p", "", time.Hour, 0)
			sp.Spec = tc.spec
			if tc.lastValid != nil {
				sp.Spec = *tc.lastValid
			}
			objs := []client.Object{sp}
			if tc.older {
				objs = append(objs, newProfile("first", "p", 0, 50))
			}
			f := newProfileFixture(t, tc.reserved, objs...)
			generation := int64(1)
			var lastRevision *schedulingv1alpha1.RevisionReference
			if tc.lastValid != nil {
				f.reconcile(t, "p")
				lastRevision = f.get(t, "p").Status.ServingRevision
				if lastRevision == nil {
					t.Fatal("the last valid generation recorded no revision")
				}
				f.update(t, "p", tc.spec)
				generation = 2
				f.events()
			}
			f.reconcile(t, "p")

			got := f.get(t, "p").Status
			if diff := cmp.Diff(tc.wantConditions(generation), got.Conditions, ignoreTransitionTime); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.ObservedGeneration != generation || got.SchedulerName != "p" {
				t.Errorf("observedGeneration %d, schedulerName %q; want %d, p", got.ObservedGeneration, got.SchedulerName, generation)
			}
			if got.ServingGeneration != tc.wantServing {
				t.Errorf("servingGeneration %d, want %d", got.ServingGeneration, tc.wantServing)
			}
			if diff := cmp.Diff(tc.wantPlugins, got.Plugins); diff != "" {
				t.Errorf("plugins (-want +got):\n%s", diff)
			}
			var wantOmitted []string
			if tc.wantOmittedDefaults {
				serves := &tc.spec
				if tc.lastValid != nil {
					serves = tc.lastValid
				}
				wantOmitted = plugins.OmittedDefaultPluginsFor(profilebuild.UpstreamProfile("p", serves))
			}
			if diff := cmp.Diff(wantOmitted, got.OmittedDefaultPlugins, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("omittedDefaultPlugins (-want +got):\n%s", diff)
			}
			switch {
			case !tc.wantRevision && got.ServingRevision != nil:
				t.Errorf("servingRevision %+v, want none", got.ServingRevision)
			case tc.wantRevision && got.ServingRevision == nil:
				t.Error("no servingRevision")
			case tc.wantRevision && lastRevision != nil && *got.ServingRevision != *lastRevision:
				t.Errorf("servingRevision %+v, want the last valid generation's %+v", got.ServingRevision, lastRevision)
			}
			if lastRevision != nil {
				_, err := f.revision(lastRevision)
				if kept := err == nil; kept != tc.wantRevision {
					t.Errorf("last valid generation's revision kept: %v, want %v (Get: %v)", kept, tc.wantRevision, err)
				}
			}
			serving := f.serving(t, "p")
			if want := tc.wantServing != 0; (serving != nil) != want {
				t.Errorf("an instance serves p: %v, want %v", serving != nil, want)
			}
			// A refused spec is built to report all it finds, and its
			// instance closed; only the last valid one stays open.
			open := 0
			for _, b := range f.built {
				if b.closed == 0 {
					open++
				}
			}
			if want := min(tc.wantServing, 1); open != int(want) {
				t.Errorf("%d of %d instances built are open, want %d", open, len(f.built), want)
			}
			evs := f.events()
			if len(evs) != 1 || !strings.HasPrefix(evs[0], tc.wantEventReasonPrefix+" ") {
				t.Errorf("events %q, want one %q", evs, tc.wantEventReasonPrefix)
			}

			// Nothing changed: the same status, and no event again.
			before := f.get(t, "p")
			f.reconcile(t, "p")
			after := f.get(t, "p")
			if diff := cmp.Diff(before.Status, after.Status); diff != "" || after.ResourceVersion != before.ResourceVersion {
				t.Errorf("second reconcile wrote the profile (resourceVersion %s, then %s); status (-before +after):\n%s", before.ResourceVersion, after.ResourceVersion, diff)
			}
			if evs := f.events(); len(evs) != 0 {
				t.Errorf("second reconcile: events %q, want none", evs)
			}
		})
	}
}

func TestOlder(t *testing.T) {
	at := func(name string, age time.Duration) *schedulingv1alpha1.SchedulingProfile {
		return newProfile(name, "", age, 0)
	}
	for _, tc := range []struct {
		name string
		a, b *schedulingv1alpha1.SchedulingProfile
		want bool
	}{
		{name: "created earlier", a: at("z", 0), b: at("a", time.Second), want: true},
		{name: "created later", a: at("a", time.Second), b: at("z", 0)},
		{name: "same time, name first", a: at("a", 0), b: at("b", 0), want: true},
		{name: "same time, name second", a: at("b", 0), b: at("a", 0)},
		{name: "itself", a: at("a", 0), b: at("a", 0)},
	} {
		if got := profilebuild.Older(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: older = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOldestClaimantServesAndNewerTakesOverWhenItGoes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		olderAge     time.Duration
		olderName    string
		newerName    string
		reconcileNew bool
	}{
		{name: "created earlier, newer reconciled first", olderName: "b-older", newerName: "a-newer", olderAge: -time.Minute, reconcileNew: true},
		{name: "created earlier, older reconciled first", olderName: "b-older", newerName: "a-newer", olderAge: -time.Minute},
		// Same second: the name decides, so both reconcilers agree.
		{name: "created together", olderName: "a-older", newerName: "b-newer", reconcileNew: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProfileFixture(t, nil, newProfile(tc.olderName, "shared", tc.olderAge, 10), newProfile(tc.newerName, "shared", 0, 20))
			if tc.reconcileNew {
				f.reconcile(t, tc.newerName)
				f.reconcile(t, tc.olderName)
			} else {
				f.reconcile(t, tc.olderName)
				f.reconcile(t, tc.newerName)
			}
			if fwk := f.serving(t, "shared"); fwk == nil || *fwk.profile.PercentageOfNodesToScore != 10 {
				t.Fatalf("serving %+v, want the older profile's instance", fwk)
			}
			newer := f.get(t, tc.newerName).Status
			want := fmt.Sprintf("schedulerName shared is claimed by the older SchedulingProfile %s", tc.olderName)
			if diff := cmp.Diff(append(conditions(1, metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, want,
				metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict, want),
				stalled(1, schedulingv1alpha1.ReasonSchedulerNameConflict, want+"; no generation of this profile serves")...), newer.Conditions, ignoreTransitionTime); diff != "" {
				t.Errorf("newer profile's conditions (-want +got):\n%s", diff)
			}
			if newer.ServingGeneration != 0 || newer.ServingRevision != nil {
				t.Errorf("newer profile serves generation %d, revision %+v; want none", newer.ServingGeneration, newer.ServingRevision)
			}

			// The older one goes: its instance is withdrawn, and the
			// newer one, reconciled because it claims the same name,
			// takes the name over.
			older := f.get(t, tc.olderName)
			if err := f.client.Delete(context.Background(), older); err != nil {
				t.Fatal(err)
			}
			f.reconcile(t, tc.olderName)
			if fwk := f.serving(t, "shared"); fwk != nil {
				t.Fatalf("serving %+v after the older profile was deleted, want nothing", fwk)
			}
			if f.built[0].closed != 1 {
				t.Errorf("the older profile's instance closed %d times, want once", f.built[0].closed)
			}
			f.reconcile(t, tc.newerName)
			if fwk := f.serving(t, "shared"); fwk == nil || *fwk.profile.PercentageOfNodesToScore != 20 {
				t.Fatalf("serving %+v, want the newer profile's instance", fwk)
			}
			if got := f.get(t, tc.newerName).Status; got.ServingGeneration != 1 || got.ServingRevision == nil {
				t.Errorf("newer profile serves generation %d, revision %+v; want 1 and its revision", got.ServingGeneration, got.ServingRevision)
			}
		})
	}
}

func TestSameSchedulerNameClaimantsAreReconciledTogether(t *testing.T) {
	f := newProfileFixture(t, nil,
		newProfile("a", "shared", 0, 10), newProfile("b", "shared", time.Minute, 20), newProfile("c", "", 0, 30))
	got := f.r.withSameSchedulerName(context.Background(), f.get(t, "a"))
	want := []ctrl.Request{{NamespacedName: types.NamespacedName{Name: "a"}}, {NamespacedName: types.NamespacedName{Name: "b"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestMovingToAnotherSchedulerNameStopsServingTheOldOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   string
		// wantServing is the percentageOfNodesToScore of the instance
		// serving the new name: 10 the first profile's, 20 the mover's.
		wantServing int32
	}{
		{name: "to a name an older profile claims", to: "shared", wantServing: 10},
		{name: "to a free name", to: "free", wantServing: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProfileFixture(t, nil, newProfile("first", "shared", 0, 10), newProfile("second", "mine", time.Minute, 20))
			f.reconcile(t, "first")
			f.reconcile(t, "second")
			revision := f.get(t, "second").Status.ServingRevision
			mine := f.serving(t, "mine")
			if mine == nil || revision == nil {
				t.Fatal("second profile does not serve schedulerName mine")
			}
			mine.held = &heldPod{}

			f.update(t, "second", schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To(tc.to), PercentageOfNodesToScore: ptr.To[int32](20)})
			f.reconcile(t, "second")
			if fwk := f.serving(t, "mine"); fwk != nil {
				t.Errorf("serving %+v under the name the profile left, want nothing", fwk)
			}
			if diff := cmp.Diff([]string{"SchedulingProfile second no longer serves schedulerName mine"}, mine.held.rejections); diff != "" {
				t.Errorf("rejections of the pod held under mine (-want +got):\n%s", diff)
			}
			if fwk := f.serving(t, tc.to); fwk == nil || *fwk.profile.PercentageOfNodesToScore != tc.wantServing {
				t.Errorf("serving %+v under %s, want the instance with percentageOfNodesToScore %d", fwk, tc.to, tc.wantServing)
			}
			if _, err := f.revision(revision); !apierrors.IsNotFound(err) {
				t.Errorf("revision of the withdrawn generation: Get = %v, want NotFound", err)
			}
		})
	}
}

// A profile deleted before its own reconcile withdrew its instance: the
// profile that takes the name over withdraws it, so pods it holds are not
// approved and bound for a profile that is gone; the late reconcile of
// the deleted one must not withdraw the new instance.
func TestTakingOverANameWithdrawsThePreviousOwner(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("first", "shared", 0, 10), newProfile("second", "shared", time.Minute, 20))
	f.reconcile(t, "first")
	f.reconcile(t, "second")
	firstInstance := f.serving(t, "shared")
	firstInstance.held = &heldPod{}
	if err := f.client.Delete(context.Background(), f.get(t, "first")); err != nil {
		t.Fatal(err)
	}

	f.reconcile(t, "second")
	if diff := cmp.Diff([]string{"SchedulingProfile first no longer serves schedulerName shared"}, firstInstance.held.rejections); diff != "" {
		t.Errorf("rejections of the pod held by the deleted profile's instance (-want +got):\n%s", diff)
	}
	f.reconcile(t, "first")
	if fwk := f.serving(t, "shared"); fwk == nil || *fwk.profile.PercentageOfNodesToScore != 20 {
		t.Errorf("serving %+v, want the second profile's instance", fwk)
	}
}

func TestInvalidUpdateRestoresTheLastValidGenerationAfterARestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes the last valid generation's revision.
		damage      func(t *testing.T, f *profileFixture, rev *appsv1.ControllerRevision)
		wantRestore bool
	}{{
		name:        "revision intact",
		wantRestore: true,
	}, {
		name: "revision deleted",
		damage: func(t *testing.T, f *profileFixture, rev *appsv1.ControllerRevision) {
			if err := f.client.Delete(context.Background(), rev); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "revision data changed",
		damage: func(t *testing.T, f *profileFixture, rev *appsv1.ControllerRevision) {
			rev.Data.Raw = []byte(`{"percentageOfNodesToScore":99}`)
			if err := f.client.Update(context.Background(), rev); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "revision controlled by another object",
		damage: func(t *testing.T, f *profileFixture, rev *appsv1.ControllerRevision) {
			rev.OwnerReferences[0].UID = "uid-someone-else"
			if err := f.client.Update(context.Background(), rev); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "revision holds another schedulerName",
		damage: func(t *testing.T, f *profileFixture, rev *appsv1.ControllerRevision) {
			sp := f.get(t, "p")
			rev.Data.Raw = []byte(`{"schedulerName":"elsewhere","percentageOfNodesToScore":10}`)
			if err := f.client.Update(context.Background(), rev); err != nil {
				t.Fatal(err)
			}
			// Status records that data, as if it were the last valid one.
			sp.Status.ServingRevision.Hash = dataHash(rev.Data.Raw)
			if err := f.client.Status().Update(context.Background(), sp); err != nil {
				t.Fatal(err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
			f.reconcile(t, "p")
			f.update(t, "p", invalidSpec())
			f.reconcile(t, "p")
			lastValid := f.get(t, "p").Status
			if lastValid.ServingGeneration != 1 || lastValid.ServingRevision == nil {
				t.Fatalf("after the invalid update: serving generation %d, revision %+v; want 1 and its revision", lastValid.ServingGeneration, lastValid.ServingRevision)
			}
			if tc.damage != nil {
				rev, err := f.revision(lastValid.ServingRevision)
				if err != nil {
					t.Fatal(err)
				}
				tc.damage(t, f, rev)
			}

			f.restart()
			f.built = nil
			f.reconcile(t, "p")

			fwk := f.serving(t, "p")
			if !tc.wantRestore {
				if fwk != nil {
					t.Fatalf("serving %+v from a damaged revision, want nothing", fwk)
				}
				got := f.get(t, "p").Status
				if diff := cmp.Diff(append(conditions(2, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, `Generation 2 cannot be built: plugin "Unknown" is not registered`,
					metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing, "No valid generation of this profile has been built"),
					stalled(2, schedulingv1alpha1.ReasonInvalidSpec, `Generation 2 cannot be built: plugin "Unknown" is not registered; no generation of this profile serves`)...), got.Conditions, ignoreTransitionTime); diff != "" {
					t.Errorf("conditions (-want +got):\n%s", diff)
				}
				return
			}
			if fwk == nil || *fwk.profile.PercentageOfNodesToScore != 10 || *fwk.profile.SchedulerName != "p" {
				t.Fatalf("serving %+v, want the instance of generation 1", fwk)
			}
			got := f.get(t, "p").Status
			if diff := cmp.Diff(lastValid, got); diff != "" {
				t.Errorf("status changed by the restore (-before +after):\n%s", diff)
			}
			// The user was told when the update was refused.
			if evs := f.events(); len(evs) != 0 {
				t.Errorf("events %q, want none", evs)
			}
		})
	}
}

func TestStatusIsWrittenOnceWhenItChanges(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
	for _, step := range []struct {
		name   string
		change func()
		want   int
	}{
		// A new generation is written twice: being built, then built.
		{name: "a new profile", want: 2},
		{name: "nothing changed", want: 0},
		{name: "a refused update", change: func() {
			f.update(t, "p", schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: unknownPlugin}}}}})
		}, want: 2},
		{name: "nothing changed again", want: 0},
		// A rebuild after a restart is not a new generation.
		{name: "a restart", change: func() { f.restart() }, want: 0},
	} {
		if step.change != nil {
			step.change()
		}
		before := f.statusWrites
		f.reconcile(t, "p")
		if got := f.statusWrites - before; got != step.want {
			t.Errorf("%s: %d status writes, want %d", step.name, got, step.want)
		}
	}
}

func TestValidUpdatePublishesANewGenerationAndRevision(t *testing.T) {
	f := newProfileFixture(t, nil, newProfile("p", "", 0, 10))
	f.reconcile(t, "p")
	first := f.get(t, "p").Status.ServingRevision
	if first == nil {
		t.Fatal("generation 1 recorded no revision")
	}

	f.update(t, "p", schedulingv1alpha1.SchedulingProfileSpec{PercentageOfNodesToScore: ptr.To[int32](20)})
	f.reconcile(t, "p")

	if fwk := f.serving(t, "p"); fwk == nil || *fwk.profile.PercentageOfNodesToScore != 20 {
		t.Fatalf("serving %+v, want generation 2's instance", fwk)
	}
	if f.built[0].closed != 1 {
		t.Errorf("generation 1's instance closed %d times, want once", f.built[0].closed)
	}
	sp := f.get(t, "p")
	got := sp.Status
	if got.ServingGeneration != 2 {
		t.Errorf("servingGeneration %d, want 2", got.ServingGeneration)
	}
	if diff := cmp.Diff(append(conditions(2, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, "Generation 2 is valid and built",
		metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 2 serves schedulerName p"), ready(2)...), got.Conditions, ignoreTransitionTime); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got.ServingRevision == nil || *got.ServingRevision == *first {
		t.Fatalf("servingRevision %+v, want a new one", got.ServingRevision)
	}
	if got.ServingRevision.Namespace != revisionNS {
		t.Errorf("revision in namespace %q, want %q", got.ServingRevision.Namespace, revisionNS)
	}
	rev, err := f.revision(got.ServingRevision)
	if err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(rev); owner == nil || owner.UID != sp.UID || owner.Kind != "SchedulingProfile" {
		t.Errorf("revision controlled by %+v, want the profile", owner)
	}
	if rev.Revision != 2 || rev.Labels[revisionProfileLabel] != "p" || dataHash(rev.Data.Raw) != got.ServingRevision.Hash {
		t.Errorf("revision %d, labels %v, hash %s; want 2, the profile's label, %s", rev.Revision, rev.Labels, dataHash(rev.Data.Raw), got.ServingRevision.Hash)
	}
	if _, err := f.revision(first); !apierrors.IsNotFound(err) {
		t.Errorf("generation 1's revision: Get = %v, want NotFound", err)
	}

	// A revision someone deleted is written again before a restart needs it.
	if err := f.client.Delete(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, "p")
	if _, err := f.revision(got.ServingRevision); err != nil {
		t.Errorf("deleted revision not written again: %v", err)
	}
	if len(f.built) != 2 {
		t.Errorf("%d instances built, want 2: an unchanged generation is not built again", len(f.built))
	}
}

func TestDeletionStopsServing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// finalizers keep the object, being deleted, after Delete.
		finalizers []string
		// wantRejection is what pods held by its instance are told.
		wantRejection string
	}{
		{name: "deleted", wantRejection: "SchedulingProfile p was deleted"},
		{name: "being deleted", finalizers: []string{"example.com/hold"}, wantRejection: "SchedulingProfile p is being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newProfile("p", "", 0, 10)
			sp.Finalizers = tc.finalizers
			f := newProfileFixture(t, nil, sp)
			f.reconcile(t, "p")
			fwk := f.serving(t, "p")
			if fwk == nil {
				t.Fatal("not serving before the deletion")
			}
			fwk.held = &heldPod{}
			if err := f.client.Delete(context.Background(), f.get(t, "p")); err != nil {
				t.Fatal(err)
			}
			f.reconcile(t, "p")
			if fwk := f.serving(t, "p"); fwk != nil {
				t.Errorf("serving %+v after the deletion, want nothing", fwk)
			}
			if fwk.closed != 1 {
				t.Errorf("instance closed %d times, want once", fwk.closed)
			}
			if diff := cmp.Diff([]string{tc.wantRejection}, fwk.held.rejections); diff != "" {
				t.Errorf("rejections of the held pod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomeConditions(t *testing.T) {
	long := strings.Repeat("é", maxConditionMessage)
	for _, tc := range []struct {
		name string
		msg  string
		want []metav1.Condition
	}{{
		name: "messages kept",
		msg:  "Generation 3 cannot be built: bad",
		want: conditions(3, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, "Generation 3 cannot be built: bad",
			metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 2, the last valid one, keeps serving schedulerName p"),
	}, {
		// metav1.Condition allows 32768 bytes; a build error quoting a
		// large plugin arg must not make the status write fail.
		name: "long messages cut on a rune boundary",
		msg:  long,
		want: conditions(3, metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec, long[:maxConditionMessage-4]+"...",
			metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "Generation 2, the last valid one, keeps serving schedulerName p"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sp := newProfile("p", "", 0, 10)
			sp.Generation = 3
			sp.Status.Conditions = conditions(2, metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt, "old", metav1.ConditionTrue, schedulingv1alpha1.ReasonServing, "old")
			refusedOutcome(schedulingv1alpha1.ReasonInvalidSpec, tc.msg, 2).setConditions(sp, "p")
			got := []metav1.Condition{}
			for _, typ := range []string{schedulingv1alpha1.ProfileAccepted, schedulingv1alpha1.ProfileActive} {
				got = append(got, *meta.FindStatusCondition(sp.Status.Conditions, typ))
			}
			if diff := cmp.Diff(tc.want, got, ignoreTransitionTime); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range sp.Status.Conditions {
				if len(c.Message) > maxConditionMessage {
					t.Errorf("%s message is %d bytes, more than %d", c.Type, len(c.Message), maxConditionMessage)
				}
			}
		})
	}
}

// testPlanner plans specs as the operator does, with reserved names
// reserved.
func testPlanner(reserved []string) *profilebuild.Planner {
	return profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), ReservedSchedulerNames: reserved, Namespace: revisionNS, OmittedDefaultPlugins: plugins.OmittedDefaultPluginsFor})
}
