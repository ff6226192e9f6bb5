package profilebuild_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// namedPlugin stands in for a workload plugin where the registry has none
// yet: only whether the compiler lets the name through is under test.
type namedPlugin string

func (p namedPlugin) Name() string { return string(p) }

// PlacementFeasible lets the stand-in serve as GangScheduling, which the
// runtime requires to implement it.
func (p namedPlugin) PlacementFeasible(context.Context, framework.PlacementCycleState, *framework.PodGroupInfo, framework.PlacementProgress) *framework.Status {
	return nil
}

// workloadRegistry is the in-tree registry with the workload plugins.
func workloadRegistry(t *testing.T) runtime.Registry {
	t.Helper()
	r := plugins.NewInTreeRegistry()
	for _, name := range []string{"GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"} {
		if _, ok := r[name]; ok {
			continue
		}
		factory := func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
			return namedPlugin(name), nil
		}
		if err := r.Register(name, factory, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestWorkloadGates checks that the operator's workload gates decide, for
// every caller of the compiler alike, whether a profile may enable the
// workload plugins, and that the plan says which profiles are
// workload-aware.
func TestWorkloadGates(t *testing.T) {
	multiPoint := func(names ...string) *schedulingv1alpha1.Plugins {
		ps := &schedulingv1alpha1.Plugins{}
		for _, n := range names {
			ps.MultiPoint.Enabled = append(ps.MultiPoint.Enabled, schedulingv1alpha1.Plugin{Name: n})
		}
		return ps
	}
	off := runtime.WorkloadGates{}
	generic := runtime.WorkloadGates{GenericWorkload: true}
	both := runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}
	for _, tt := range []struct {
		name      string
		gates     runtime.WorkloadGates
		plugins   *schedulingv1alpha1.Plugins
		want      profilebuild.Refusals
		wantAware bool
	}{
		{name: "default profile, gates off", gates: off},
		{name: "default profile, gates on", gates: both},
		{
			name: "GangScheduling, gates off", gates: off, plugins: multiPoint("GangScheduling"),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.multiPoint.enabled[0]",
				Detail: `MultiPoint plugin "GangScheduling": kube-scheduler 1.37.2 uses this plugin only with the GenericWorkload feature gate, off by default; profile-scheduler refuses it rather than load it inert`}},
		},
		{name: "GangScheduling with GenericWorkload", gates: generic, plugins: multiPoint("GangScheduling"), wantAware: true},
		{
			name: "topology placement with GenericWorkload only", gates: generic, plugins: multiPoint("GangScheduling", "TopologyPlacementGenerator"), wantAware: true,
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.multiPoint.enabled[1]",
				Detail: `MultiPoint plugin "TopologyPlacementGenerator": kube-scheduler 1.37.2 uses this plugin only with the TopologyAwareWorkloadScheduling feature gate, off by default; profile-scheduler refuses it rather than load it inert`}},
		},
		{name: "upstream's workload plugins with both gates", gates: both, plugins: multiPoint("GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"), wantAware: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			planner := profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), Namespace: "profile-scheduler-system", WorkloadGates: tt.gates})
			sp := &schedulingv1alpha1.SchedulingProfile{Spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: tt.plugins}}
			sp.Name = "workloads"
			plan, refusals := planner.Plan(sp)
			if len(refusals) > 0 {
				t.Fatalf("Plan() refused %v", refusals)
			}
			if plan.WorkloadAware != tt.wantAware {
				t.Errorf("plan WorkloadAware = %t, want %t", plan.WorkloadAware, tt.wantAware)
			}
			got := profilebuild.NewChecker(planner, profilebuild.Offline(workloadRegistry(t), nil)).Check(t.Context(), sp)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
		})
	}
}
