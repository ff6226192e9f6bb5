package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// slowPlugin is a QueueSort plugin; its factory in TestValidate takes
// longer than the budget.
type slowPlugin struct{}

const slowName = "Slow"

func (slowPlugin) Name() string { return slowName }

func (slowPlugin) Less(*framework.QueuedPodInfo, *framework.QueuedPodInfo) bool { return false }

func profile(name string, created time.Time, spec schedulingv1alpha1.SchedulingProfileSpec) *schedulingv1alpha1.SchedulingProfile {
	return &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}, Spec: spec}
}

func TestValidate(t *testing.T) {
	const buildTime = 300 * time.Millisecond
	registry := plugins.NewInTreeRegistry()
	if err := registry.Register(slowName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		time.Sleep(buildTime)
		return slowPlugin{}, nil
	}, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	stored := profile("first", now.Add(-time.Hour), schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("shared")})
	p := newTestValidator(t, registry, buildTime/3, []string{"default-scheduler"}, stored)
	unknown := schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
		Filter: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NoSuchPlugin"}}},
	}}
	slow := schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
		QueueSort: schedulingv1alpha1.PluginSet{
			Disabled: []schedulingv1alpha1.Plugin{{Name: "*"}},
			Enabled:  []schedulingv1alpha1.Plugin{{Name: slowName}},
		},
	}}
	type result struct {
		Warnings []string
		Err      string
	}
	for _, tt := range []struct {
		name     string
		old, new *schedulingv1alpha1.SchedulingProfile
		want     result
	}{
		{
			name: "valid",
			new:  profile("gpu", now, schedulingv1alpha1.SchedulingProfileSpec{}),
		},
		{
			name: "unknown plugin",
			new:  profile("typo", now, unknown),
			want: result{Err: `SchedulingProfile typo cannot be built: Filter plugin "NoSuchPlugin": no such plugin is registered`},
		},
		{
			name: "reserved schedulerName",
			new:  profile("default-scheduler", now, schedulingv1alpha1.SchedulingProfileSpec{}),
			want: result{Err: "SchedulingProfile default-scheduler: schedulerName default-scheduler is reserved for another scheduler; choose another name"},
		},
		{
			name: "schedulerName an older profile claims",
			new:  profile("second", now, schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("shared")}),
			want: result{Warnings: []string{"schedulerName shared is claimed by the older SchedulingProfile first; this one will not serve while that one does"}},
		},
		{
			name: "a shadow claims no schedulerName",
			new:  profile("second-shadow", now, schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("shared"), ShadowOf: ptr.To("shared")}),
		},
		{
			name: "the older profile itself",
			old:  stored,
			new: func() *schedulingv1alpha1.SchedulingProfile {
				sp := stored.DeepCopy()
				sp.Spec.PercentageOfNodesToScore = ptr.To[int32](50)
				return sp
			}(),
		},
		{
			name: "metadata-only update of a spec that no longer builds",
			old:  profile("typo", now, unknown),
			new: func() *schedulingv1alpha1.SchedulingProfile {
				sp := profile("typo", now, unknown)
				sp.Labels = map[string]string{"team": "platform"}
				sp.Finalizers = []string{"example.com/keep"}
				return sp
			}(),
		},
		{
			name: "spec update that no longer builds",
			old:  profile("typo", now, schedulingv1alpha1.SchedulingProfileSpec{}),
			new:  profile("typo", now, unknown),
			want: result{Err: `SchedulingProfile typo cannot be built: Filter plugin "NoSuchPlugin": no such plugin is registered`},
		},
		{
			name: "validation slower than the budget",
			new:  profile("slow", now, slow),
			want: result{Err: "SchedulingProfile slow was not validated within 100ms, so nothing was changed; try again, and if it recurs the operator's log says what was slow"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []string
			var err error
			if tt.old == nil {
				warnings, err = p.ValidateCreate(context.Background(), tt.new)
			} else {
				warnings, err = p.ValidateUpdate(context.Background(), tt.old, tt.new)
			}
			got := result{Warnings: warnings}
			if err != nil {
				got.Err = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("validation (-want +got):\n%s", diff)
			}
		})
	}
	// The slow build finishes after its answer, and is closed on its own.
	time.Sleep(buildTime)
}

// TestBuildsAreBounded checks that validations past MaxConcurrentBuilds
// wait for a build to end, also one whose request already ran out of
// time, rather than start more.
func TestBuildsAreBounded(t *testing.T) {
	release := make(chan struct{})
	var running, most atomic.Int32
	registry := plugins.NewInTreeRegistry()
	if err := registry.Register(slowName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		return slowPlugin{}, nil
	}, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	p := newTestValidator(t, registry, 50*time.Millisecond, nil)
	slow := schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
		QueueSort: schedulingv1alpha1.PluginSet{Disabled: []schedulingv1alpha1.Plugin{{Name: "*"}}, Enabled: []schedulingv1alpha1.Plugin{{Name: slowName}}},
	}}
	var wg sync.WaitGroup
	for i := range 3 * MaxConcurrentBuilds {
		wg.Go(func() {
			if _, err := p.ValidateCreate(t.Context(), profile(fmt.Sprintf("slow-%d", i), time.Now(), slow)); err == nil {
				t.Errorf("validation %d succeeded while every build was held", i)
			}
		})
	}
	wg.Wait()
	close(release)
	if got := most.Load(); got != MaxConcurrentBuilds {
		t.Errorf("at most %d builds ran at once, want %d", got, MaxConcurrentBuilds)
	}
}

// TestPanicIsRefused checks that a validation whose plugin factory panics
// is refused as the operator's internal error and counted, and that the
// webhook goes on serving.
func TestPanicIsRefused(t *testing.T) {
	registry := plugins.NewInTreeRegistry()
	if err := registry.Register(slowName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		panic("a factory's bug")
	}, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	p := newTestValidator(t, registry, Budget, nil)
	panicking := schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
		QueueSort: schedulingv1alpha1.PluginSet{Disabled: []schedulingv1alpha1.Plugin{{Name: "*"}}, Enabled: []schedulingv1alpha1.Plugin{{Name: slowName}}},
	}}
	for i := range 2 {
		_, err := p.ValidateCreate(t.Context(), profile("panics", time.Now(), panicking))
		if err == nil || !strings.Contains(err.Error(), "an internal error occurred") {
			t.Fatalf("validation %d: got %v, want a refusal saying an internal error occurred", i, err)
		}
		if got, want := testutil.ToFloat64(p.panics), float64(i+1); got != want {
			t.Errorf("after validation %d the panic counter is %v, want %v", i, got, want)
		}
	}
	// Every build token came back: a valid spec still validates.
	if _, err := p.ValidateCreate(t.Context(), profile("valid", time.Now(), schedulingv1alpha1.SchedulingProfileSpec{})); err != nil {
		t.Errorf("a valid spec after the panics: %v", err)
	}
}

// newTestValidator is the webhook's validator over registry, with budget
// per review, reserved names, stored as the profiles already stored, and
// room for one shadow.
func newTestValidator(t *testing.T, registry runtime.Registry, budget time.Duration, reserved []string, stored ...client.Object) *profileValidator {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	if err := schedulingv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	planner := profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), ReservedSchedulerNames: reserved})
	return &profileValidator{
		checker:    profilebuild.NewChecker(planner, profilebuild.Offline(registry, nil)),
		profiles:   fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored...).Build(),
		maxShadows: 1,
		budget:     budget,
		builds:     make(chan struct{}, MaxConcurrentBuilds),
		panics:     newPanicCounter(),
	}
}
