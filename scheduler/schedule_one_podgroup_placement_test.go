package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// fakePlacementPlugin is upstream's: it generates the placements named in
// generate (placement name to node names, in name order, as upstream's
// orderedPlacementPlugin), scores them from score, and filters nodes by
// filter.
type fakePlacementPlugin struct {
	// name is FakePlacementPlugin unless set.
	name           string
	generate       map[string][]string
	generateStatus *framework.Status
	score          map[string]int64
	scoreStatus    map[string]*framework.Status
	filter         map[string]*framework.Status
}

func (p *fakePlacementPlugin) Name() string {
	if p.name != "" {
		return p.name
	}
	return "FakePlacementPlugin"
}

func (p *fakePlacementPlugin) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	return p.filter[ni.Node().Name]
}

func (p *fakePlacementPlugin) GeneratePlacements(_ context.Context, _ framework.PodGroupCycleState, _ *framework.PodGroupInfo, parent *framework.Placement) (*framework.GeneratePlacementsResult, *framework.Status) {
	if p.generateStatus != nil {
		return nil, p.generateStatus
	}
	res := &framework.GeneratePlacementsResult{}
	for _, name := range slices.Sorted(maps.Keys(p.generate)) {
		placement := &framework.Placement{Name: name}
		for _, ni := range parent.Nodes {
			if slices.Contains(p.generate[name], ni.Node().Name) {
				placement.Nodes = append(placement.Nodes, ni)
			}
		}
		res.Placements = append(res.Placements, placement)
	}
	return res, nil
}

func (p *fakePlacementPlugin) ScorePlacement(_ context.Context, _ framework.PlacementCycleState, _ *framework.PodGroupInfo, a *framework.PodGroupAssignments) (int64, *framework.Status) {
	return p.score[a.Name], p.scoreStatus[a.Name]
}

func (*fakePlacementPlugin) PlacementScoreExtensions() framework.PlacementScoreExtensions { return nil }

// fakePlacementFeasible is upstream's fakePlacementFeasiblePlugin: the
// codes it answers, per placement tried and per pod evaluated in it. It
// must be named GangScheduling, the one PlacementFeasible plugin.
type fakePlacementFeasible struct {
	codes [][]framework.Code
	tried int
}

func (*fakePlacementFeasible) Name() string { return "GangScheduling" }

func (f *fakePlacementFeasible) PlacementFeasible(_ context.Context, _ framework.PlacementCycleState, pgi *framework.PodGroupInfo, progress framework.PlacementProgress) *framework.Status {
	if len(f.codes) == 0 {
		return nil
	}
	evaluated := len(pgi.GetUnscheduledPods()) - progress.Remaining
	if evaluated == 0 {
		f.tried++
	}
	i := f.tried - 1
	if i >= len(f.codes) || evaluated >= len(f.codes[i]) || f.codes[i][evaluated] == framework.Success {
		return nil
	}
	return framework.NewStatus(f.codes[i][evaluated], "injected placementFeasible status")
}

// placementResult is what a test checks of the group's algorithm.
type placementResult struct {
	Code    framework.Code
	Message string
	// Plugin is the plugin the status names.
	Plugin string
	// Hosts are the pods' suggested hosts, "" for a pod not placed.
	Hosts []string
}

// TestPodGroupSchedulingPlacementAlgorithm ports upstream's cases of the
// same name for a leaf PodGroup of one pod on two nodes.
func TestPodGroupSchedulingPlacementAlgorithm(t *testing.T) {
	twoPlacements := map[string][]string{"placement1": {"node1"}, "placement2": {"node2"}}
	tests := map[string]struct {
		placement fakePlacementPlugin
		feasible  [][]framework.Code
		want      placementResult
	}{
		"respects higher score of placement1": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 2, "placement2": 1}},
			want:      placementResult{Hosts: []string{"node1"}},
		},
		"respects higher score of placement2": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1, "placement2": 2}},
			want:      placementResult{Hosts: []string{"node2"}},
		},
		"when no placements are generated, returns unschedulable": {
			placement: fakePlacementPlugin{generate: map[string][]string{}},
			want:      placementResult{Code: framework.Unschedulable, Message: "no feasible placements found", Plugin: "FakePlacementPlugin"},
		},
		"when all placements are infeasible, returns unschedulable": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1, "placement2": 2},
				filter: map[string]*framework.Status{"node1": framework.NewStatus(framework.Unschedulable), "node2": framework.NewStatus(framework.Unschedulable)}},
			feasible: [][]framework.Code{{framework.Wait, framework.Unschedulable}, {framework.Wait, framework.Unschedulable}},
			want: placementResult{Code: framework.Unschedulable, Hosts: []string{""},
				Message: "pod group is unschedulable, 0/2 placements are available, first placement status: injected placementFeasible status"},
		},
		"when all placements are infeasible, but pods are feasible, returns unschedulable": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1, "placement2": 2}},
			feasible:  [][]framework.Code{{framework.Wait, framework.Unschedulable}, {framework.Wait, framework.Unschedulable}},
			want: placementResult{Code: framework.Unschedulable, Hosts: []string{"node1"},
				Message: "pod group is unschedulable, 0/2 placements are available, first placement status: injected placementFeasible status"},
		},
		"filters out infeasible placements": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1},
				filter: map[string]*framework.Status{"node2": framework.NewStatus(framework.Unschedulable)}},
			feasible: [][]framework.Code{{framework.Wait, framework.Success}, {framework.Wait, framework.Unschedulable}},
			want:     placementResult{Hosts: []string{"node1"}},
		},
		"filters out infeasible placements with feasible pods": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1, "placement2": 2}},
			feasible:  [][]framework.Code{{framework.Wait, framework.Success}, {framework.Wait, framework.Unschedulable}},
			want:      placementResult{Hosts: []string{"node1"}},
		},
		"when generate plugin fails, returns error": {
			placement: fakePlacementPlugin{generateStatus: framework.NewStatus(framework.Error, "error for test")},
			want:      placementResult{Code: framework.Error, Message: "error for test", Plugin: "FakePlacementPlugin"},
		},
		"when score plugin fails, returns error": {
			placement: fakePlacementPlugin{generate: twoPlacements, score: map[string]int64{"placement1": 1},
				scoreStatus: map[string]*framework.Status{"placement2": framework.NewStatus(framework.Error, "error for test")}},
			// Upstream's test expects the plugin named, but compares Errors by
			// message only: its runtime names none.
			want: placementResult{Code: framework.Error, Message: `running PlacementScore plugins: plugin "FakePlacementPlugin" failed with: error for test`},
		},
		"when a placement evaluation errors, returns error": {
			placement: fakePlacementPlugin{generate: map[string][]string{"placement1": {"node1"}}, score: map[string]int64{"placement1": 1},
				filter: map[string]*framework.Status{"node1": framework.NewStatus(framework.Error, "error for test")}},
			want: placementResult{Code: framework.Error, Hosts: []string{""},
				Message: `failed to schedule other pod from a pod group: running "FakePlacementPlugin" filter plugin: error for test`},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pg := st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name("pg").Obj()
			pod := st.MakePod().Namespace(metav1.NamespaceDefault).Name("foo").UID("foo").SchedulerName(testProfile).PodGroupName("pg").Obj()
			s, fwk := newPlacementScheduler(t, []string{"node1", "node2"}, pg, nil, &tt.placement, &fakePlacementFeasible{codes: tt.feasible})
			pi, err := framework.NewPodInfo(pod)
			if err != nil {
				t.Fatal(err)
			}
			pgInfo := &framework.QueuedPodGroupInfo{
				PodGroupInfo:   &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: framework.PodGroupKeyType, PodGroup: pg, UnscheduledPods: []*v1.Pod{pod}},
				QueuedPodInfos: map[framework.EntityKey][]*framework.QueuedPodInfo{framework.PodGroupKey(pg.Namespace, pg.Name): {{PodInfo: pi}}},
			}
			_, ctx := ktesting.NewTestContext(t)
			res := s.runRootSchedulingAlgorithm(ctx, fwk, framework.NewCycleState(), pgInfo)[pgKey(pgInfo.PodGroupInfo)]
			got := placementResult{Code: res.status.Code(), Message: res.status.Message(), Plugin: res.status.Plugin()}
			for _, pr := range res.podResults {
				got.Hosts = append(got.Hosts, pr.scheduleResult.SuggestedHost)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if n := s.cache.AssumedPodCount(); n != 0 {
				t.Errorf("%d pods stayed assumed in the cache", n)
			}
		})
	}
}

// newPlacementScheduler returns a scheduler, not started, with both
// workload gates on, whose cache holds nodes and pg, its snapshot updated,
// and a workload-aware instance of plugins that places groups by placement.
func newPlacementScheduler(t *testing.T, nodes []string, pg *schedulingv1beta1.PodGroup, weights map[string]int32, plugins ...framework.Plugin) (*Scheduler, framework.Framework) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	r := runtime.Registry{}
	enabled := []configv1.Plugin{{Name: queuesort.Name}, {Name: defaultbinder.Name}}
	for name, f := range map[string]runtime.Factory{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New} {
		if err := r.Register(name, f, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pl := range plugins {
		if err := r.Register(pl.Name(), func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
			return pl, nil
		}, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
		c := configv1.Plugin{Name: pl.Name()}
		if w, ok := weights[pl.Name()]; ok {
			c.Weight = ptr.To(w)
		}
		enabled = append(enabled, c)
	}
	profile := st.MultiPointProfile(enabled...)
	profile.SchedulerName = ptr.To(testProfile)
	s, err := New(ctx, fake.NewClientset(), r, WithDefaultPlugins(&configv1.Plugins{}), WithWorkloadGates(true, true))
	if err != nil {
		t.Fatal(err)
	}
	fwk, err := runtime.NewFramework(ctx, r, profile, append(s.FrameworkOptions(testProfile),
		runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}))...)
	if err != nil {
		t.Fatal(err)
	}
	if !fwk.WorkloadAware() || !fwk.HasPlacementPlugins() {
		t.Fatalf("the instance is not workload-aware with placements: %+v", fwk.ListPlugins())
	}
	for _, n := range nodes {
		s.cache.AddNode(logger, st.MakeNode().Name(n).Obj())
	}
	s.cache.AddPodGroup(pg)
	if err := s.cache.UpdateSnapshot(logger, s.picker.snapshot); err != nil {
		t.Fatal(err)
	}
	return s, fwk
}

// TestPodGroupSchedulingPlacementAlgorithm_Scoring ports upstream's: the
// placement with the higher weighted sum of the PlacementScore plugins'
// scores is chosen.
func TestPodGroupSchedulingPlacementAlgorithm_Scoring(t *testing.T) {
	placements := map[string][]string{"placement1": {"node1"}, "placement2": {"node2"}}
	type pluginData struct {
		weight int32
		score  map[string]int64
	}
	tests := map[string]struct {
		plugins []pluginData
		want    string
	}{
		"respects higher score of placement1": {
			plugins: []pluginData{
				{weight: 1, score: map[string]int64{"placement1": 50, "placement2": 75}},
				{weight: 2, score: map[string]int64{"placement1": 25, "placement2": 10}},
			},
			want: "node1",
		},
		"respects higher score of placement2": {
			plugins: []pluginData{
				{weight: 1, score: map[string]int64{"placement1": 75, "placement2": 50}},
				{weight: 2, score: map[string]int64{"placement1": 10, "placement2": 25}},
			},
			want: "node2",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pg := st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name("pg").Obj()
			pod := st.MakePod().Namespace(metav1.NamespaceDefault).Name("foo").UID("foo").SchedulerName(testProfile).PodGroupName("pg").Obj()
			plugins := []framework.Plugin{&fakePlacementPlugin{name: "FakeGeneratorPlugin", generate: placements}, &fakePlacementFeasible{}}
			weights := map[string]int32{}
			for i, d := range tt.plugins {
				name := fmt.Sprintf("FakeScorePlugin%d", i)
				plugins = append(plugins, &fakePlacementScorer{name: name, score: d.score})
				weights[name] = d.weight
			}
			s, fwk := newPlacementScheduler(t, []string{"node1", "node2"}, pg, weights, plugins...)
			pi, err := framework.NewPodInfo(pod)
			if err != nil {
				t.Fatal(err)
			}
			pgInfo := &framework.QueuedPodGroupInfo{
				PodGroupInfo:   &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: framework.PodGroupKeyType, PodGroup: pg, UnscheduledPods: []*v1.Pod{pod}},
				QueuedPodInfos: map[framework.EntityKey][]*framework.QueuedPodInfo{framework.PodGroupKey(pg.Namespace, pg.Name): {{PodInfo: pi}}},
			}
			_, ctx := ktesting.NewTestContext(t)
			res := s.runRootSchedulingAlgorithm(ctx, fwk, framework.NewCycleState(), pgInfo)[pgKey(pgInfo.PodGroupInfo)]
			if !res.status.IsSuccess() || len(res.podResults) != 1 {
				t.Fatalf("the algorithm = %v with %d results, want Success with 1", res.status, len(res.podResults))
			}
			if got := res.podResults[0].scheduleResult.SuggestedHost; got != tt.want {
				t.Errorf("the pod went to %s, want %s", got, tt.want)
			}
		})
	}
}

// fakePlacementScorer is a PlacementScore plugin scoring placements from score.
type fakePlacementScorer struct {
	name  string
	score map[string]int64
}

func (p *fakePlacementScorer) Name() string { return p.name }

func (p *fakePlacementScorer) ScorePlacement(_ context.Context, _ framework.PlacementCycleState, _ *framework.PodGroupInfo, a *framework.PodGroupAssignments) (int64, *framework.Status) {
	return p.score[a.Name], nil
}

func (*fakePlacementScorer) PlacementScoreExtensions() framework.PlacementScoreExtensions { return nil }
