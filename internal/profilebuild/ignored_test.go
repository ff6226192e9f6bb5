package profilebuild_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

// TestPlanIgnoredResources checks what Plan hands NodeResourcesFit for the
// resources extenders mark ignoredByScheduler, as kube-scheduler's
// buildExtenders does: they replace the args' own ignoredResources, the
// rest of the args stays, and the spec itself is left as written (its
// hash is what a shadow promotes).
func TestPlanIgnoredResources(t *testing.T) {
	planner := profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), Namespace: "profile-scheduler-system"})
	extender := func(resources ...schedulingv1alpha1.ExtenderManagedResource) schedulingv1alpha1.Extender {
		return schedulingv1alpha1.Extender{URLPrefix: "https://gpu.example/scheduler", FilterVerb: "filter", EnableHTTPS: true, ManagedResources: resources}
	}
	ignored := func(name string) schedulingv1alpha1.ExtenderManagedResource {
		return schedulingv1alpha1.ExtenderManagedResource{Name: name, IgnoredByScheduler: true}
	}
	fitArgs := func(json string) []schedulingv1alpha1.PluginConfig {
		return []schedulingv1alpha1.PluginConfig{
			{Name: "ImageLocality"},
			{Name: "NodeResourcesFit", Args: runtime.RawExtension{Raw: []byte(json)}},
		}
	}
	for _, tt := range []struct {
		name string
		spec schedulingv1alpha1.SchedulingProfileSpec
		// want is NodeResourcesFit's args in the plan, "" for none.
		want string
	}{
		{name: "no extenders", spec: schedulingv1alpha1.SchedulingProfileSpec{}},
		{
			name: "nothing ignored",
			spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: []schedulingv1alpha1.Extender{extender(schedulingv1alpha1.ExtenderManagedResource{Name: "example.com/gpu"})}},
		},
		{
			name: "no args of its own",
			spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: []schedulingv1alpha1.Extender{extender(ignored("example.com/gpu"))}},
			want: `{"ignoredResources":["example.com/gpu"]}`,
		},
		{
			name: "every extender's, in order",
			spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: []schedulingv1alpha1.Extender{
				extender(ignored("example.com/gpu"), schedulingv1alpha1.ExtenderManagedResource{Name: "example.com/gpu-memory"}, ignored("example.com/nic")),
				extender(ignored("example.com/fpga")),
			}},
			want: `{"ignoredResources":["example.com/gpu","example.com/nic","example.com/fpga"]}`,
		},
		{
			name: "in place of the args' own, keeping the rest",
			spec: schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: fitArgs(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"NodeResourcesFitArgs","ignoredResources":["example.com/fpga"],"scoringStrategy":{"type":"MostAllocated"}}`),
				Extenders:    []schedulingv1alpha1.Extender{extender(ignored("example.com/gpu"))},
			},
			want: `{"apiVersion":"kubescheduler.config.k8s.io/v1","ignoredResources":["example.com/gpu"],"kind":"NodeResourcesFitArgs","scoringStrategy":{"type":"MostAllocated"}}`,
		},
		{
			name: "args left as written when nothing is ignored",
			spec: schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: fitArgs(`{"ignoredResources":["example.com/fpga"]}`),
				Extenders:    []schedulingv1alpha1.Extender{extender(schedulingv1alpha1.ExtenderManagedResource{Name: "example.com/gpu"})},
			},
			want: `{"ignoredResources":["example.com/fpga"]}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp := &schedulingv1alpha1.SchedulingProfile{Spec: tt.spec}
			sp.Name = "gpu"
			written := sp.DeepCopy()
			plan, refusals := planner.Plan(sp)
			if len(refusals) > 0 {
				t.Fatalf("refused: %v", refusals.Message("SchedulingProfile gpu"))
			}
			got := ""
			for _, pc := range plan.Profile.PluginConfig {
				if pc.Name == "NodeResourcesFit" {
					got = string(pc.Args.Raw)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeResourcesFit's args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(written, sp); diff != "" {
				t.Errorf("Plan changed the profile (-before +after):\n%s", diff)
			}
		})
	}
}

// TestRefusalsMessage checks how every refusal is worded after the object
// in status and the webhook, and alone in validate.
func TestRefusalsMessage(t *testing.T) {
	refusals := profilebuild.Refusals{
		profilebuild.ReservedName("default-scheduler"),
		{Reason: schedulingv1alpha1.ReasonSpecTooLarge, Field: "spec", Detail: "is 2000000 bytes as JSON"},
		{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.filter.enabled[0]", Detail: `Filter plugin "Nope": no such plugin is registered`},
		{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders[0].managedResources[0].ignoredByScheduler", Detail: "extenders[0].managedResources[0].ignoredByScheduler: can't find NodeResourcesFitArgs"},
	}
	if got, want := refusals.Reason(), schedulingv1alpha1.ReasonReservedSchedulerName; got != want {
		t.Errorf("Reason() = %q, want %q", got, want)
	}
	want := "schedulerName default-scheduler is reserved for another scheduler; choose another name; " +
		"Generation 3 is 2000000 bytes as JSON; " +
		`Generation 3 cannot be built: Filter plugin "Nope": no such plugin is registered; extenders[0].managedResources[0].ignoredByScheduler: can't find NodeResourcesFitArgs`
	if diff := cmp.Diff(want, refusals.Message("Generation 3")); diff != "" {
		t.Errorf("Message (-want +got):\n%s", diff)
	}
	var lines []string
	for _, r := range refusals {
		lines = append(lines, r.String())
	}
	wantLines := []string{
		"schedulerName default-scheduler is reserved for another scheduler; choose another name",
		"is 2000000 bytes as JSON",
		`cannot be built: Filter plugin "Nope": no such plugin is registered`,
		"cannot be built: extenders[0].managedResources[0].ignoredByScheduler: can't find NodeResourcesFitArgs",
	}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("String of each (-want +got):\n%s", diff)
	}
	if got := (profilebuild.Refusals{}).Reason(); got != "" {
		t.Errorf("Reason() of no refusals = %q, want none", got)
	}
}
