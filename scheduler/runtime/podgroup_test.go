package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Pod-group plugins used by the tests, each configured through its fields.

type podGroupPostFilterPlugin struct {
	name   string
	status *framework.Status
	result *framework.PodGroupPostFilterResult
}

func (p *podGroupPostFilterPlugin) Name() string { return p.name }
func (p *podGroupPostFilterPlugin) PodGroupPostFilter(context.Context, framework.PodGroupCycleState, *framework.PodGroupInfo, framework.PodGroupSchedulingFunc) (*framework.PodGroupPostFilterResult, *framework.Status) {
	return p.result, p.status
}

type placementGeneratePlugin struct {
	name       string
	placements []*framework.Placement
	status     *framework.Status
	// parent is the placement the plugin was asked to split.
	parent *framework.Placement
}

func (p *placementGeneratePlugin) Name() string { return p.name }
func (p *placementGeneratePlugin) GeneratePlacements(_ context.Context, _ framework.PodGroupCycleState, _ *framework.PodGroupInfo, parent *framework.Placement) (*framework.GeneratePlacementsResult, *framework.Status) {
	p.parent = parent
	return &framework.GeneratePlacementsResult{Placements: p.placements}, p.status
}

type placementScoreResult struct {
	score  int64
	status *framework.Status
}

type placementScorePlugin struct {
	name        string
	results     map[*framework.Placement]placementScoreResult
	normalizeFn func(scores []framework.PlacementScore) *framework.Status
}

func (p *placementScorePlugin) Name() string { return p.name }
func (p *placementScorePlugin) ScorePlacement(_ context.Context, _ framework.PlacementCycleState, _ *framework.PodGroupInfo, a *framework.PodGroupAssignments) (int64, *framework.Status) {
	r := p.results[a.Placement]
	return r.score, r.status
}
func (p *placementScorePlugin) PlacementScoreExtensions() framework.PlacementScoreExtensions {
	if p.normalizeFn == nil {
		return nil
	}
	return p
}
func (p *placementScorePlugin) NormalizePlacementScore(_ context.Context, _ framework.PodGroupCycleState, _ *framework.PodGroupInfo, scores []framework.PlacementScore) *framework.Status {
	return p.normalizeFn(scores)
}

type placementFeasiblePlugin struct {
	name   string
	status *framework.Status
	called bool
}

func (p *placementFeasiblePlugin) Name() string { return p.name }
func (p *placementFeasiblePlugin) PlacementFeasible(context.Context, framework.PlacementCycleState, *framework.PodGroupInfo, framework.PlacementProgress) *framework.Status {
	p.called = true
	return p.status
}

// statusByMessage compares statuses as people see them: code, plugin and
// message, not the identity of a wrapped error.
var statusByMessage = cmp.Comparer(func(a, b *framework.Status) bool {
	return a.Code() == b.Code() && a.Plugin() == b.Plugin() && a.Message() == b.Message()
})

// gang stands for GangScheduling: naming it makes a profile workload-aware.
func gang() *placementFeasiblePlugin { return &placementFeasiblePlugin{name: "GangScheduling"} }

var (
	noGates      = WorkloadGates{}
	genericGate  = WorkloadGates{GenericWorkload: true}
	bothGates    = WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}
	withGangOnly = configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}}}
)

// gangFilter stands for GangScheduling where a test also runs it at Filter.
type gangFilter struct{ placementFeasiblePlugin }

func (g *gangFilter) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

// plainPlugin implements no extension point.
type plainPlugin struct{ name string }

func (p *plainPlugin) Name() string { return p.name }

func TestNewFrameworkPodGroupPoints(t *testing.T) {
	extra := map[string]framework.Plugin{
		"DefaultPreemption": &podGroupPostFilterPlugin{name: "DefaultPreemption"},
		"Generate":          &placementGeneratePlugin{name: "Generate"},
		"PScore":            &placementScorePlugin{name: "PScore"},
		"Only":              &filterOnly{name: "Only"},
		"GangScheduling":    gang(),
	}
	base := &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled("Binder")}
	with := func(p configv1.Plugins) *configv1.Plugins {
		p.QueueSort, p.Bind = base.QueueSort, base.Bind
		return &p
	}
	tests := []struct {
		name    string
		plugins *configv1.Plugins
		gates   WorkloadGates
		want    *configv1.Plugins
		wantErr *ConfigError
	}{
		{
			name:    "gates off: an upstream plugin at podGroupPostFilter is inert",
			plugins: &configv1.Plugins{PodGroupPostFilter: enabled("DefaultPreemption")},
			want:    base,
		},
		{
			name:    "gates on, but a profile without a workload plugin leaves the points inert",
			plugins: &configv1.Plugins{PodGroupPostFilter: enabled("DefaultPreemption")},
			gates:   bothGates,
			want:    base,
		},
		{
			name:    "GenericWorkload builds podGroupPostFilter in a workload-aware profile",
			plugins: &configv1.Plugins{MultiPoint: withGangOnly, PodGroupPostFilter: enabled("DefaultPreemption")},
			gates:   genericGate,
			want:    with(configv1.Plugins{PodGroupPostFilter: enabled("DefaultPreemption")}),
		},
		{
			name:    "GenericWorkload alone leaves the placement points inert",
			plugins: &configv1.Plugins{MultiPoint: enabled("GangScheduling", "Generate", "PScore", "DefaultPreemption")},
			gates:   genericGate,
			want:    with(configv1.Plugins{PodGroupPostFilter: enabled("DefaultPreemption")}),
		},
		{
			name:    "both gates expand multiPoint into every pod-group point, with weights",
			plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}, {Name: "Generate"}, weighted("PScore", 3), {Name: "DefaultPreemption"}}}},
			gates:   bothGates,
			want: with(configv1.Plugins{PlacementGenerate: enabled("Generate"), PlacementScore: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("PScore", 3)}},
				PodGroupPostFilter: enabled("DefaultPreemption")}),
		},
		{
			name: "a weight at placementScore wins over multiPoint's",
			plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "GangScheduling"}, weighted("PScore", 3)}},
				PlacementScore: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("PScore", 5)}}},
			gates: bothGates,
			want:  with(configv1.Plugins{PlacementScore: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("PScore", 5)}}}),
		},
		{
			name:    "gate on: a plugin that does not implement the point is refused as at any point",
			plugins: &configv1.Plugins{MultiPoint: withGangOnly, PodGroupPostFilter: enabled("Only")},
			gates:   genericGate,
			wantErr: &ConfigError{ExtensionPoint: PodGroupPostFilter, Plugin: "Only", Reason: "the plugin does not implement PodGroupPostFilter"},
		},
		{
			name:    "gate off: the refusal names the gate",
			plugins: &configv1.Plugins{MultiPoint: withGangOnly, PlacementScore: enabled("Only")},
			gates:   genericGate,
			wantErr: &ConfigError{ExtensionPoint: PlacementScore, Plugin: "Only",
				Reason: "the plugin does not implement PlacementScore; that point only runs for pod groups, with the TopologyAwareWorkloadScheduling feature gate, off by default in Kubernetes 1.37, and pods are scheduled one at a time here"},
		},
		{
			name:    "a negative placementScore weight",
			plugins: &configv1.Plugins{MultiPoint: withGangOnly, PlacementScore: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("PScore", -1)}}},
			gates:   bothGates,
			wantErr: &ConfigError{ExtensionPoint: PlacementScore, Plugin: "PScore", Reason: "weight -1 is negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), tt.plugins, WithWorkloadGates(tt.gates))
			if tt.wantErr != nil {
				var got *ConfigError
				if !errors.As(err, &got) {
					t.Fatalf("NewFramework error = %v, want %v", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, got); diff != "" {
					t.Errorf("NewFramework error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			if diff := cmp.Diff(tt.want, fw.ListPlugins(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListPlugins (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewFrameworkPlacementFeasible(t *testing.T) {
	refusedInert := &ConfigError{ExtensionPoint: MultiPoint, Plugin: "GangScheduling",
		Reason: "kube-scheduler 1.37.2 uses this plugin only with the GenericWorkload feature gate, off by default; profile-scheduler refuses it rather than load it inert"}
	tests := []struct {
		name                   string
		gates                  WorkloadGates
		gang                   framework.Plugin
		wantErr                *ConfigError
		wantPlacementFeasibles int
	}{
		{
			name:  "GenericWorkload enabled, GangScheduling does not fulfill PlacementFeasiblePlugin interface",
			gates: genericGate,
			gang:  &plainPlugin{name: "GangScheduling"},
			wantErr: &ConfigError{ExtensionPoint: PlacementFeasible, Plugin: "GangScheduling",
				Reason: "GenericWorkload is enabled, but GangScheduling plugin does not fulfill PlacementFeasiblePlugin interface"},
		},
		{
			name:    "GenericWorkload disabled, GangScheduling does not fulfill PlacementFeasiblePlugin interface",
			gang:    &plainPlugin{name: "GangScheduling"},
			wantErr: refusedInert,
		},
		{
			name:  "GenericWorkload enabled, GangScheduling plugin not present",
			gates: genericGate,
		},
		{
			name:                   "GenericWorkload enabled, GangScheduling fulfills PlacementFeasiblePlugin interface",
			gates:                  genericGate,
			gang:                   gang(),
			wantPlacementFeasibles: 1,
		},
		{
			name:    "GenericWorkload disabled, GangScheduling fulfills PlacementFeasiblePlugin interface",
			gang:    gang(),
			wantErr: refusedInert,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{}
			plugins := &configv1.Plugins{}
			if tt.gang != nil {
				extra["GangScheduling"] = tt.gang
				plugins.MultiPoint = withGangOnly
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), plugins, WithWorkloadGates(tt.gates))
			if tt.wantErr != nil {
				var got *ConfigError
				if !errors.As(err, &got) {
					t.Fatalf("NewFramework error = %v, want %v", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, got); diff != "" {
					t.Errorf("NewFramework error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			if got := len(fw.placementFeasiblePlugins); got != tt.wantPlacementFeasibles {
				t.Errorf("placementFeasiblePlugins = %d, want %d", got, tt.wantPlacementFeasibles)
			}
		})
	}
}

func TestRunPodGroupPostFilterPlugins(t *testing.T) {
	const reason = "injected status"
	pod1 := types.NamespacedName{Namespace: "default", Name: "p1"}
	nominated := func(node string) *framework.PodGroupPostFilterResult {
		return &framework.PodGroupPostFilterResult{NominatingInfos: map[types.NamespacedName]*framework.NominatingInfo{pod1: {NominatedNodeName: node}}}
	}
	tests := []struct {
		name            string
		plugins         []*podGroupPostFilterPlugin
		genericWorkload bool
		wantStatus      *framework.Status
		wantResult      *framework.PodGroupPostFilterResult
	}{
		{
			name:            "no registered plugins",
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Unschedulable),
		},
		{
			name:       "generic workload feature is disabled",
			wantStatus: framework.NewStatus(framework.Unschedulable, "generic workload feature is disabled, cannot perform PodGroupPostFilter"),
		},
		{
			name:            "first plugin returns error",
			plugins:         []*podGroupPostFilterPlugin{{name: "plugin1", status: framework.NewStatus(framework.Error, reason)}},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Error, `error in "plugin1" PodGroupPostFilter plugins: `+reason).WithPlugin("plugin1"),
		},
		{
			name:            "first plugin returns non supported status: Skip",
			plugins:         []*podGroupPostFilterPlugin{{name: "plugin1", status: framework.NewStatus(framework.Skip, reason)}},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Error, `error in "plugin1" PodGroupPostFilter plugins: `+reason).WithPlugin("plugin1"),
		},
		{
			name: "first plugin returns success",
			plugins: []*podGroupPostFilterPlugin{
				{name: "plugin1", status: framework.NewStatus(framework.Success, reason), result: nominated("node1")},
				{name: "plugin2", status: framework.NewStatus(framework.Unschedulable, reason)},
			},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Success, reason),
			wantResult:      nominated("node1"),
		},
		{
			name: "first plugin returns UnschedulableAndUnresolvable",
			plugins: []*podGroupPostFilterPlugin{
				{name: "plugin1", status: framework.NewStatus(framework.UnschedulableAndUnresolvable, reason)},
				{name: "plugin2", status: framework.NewStatus(framework.Success, reason), result: nominated("node2")},
			},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.UnschedulableAndUnresolvable, reason).WithPlugin("plugin1"),
		},
		{
			name: "first plugin returns Unschedulable, second returns success",
			plugins: []*podGroupPostFilterPlugin{
				{name: "plugin1", status: framework.NewStatus(framework.Unschedulable, reason)},
				{name: "plugin2", status: framework.NewStatus(framework.Success, reason), result: nominated("node2")},
			},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Success, reason),
			wantResult:      nominated("node2"),
		},
		{
			name: "all plugins return Unschedulable, aggregate reasons",
			plugins: []*podGroupPostFilterPlugin{
				{name: "plugin1", status: framework.NewStatus(framework.Unschedulable, reason)},
				{name: "plugin2", status: framework.NewStatus(framework.Unschedulable, reason)},
			},
			genericWorkload: true,
			wantStatus:      framework.NewStatus(framework.Unschedulable, reason, reason).WithPlugin("plugin1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{}
			var names []string
			for _, p := range tt.plugins {
				extra[p.name] = p
				names = append(names, p.name)
			}
			plugins := &configv1.Plugins{PodGroupPostFilter: enabled(names...)}
			gates := noGates
			if tt.genericWorkload {
				extra["GangScheduling"] = gang()
				plugins.MultiPoint, gates = withGangOnly, genericGate
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), plugins, WithWorkloadGates(gates))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			schedule := func(context.Context) (*framework.PodGroupAssignments, *framework.Status) {
				return &framework.PodGroupAssignments{}, nil
			}
			pgInfo := &framework.PodGroupInfo{Namespace: "default", Name: "pg1", Type: framework.PodGroupKeyType}
			res, status := fw.RunPodGroupPostFilterPlugins(t.Context(), framework.NewCycleState(), pgInfo, schedule)
			if diff := cmp.Diff(tt.wantStatus, status, statusByMessage); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResult, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunPlacementFeasiblePlugins(t *testing.T) {
	tests := []struct {
		name       string
		plugins    []*placementFeasiblePlugin
		wantStatus *framework.Status
		wantCalled []bool
	}{
		{
			name:       "All plugins succeed",
			plugins:    []*placementFeasiblePlugin{{name: "p1"}, {name: "p2"}},
			wantCalled: []bool{true, true},
		},
		{
			name:       "First plugin returns Wait, continues",
			plugins:    []*placementFeasiblePlugin{{name: "p1", status: framework.NewStatus(framework.Wait, "wait")}, {name: "p2"}},
			wantStatus: framework.NewStatus(framework.Wait, "wait").WithPlugin("p1"),
			wantCalled: []bool{true, true},
		},
		{
			name:       "First plugin returns Unschedulable, breaks",
			plugins:    []*placementFeasiblePlugin{{name: "p1", status: framework.NewStatus(framework.Unschedulable, "unschedulable")}, {name: "p2"}},
			wantStatus: framework.NewStatus(framework.Unschedulable, "unschedulable").WithPlugin("p1"),
			wantCalled: []bool{true, false},
		},
		{
			name: "First plugin returns Wait, second returns Unschedulable, returns Unschedulable",
			plugins: []*placementFeasiblePlugin{
				{name: "p1", status: framework.NewStatus(framework.Wait, "wait")},
				{name: "p2", status: framework.NewStatus(framework.Unschedulable, "unschedulable")},
			},
			wantStatus: framework.NewStatus(framework.Unschedulable, "unschedulable").WithPlugin("p2"),
			wantCalled: []bool{true, true},
		},
		{
			name: "First plugin returns Wait, second returns Wait, returns last Wait",
			plugins: []*placementFeasiblePlugin{
				{name: "p1", status: framework.NewStatus(framework.Wait, "wait1")},
				{name: "p2", status: framework.NewStatus(framework.Wait, "wait2")},
			},
			wantStatus: framework.NewStatus(framework.Wait, "wait2").WithPlugin("p2"),
			wantCalled: []bool{true, true},
		},
		{
			name:       "Plugin returns Error, breaks",
			plugins:    []*placementFeasiblePlugin{{name: "p1", status: framework.NewStatus(framework.Error, "error")}, {name: "p2"}},
			wantStatus: framework.AsStatus(fmt.Errorf("running PlacementFeasible plugin: %w", errors.New("error"))).WithPlugin("p1"),
			wantCalled: []bool{true, false},
		},
		{
			name:       "Plugin returns unexpected status, breaks",
			plugins:    []*placementFeasiblePlugin{{name: "p1", status: framework.NewStatus(framework.Skip, "error")}, {name: "p2"}},
			wantStatus: framework.AsStatus(errors.New("unexpected status from PlacementFeasible plugin: Skip")).WithPlugin("p1"),
			wantCalled: []bool{true, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := newTestFramework(t.Context(), baseRegistry(nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			for _, p := range tt.plugins {
				fw.placementFeasiblePlugins = append(fw.placementFeasiblePlugins, p)
			}
			fw.pluginObs[PlacementFeasible] = observersFor(fw.metrics, fw.placementFeasiblePlugins, PlacementFeasible)
			state := framework.NewCycleState()
			state.SetRecordPluginMetrics(true)
			status := fw.RunPlacementFeasiblePlugins(t.Context(), state, nil, framework.PlacementProgress{})
			if diff := cmp.Diff(tt.wantStatus, status, statusByMessage); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			for i, p := range tt.plugins {
				if p.called != tt.wantCalled[i] {
					t.Errorf("plugin %s called = %v, want %v", p.name, p.called, tt.wantCalled[i])
				}
			}
		})
	}
}

func TestRunPlacementGeneratePlugins(t *testing.T) {
	nodes := makeNodes(3)
	foo := &framework.Placement{Name: "foo", Nodes: nodes[:2]}
	bar := &framework.Placement{Name: "bar", Nodes: nodes[1:]}
	tests := []struct {
		name           string
		plugins        []*placementGeneratePlugin
		wantPlacements []*framework.Placement
		wantStatus     *framework.Status
	}{
		{
			name:           "When no plugins provided, returns a single placement with initial nodes",
			wantPlacements: []*framework.Placement{{Nodes: nodes}},
		},
		{
			name:           "When one plugin provided, returns placements generated by the plugin",
			plugins:        []*placementGeneratePlugin{{name: "plugin0", placements: []*framework.Placement{foo, bar}}},
			wantPlacements: []*framework.Placement{foo, bar},
		},
		{
			name:           "Only the first plugin runs",
			plugins:        []*placementGeneratePlugin{{name: "plugin0", placements: []*framework.Placement{bar}}, {name: "plugin1", placements: []*framework.Placement{foo}}},
			wantPlacements: []*framework.Placement{bar},
		},
		{
			name:       "When plugin fails, returns error status",
			plugins:    []*placementGeneratePlugin{{name: "plugin0", status: framework.NewStatus(framework.Error, "injected")}},
			wantStatus: framework.NewStatus(framework.Error, "injected").WithPlugin("plugin0"),
		},
		{
			name:       "When plugin returns no placements, returns unschedulable",
			plugins:    []*placementGeneratePlugin{{name: "plugin0", placements: []*framework.Placement{}}},
			wantStatus: framework.NewStatus(framework.Unschedulable, "no feasible placements found").WithPlugin("plugin0"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{"GangScheduling": gang()}
			var names []string
			for _, p := range tt.plugins {
				extra[p.name] = p
				names = append(names, p.name)
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: withGangOnly, PlacementGenerate: enabled(names...)}, WithWorkloadGates(bothGates))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			got, status := fw.RunPlacementGeneratePlugins(t.Context(), framework.NewCycleState(), nil, nodes)
			if diff := cmp.Diff(tt.wantStatus, status, statusByMessage); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPlacements, got, cmp.Comparer(func(a, b *framework.NodeInfo) bool { return a == b })); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if len(tt.plugins) > 0 {
				if diff := cmp.Diff(&framework.Placement{Nodes: nodes}, tt.plugins[0].parent, cmp.Comparer(func(a, b *framework.NodeInfo) bool { return a == b })); diff != "" {
					t.Errorf("parent placement (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestRunPlacementScorePlugins(t *testing.T) {
	// 3 placements; what they hold does not matter to scoring.
	placements := []*framework.Placement{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	scores := func(s0, s1, s2 int64) map[*framework.Placement]placementScoreResult {
		return map[*framework.Placement]placementScoreResult{placements[0]: {score: s0}, placements[1]: {score: s1}, placements[2]: {score: s2}}
	}
	tests := []struct {
		name       string
		plugins    []*placementScorePlugin
		weights    []int32
		wantScores []framework.PlacementPluginScores
		wantStatus *framework.Status
	}{
		{
			name:    "all success",
			plugins: []*placementScorePlugin{{name: "plugin1", results: scores(0, 50, 100)}, {name: "plugin2", results: scores(0, 50, 0)}},
			weights: []int32{1, 2},
			wantScores: []framework.PlacementPluginScores{
				{Placement: placements[0], Scores: []framework.PluginScore{{Name: "plugin1", Score: 0}, {Name: "plugin2", Score: 0}}, TotalScore: 0},
				{Placement: placements[1], Scores: []framework.PluginScore{{Name: "plugin1", Score: 50}, {Name: "plugin2", Score: 100}}, TotalScore: 150},
				{Placement: placements[2], Scores: []framework.PluginScore{{Name: "plugin1", Score: 100}, {Name: "plugin2", Score: 0}}, TotalScore: 100},
			},
		},
		{
			name: "any error",
			plugins: []*placementScorePlugin{{name: "plugin1", results: scores(0, 50, 100)}, {name: "plugin2", results: map[*framework.Placement]placementScoreResult{
				placements[1]: {score: 50, status: framework.NewStatus(framework.Error, "error for test")},
			}}},
			weights:    []int32{1, 2},
			wantStatus: framework.AsStatus(errors.New(`running PlacementScore plugins: plugin "plugin2" failed with: error for test`)),
		},
		{
			name: "no plugins",
			wantScores: []framework.PlacementPluginScores{
				{Placement: placements[0]}, {Placement: placements[1]}, {Placement: placements[2]},
			},
		},
		{
			name: "normalize success",
			plugins: []*placementScorePlugin{{name: "plugin1", results: scores(0, 50, 100)}, {name: "plugin2", results: scores(100, 200, 400),
				normalizeFn: func(s []framework.PlacementScore) *framework.Status {
					maxScore := s[2].Score
					for i := range s {
						s[i].Score = s[i].Score * 100 / maxScore
					}
					return nil
				}}},
			weights: []int32{1, 2},
			wantScores: []framework.PlacementPluginScores{
				{Placement: placements[0], Scores: []framework.PluginScore{{Name: "plugin1", Score: 0}, {Name: "plugin2", Score: 50}}, TotalScore: 50},
				{Placement: placements[1], Scores: []framework.PluginScore{{Name: "plugin1", Score: 50}, {Name: "plugin2", Score: 100}}, TotalScore: 150},
				{Placement: placements[2], Scores: []framework.PluginScore{{Name: "plugin1", Score: 100}, {Name: "plugin2", Score: 200}}, TotalScore: 300},
			},
		},
		{
			name: "normalize failure",
			plugins: []*placementScorePlugin{{name: "plugin1", results: scores(0, 50, 100)}, {name: "plugin2", results: scores(0, 50, 100),
				normalizeFn: func([]framework.PlacementScore) *framework.Status {
					return framework.NewStatus(framework.Error, "error for test")
				}}},
			weights:    []int32{1, 2},
			wantStatus: framework.AsStatus(errors.New(`running NormalizePlacementScore on PlacementScore plugins: plugin "plugin2" failed with: error for test`)),
		},
		{
			name:       "plugin result is greater than max score",
			plugins:    []*placementScorePlugin{{name: "plugin1", results: scores(0, 101, 100)}},
			weights:    []int32{1},
			wantStatus: framework.AsStatus(errors.New(`applying score defaultWeights on PlacementScore plugins: plugin "plugin1" returns an invalid score 101, it should in the range of [0, 100] after normalizing`)),
		},
		{
			name:       "plugin result is less than min score",
			plugins:    []*placementScorePlugin{{name: "plugin1", results: scores(0, -1, 100)}},
			weights:    []int32{1},
			wantStatus: framework.AsStatus(errors.New(`applying score defaultWeights on PlacementScore plugins: plugin "plugin1" returns an invalid score -1, it should in the range of [0, 100] after normalizing`)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{"GangScheduling": gang()}
			var set configv1.PluginSet
			for i, p := range tt.plugins {
				extra[p.name] = p
				set.Enabled = append(set.Enabled, weighted(p.name, tt.weights[i]))
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: withGangOnly, PlacementScore: set}, WithWorkloadGates(bothGates))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			assignments := make([]*framework.PodGroupAssignments, len(placements))
			states := make([]framework.PlacementCycleState, len(placements))
			for i := range placements {
				assignments[i] = &framework.PodGroupAssignments{Placement: placements[i]}
				state := framework.NewCycleState()
				state.SetRecordPluginMetrics(i == 0)
				states[i] = state
			}
			got, status := fw.RunPlacementScorePlugins(t.Context(), framework.NewCycleState(), nil, assignments, states)
			if diff := cmp.Diff(tt.wantStatus, status, statusByMessage); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantScores, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunPlacementScorePluginsNeedsOneStatePerPlacement(t *testing.T) {
	fw, err := newTestFramework(t.Context(), baseRegistry(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	_, status := fw.RunPlacementScorePlugins(t.Context(), framework.NewCycleState(), nil, []*framework.PodGroupAssignments{{Placement: &framework.Placement{}}}, nil)
	want := framework.AsStatus(errors.New("expected one PlacementCycleState per PodGroupAssignments, got 0 placement states for 1 assignments"))
	if diff := cmp.Diff(want, status, statusByMessage); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestWildCardEventsOfWorkloadAwareInstances checks that a plugin naming
// no events gets PodGroup's too in a workload-aware instance, as upstream
// unrolls the wildcard with GenericWorkload on, and only there.
func TestWildCardEventsOfWorkloadAwareInstances(t *testing.T) {
	for _, aware := range []bool{false, true} {
		t.Run(fmt.Sprintf("workloadAware=%v", aware), func(t *testing.T) {
			extra := map[string]framework.Plugin{"F1": &filterOnly{name: "F1"}, "GangScheduling": gang()}
			plugins := &configv1.Plugins{Filter: enabled("F1")}
			gates := noGates
			if aware {
				plugins.MultiPoint, gates = withGangOnly, genericGate
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), plugins, WithWorkloadGates(gates))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			var got []framework.ClusterEvent
			for _, ext := range fw.EnqueueExtensions() {
				if ext.Name() != "F1" {
					continue
				}
				events, err := ext.EventsToRegister(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range events {
					got = append(got, e.Event)
				}
			}
			var want []framework.ClusterEvent
			for _, e := range framework.UnrollWildCardResource() {
				want = append(want, e.Event)
			}
			if aware {
				want = append(want, framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.All})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("F1's events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHasPlacementPlugins(t *testing.T) {
	extra := map[string]framework.Plugin{
		"Generate":       &placementGeneratePlugin{name: "Generate"},
		"PScore":         &placementScorePlugin{name: "PScore"},
		"GangScheduling": gang(),
	}
	tests := []struct {
		name    string
		plugins *configv1.Plugins
		gates   WorkloadGates
		want    bool
	}{
		{
			name:    "GenericWorkload alone does not build the placement points",
			plugins: &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled("Binder"), MultiPoint: enabled("GangScheduling", "Generate", "PScore")},
			gates:   genericGate,
		},
		{
			name:    "both gates, GangScheduling only",
			plugins: &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled("Binder"), MultiPoint: withGangOnly},
			gates:   bothGates,
		},
		{
			name:    "both gates with a PlacementGenerate plugin",
			plugins: &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled("Binder"), MultiPoint: enabled("GangScheduling", "Generate")},
			gates:   bothGates,
			want:    true,
		},
		{
			name:    "both gates with a PlacementScore plugin only",
			plugins: &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled("Binder"), MultiPoint: enabled("GangScheduling", "PScore")},
			gates:   bothGates,
			want:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), tt.plugins, WithWorkloadGates(tt.gates))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			if got := fw.HasPlacementPlugins(); got != tt.want {
				t.Errorf("HasPlacementPlugins() = %v, want %v", got, tt.want)
			}
		})
	}
}
