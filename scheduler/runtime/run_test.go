package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

func TestRunPreFilterPlugins(t *testing.T) {
	tests := []struct {
		name        string
		plugins     []*filterPlugin
		wantResult  *framework.PreFilterResult
		wantStatus  *framework.Status
		wantSkip    []string
		wantNarrows []string
	}{
		{
			name:     "all succeed, all nodes",
			plugins:  []*filterPlugin{{name: "A"}, {name: "B"}},
			wantSkip: []string{},
		},
		{
			name: "results are intersected",
			plugins: []*filterPlugin{
				{name: "A", preResult: &framework.PreFilterResult{NodeNames: sets.New("n1", "n2")}},
				{name: "B", preResult: &framework.PreFilterResult{NodeNames: sets.New("n2", "n3")}},
			},
			wantResult:  &framework.PreFilterResult{NodeNames: sets.New("n2")},
			wantSkip:    []string{},
			wantNarrows: []string{"A", "B"},
		},
		{
			name: "empty intersection rejects the pod",
			plugins: []*filterPlugin{
				{name: "A", preResult: &framework.PreFilterResult{NodeNames: sets.New("n1")}},
				{name: "B", preResult: &framework.PreFilterResult{NodeNames: sets.New("n3")}},
			},
			wantResult:  &framework.PreFilterResult{NodeNames: sets.New[string]()},
			wantStatus:  framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [A B] simultaneously"),
			wantSkip:    []string{},
			wantNarrows: []string{"A", "B"},
		},
		{
			name: "unresolvable stops at once",
			plugins: []*filterPlugin{
				{name: "A", preStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "no")},
				{name: "B", preStatus: framework.NewStatus(framework.Skip)},
			},
			wantStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "no").WithPlugin("A"),
			wantSkip:   []string{},
		},
		{
			name: "unschedulable is kept while the rest still run",
			plugins: []*filterPlugin{
				{name: "A", preStatus: framework.NewStatus(framework.Unschedulable, "no")},
				{name: "B", preStatus: framework.NewStatus(framework.Skip)},
			},
			wantStatus:  framework.NewStatus(framework.Unschedulable, "no").WithPlugin("A"),
			wantSkip:    []string{"B"},
			wantNarrows: []string{},
		},
		{
			name: "error is wrapped with the plugin name",
			plugins: []*filterPlugin{
				{name: "A", preStatus: framework.AsStatus(errors.New("boom"))},
			},
			wantStatus: framework.AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", "A", errors.New("boom"))).WithPlugin("A"),
			wantSkip:   []string{},
		},
		{
			name: "skip is recorded and its result ignored",
			plugins: []*filterPlugin{
				{name: "A", preStatus: framework.NewStatus(framework.Skip), preResult: &framework.PreFilterResult{NodeNames: sets.New[string]()}},
			},
			wantSkip: []string{"A"},
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
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{PreFilter: enabled(names...)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			state := framework.NewCycleState()
			result, status, narrows := fw.RunPreFilterPlugins(t.Context(), state, makePod("p"))
			if diff := cmp.Diff(tt.wantResult, result); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStatus, status, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSkip, sets.List(state.GetSkipFilterPlugins())); diff != "" {
				t.Errorf("skip (-want +got):\n%s", diff)
			}
			var gotNarrows []string
			if narrows != nil {
				gotNarrows = sets.List(narrows)
			}
			if tt.wantNarrows == nil && len(gotNarrows) == 0 {
				gotNarrows = nil
			}
			if diff := cmp.Diff(tt.wantNarrows, gotNarrows); diff != "" && (len(tt.wantNarrows) != 0 || len(gotNarrows) != 0) {
				t.Errorf("narrowing plugins (-want +got):\n%s", diff)
			}
		})
	}
}

// errEqual compares statuses by code, message and plugin: wrapped errors are
// compared by text since they are rebuilt by the runtime.
func errEqual(a, b *framework.Status) bool {
	return a.Code() == b.Code() && a.Message() == b.Message() && a.Plugin() == b.Plugin()
}

func TestRunFilterPlugins(t *testing.T) {
	unsched := framework.NewStatus(framework.Unschedulable, "A says no")
	tests := []struct {
		name       string
		plugins    []*filterPlugin
		preSkip    bool
		wantStatus *framework.Status
	}{
		{name: "all pass", plugins: []*filterPlugin{{name: "A"}, {name: "B"}}},
		{
			name: "first failure wins",
			plugins: []*filterPlugin{
				{name: "A", reject: map[string]*framework.Status{"n": unsched}},
				{name: "B", reject: map[string]*framework.Status{"n": framework.NewStatus(framework.UnschedulableAndUnresolvable, "B says no")}},
			},
			wantStatus: framework.NewStatus(framework.Unschedulable, "A says no").WithPlugin("A"),
		},
		{
			name:       "a non-rejection code becomes an error",
			plugins:    []*filterPlugin{{name: "A", reject: map[string]*framework.Status{"n": framework.NewStatus(framework.Wait, "huh")}}},
			wantStatus: framework.AsStatus(errors.New(`running "A" filter plugin: unexpected status Wait`)).WithPlugin("A"),
		},
		{
			name:    "Skip at PreFilter skips the paired Filter",
			plugins: []*filterPlugin{{name: "A", preStatus: framework.NewStatus(framework.Skip), reject: map[string]*framework.Status{"n": unsched}}},
			preSkip: true,
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
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: enabled(names...)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			state := framework.NewCycleState()
			if _, s, _ := fw.RunPreFilterPlugins(t.Context(), state, makePod("p")); !s.IsSuccess() {
				t.Fatal(s)
			}
			got := fw.RunFilterPlugins(t.Context(), state, makePod("p"), makeNode("n"))
			if diff := cmp.Diff(tt.wantStatus, got, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// nominator is a PodNominator with a fixed answer.
type nominator struct {
	pods map[string][]*framework.PodInfo
}

func (n *nominator) AddNominatedPod(klog.Logger, *framework.PodInfo, *framework.NominatingInfo) {}
func (n *nominator) DeleteNominatedPodIfExists(*v1.Pod)                                         {}
func (n *nominator) UpdateNominatedPod(klog.Logger, *v1.Pod, *framework.PodInfo)                {}
func (n *nominator) NominatedPodsForNode(name string) []*framework.PodInfo                      { return n.pods[name] }

// podCountFilter rejects nodes that already hold max pods.
type podCountFilter struct{ max int }

func (p *podCountFilter) Name() string { return "PodCount" }
func (p *podCountFilter) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if len(ni.Pods) >= p.max {
		return framework.NewStatus(framework.Unschedulable, "too many pods")
	}
	return nil
}

func TestFindNodesThatPassFilters(t *testing.T) {
	nodes := makeNodes(10)
	reject := map[string]*framework.Status{}
	for _, i := range []int{1, 3, 5} {
		reject[nodes[i].Node().Name] = framework.NewStatus(framework.Unschedulable, "odd")
	}
	highPrio := int32(10)
	nominated, _ := framework.NewPodInfo(makePod("nominated"))
	nominated.Pod.Spec.Priority = &highPrio

	tests := []struct {
		name           string
		numNodesToFind int
		start          int
		nominator      *nominator
		wantFeasible   int
		wantRejected   []string
	}{
		{name: "all nodes", numNodesToFind: 10, wantFeasible: 7, wantRejected: []string{"node-1", "node-3", "node-5"}},
		{name: "wraps around from start", numNodesToFind: 10, start: 7, wantFeasible: 7, wantRejected: []string{"node-1", "node-3", "node-5"}},
		{
			name: "nominated pods of higher priority count", numNodesToFind: 10,
			nominator:    &nominator{pods: map[string][]*framework.PodInfo{"node-0": {nominated}}},
			wantFeasible: 6, wantRejected: []string{"node-0", "node-1", "node-3", "node-5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{"A": &filterPlugin{name: "A", reject: reject}, "PodCount": &podCountFilter{max: 1}}
			opts := []Option{WithParallelism(4)}
			if tt.nominator != nil {
				opts = append(opts, WithPodNominator(tt.nominator))
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Filter: enabled("A", "PodCount")}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			diag := &framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
			feasible, err := fw.FindNodesThatPassFilters(t.Context(), framework.NewCycleState(), makePod("p"), diag, nodes, tt.start, tt.numNodesToFind)
			if err != nil {
				t.Fatal(err)
			}
			var rejected []string
			diag.NodeToStatus.ForEachExplicitNode(func(n string, _ *framework.Status) { rejected = append(rejected, n) })
			got := struct {
				Feasible int
				Rejected []string
			}{len(feasible), sets.List(sets.New(rejected...))}
			want := got
			want.Feasible, want.Rejected = tt.wantFeasible, tt.wantRejected
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("stops once enough nodes are found", func(t *testing.T) {
		// From node-8, node-8, node-9 and node-0 are the three wanted; the
		// next feasible one, node-1, ends the search (as upstream's does),
		// so node-2 is never filtered. A search that went on would record
		// its rejection.
		late := map[string]*framework.Status{"node-2": framework.NewStatus(framework.Unschedulable, "late")}
		fw, err := newTestFramework(t.Context(), baseRegistry(map[string]framework.Plugin{"A": &filterPlugin{name: "A", reject: late}}), &configv1.Plugins{Filter: enabled("A")}, WithParallelism(1))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fw.Close() }()
		diag := &framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
		feasible, err := fw.FindNodesThatPassFilters(t.Context(), framework.NewCycleState(), makePod("p"), diag, nodes, 8, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range feasible {
			got = append(got, n.Node().Name)
		}
		if diff := cmp.Diff([]string{"node-8", "node-9", "node-0"}, got); diff != "" {
			t.Errorf("feasible (-want +got):\n%s", diff)
		}
		if n := diag.NodeToStatus.Len(); n != 0 {
			t.Errorf("%d nodes rejected, want none: the search went on past the third feasible node", n)
		}
	})
}

func TestRunPostFilterPlugins(t *testing.T) {
	nominate := &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatedNodeName: "n", NominatingMode: framework.ModeOverride}}
	type pf struct {
		name   string
		result *framework.PostFilterResult
		status *framework.Status
	}
	tests := []struct {
		name       string
		plugins    []pf
		wantResult *framework.PostFilterResult
		wantStatus *framework.Status
		wantCalls  []string
	}{
		{
			name:       "stops at the first success",
			plugins:    []pf{{"A", nil, framework.NewStatus(framework.Unschedulable, "a")}, {"B", nominate, nil}, {"C", nil, nil}},
			wantResult: nominate,
			wantCalls:  []string{"A", "B"},
		},
		{
			name:       "all unschedulable: reasons joined, first plugin named",
			plugins:    []pf{{"A", nil, framework.NewStatus(framework.Unschedulable, "a")}, {"B", nil, framework.NewStatus(framework.Unschedulable, "b")}},
			wantStatus: framework.NewStatus(framework.Unschedulable, "a", "b").WithPlugin("A"),
			wantCalls:  []string{"A", "B"},
		},
		{
			name:       "unresolvable stops",
			plugins:    []pf{{"A", nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "a")}, {"B", nil, nil}},
			wantStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "a").WithPlugin("A"),
			wantCalls:  []string{"A"},
		},
		{
			name:       "error stops",
			plugins:    []pf{{"A", nil, framework.AsStatus(errors.New("boom"))}, {"B", nil, nil}},
			wantStatus: framework.AsStatus(errors.New("boom")).WithPlugin("A"),
			wantCalls:  []string{"A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			extra := map[string]framework.Plugin{}
			var names []string
			for _, p := range tt.plugins {
				extra[p.name] = &postFilterPlugin{name: p.name, result: p.result, status: p.status, calls: &calls}
				names = append(names, p.name)
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{PostFilter: enabled(names...)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			result, status := fw.RunPostFilterPlugins(t.Context(), framework.NewCycleState(), makePod("p"), framework.NewDefaultNodeToStatus())
			if diff := cmp.Diff(tt.wantResult, result); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStatus, status, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunScorePlugins(t *testing.T) {
	nodes := makeNodes(2)
	tests := []struct {
		name       string
		plugins    []*scorePlugin
		weights    []int32
		want       []framework.NodePluginScores
		wantStatus string
	}{
		{
			name: "normalize then weight",
			plugins: []*scorePlugin{
				{name: "A", scores: map[string]int64{"node-0": 1, "node-1": 5}, normalizeFactor: 10},
				{name: "B", scores: map[string]int64{"node-0": 100, "node-1": 0}},
			},
			weights: []int32{2, 3},
			want: []framework.NodePluginScores{
				{Name: "node-0", RawScores: []framework.PluginScore{{Name: "A", Score: 1}, {Name: "B", Score: 100}}, Scores: []framework.PluginScore{{Name: "A", Score: 20}, {Name: "B", Score: 300}}, TotalScore: 320},
				{Name: "node-1", RawScores: []framework.PluginScore{{Name: "A", Score: 5}, {Name: "B", Score: 0}}, Scores: []framework.PluginScore{{Name: "A", Score: 100}, {Name: "B", Score: 0}}, TotalScore: 100},
			},
		},
		{
			name:       "out of range after normalize",
			plugins:    []*scorePlugin{{name: "A", scores: map[string]int64{"node-0": 11}, normalizeFactor: 10}},
			weights:    []int32{1},
			wantStatus: `applying score defaultWeights on Score plugins: plugin "A" returns an invalid score 110, it should in the range of [0, 100] after normalizing`,
		},
		{
			name:       "score error",
			plugins:    []*scorePlugin{{name: "A", status: framework.AsStatus(errors.New("boom"))}},
			weights:    []int32{1},
			wantStatus: `running Score plugins: plugin "A" failed with: boom`,
		},
		{
			name: "skip at PreScore skips Score",
			plugins: []*scorePlugin{
				{name: "A", preScoreStatus: framework.NewStatus(framework.Skip), status: framework.AsStatus(errors.New("must not run"))},
				{name: "B", scores: map[string]int64{"node-0": 7, "node-1": 8}},
			},
			weights: []int32{1, 1},
			want: []framework.NodePluginScores{
				{Name: "node-0", RawScores: []framework.PluginScore{{Name: "B", Score: 7}}, Scores: []framework.PluginScore{{Name: "B", Score: 7}}, TotalScore: 7},
				{Name: "node-1", RawScores: []framework.PluginScore{{Name: "B", Score: 8}}, Scores: []framework.PluginScore{{Name: "B", Score: 8}}, TotalScore: 8},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]framework.Plugin{}
			var ps configv1.PluginSet
			for i, p := range tt.plugins {
				extra[p.name] = p
				ps.Enabled = append(ps.Enabled, weighted(p.name, tt.weights[i]))
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: ps})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			// Raw scores are filled only when the cycle keeps them for
			// opportunistic batching.
			for _, keep := range []bool{true, false} {
				state := framework.NewCycleState()
				state.SetKeepRawScores(keep)
				if s := fw.RunPreScorePlugins(t.Context(), state, makePod("p"), nodes); !s.IsSuccess() {
					t.Fatal(s)
				}
				got, status := fw.RunScorePlugins(t.Context(), state, makePod("p"), nodes)
				if diff := cmp.Diff(tt.wantStatus, status.Message()); diff != "" {
					t.Errorf("keep=%t: status (-want +got):\n%s", keep, diff)
				}
				want := tt.want
				if !keep && want != nil {
					want = slices.Clone(want)
					for i := range want {
						want[i].RawScores = nil
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("keep=%t: scores (-want +got):\n%s", keep, diff)
				}
			}
		})
	}
}

// TestRawScoreAndNormalize checks the two halves of RunScorePlugins that
// opportunistic batching uses to re-score one node among kept ones: the
// raw scores of a node, and normalizing kept raw scores anew.
func TestRawScoreAndNormalize(t *testing.T) {
	nodes := makeNodes(3)
	a := &scorePlugin{name: "A", scores: map[string]int64{"node-0": 1, "node-1": 5, "node-2": 10}, normalizeFactor: 10}
	b := &scorePlugin{name: "B", scores: map[string]int64{"node-0": 100, "node-1": 0, "node-2": 50}}
	fw, err := newTestFramework(t.Context(), baseRegistry(map[string]framework.Plugin{"A": a, "B": b}),
		&configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("A", 2), weighted("B", 3)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	f := fw
	state := framework.NewCycleState()
	state.SetKeepRawScores(true)
	pod := makePod("p")
	if s := f.RunPreScorePlugins(t.Context(), state, pod, nodes); !s.IsSuccess() {
		t.Fatal(s)
	}
	all, status := f.RunScorePlugins(t.Context(), state, pod, nodes)
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	raw, status := f.RunRawScorePlugins(t.Context(), state, pod, nodes[2])
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff(all[2].RawScores, raw); diff != "" {
		t.Errorf("raw scores of node-2 (-RunScorePlugins +RunRawScorePlugins):\n%s", diff)
	}
	// Kept entries of node-0 and node-1 plus node-2 re-scored: the same
	// totals as scoring the three at once.
	kept := []framework.NodePluginScores{
		{Name: "node-0", RawScores: all[0].RawScores},
		{Name: "node-1", RawScores: all[1].RawScores},
		{Name: "node-2", RawScores: raw},
	}
	if status := f.NormalizeScores(t.Context(), state, pod, kept); !status.IsSuccess() {
		t.Fatal(status)
	}
	if diff := cmp.Diff(all, kept); diff != "" {
		t.Errorf("normalized again (-RunScorePlugins +NormalizeScores):\n%s", diff)
	}
}

// TestRawScoreMetrics: re-scoring one node reports each Score plugin's
// duration on cycles sampled for plugin metrics, as RunScorePlugins.
func TestRawScoreMetrics(t *testing.T) {
	for _, record := range []bool{false, true} {
		t.Run(fmt.Sprintf("record=%t", record), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			a := &scorePlugin{name: "A", scores: map[string]int64{"node-0": 1}}
			fw, err := newTestFramework(t.Context(), baseRegistry(map[string]framework.Plugin{"A": a}),
				&configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{weighted("A", 1)}}}, WithMetrics(m))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			state := framework.NewCycleState()
			state.SetRecordPluginMetrics(record)
			if _, status := fw.RunRawScorePlugins(t.Context(), state, makePod("p"), makeNodes(1)[0]); !status.IsSuccess() {
				t.Fatal(status)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got uint64
			for _, mf := range families {
				if mf.GetName() != "scheduler_plugin_execution_duration_seconds" {
					continue
				}
				for _, m := range mf.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["extension_point"] == Score && labels["plugin"] == "A" && labels["status"] == "Success" {
						got += m.GetHistogram().GetSampleCount()
					}
				}
			}
			var want uint64
			if record {
				want = 1
			}
			if got != want {
				t.Errorf("Score samples of A = %d, want %d", got, want)
			}
		})
	}
}

func TestReserveUnreserve(t *testing.T) {
	tests := []struct {
		name       string
		failAt     string
		wantStatus *framework.Status
		wantCalls  []string
	}{
		{name: "all reserve", wantCalls: []string{"Reserve/A", "Reserve/B", "Reserve/C"}},
		{
			name: "failure stops and unreserve runs in reverse", failAt: "B",
			wantStatus: framework.NewStatus(framework.Unschedulable, "no").WithPlugin("B"),
			wantCalls:  []string{"Reserve/A", "Reserve/B", "Unreserve/C", "Unreserve/B", "Unreserve/A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			extra := map[string]framework.Plugin{}
			for _, n := range []string{"A", "B", "C"} {
				p := &reservePlugin{name: n, calls: &calls}
				if n == tt.failAt {
					p.status = framework.NewStatus(framework.Unschedulable, "no")
				}
				extra[n] = p
			}
			fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Reserve: enabled("A", "B", "C")})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			state := framework.NewCycleState()
			status := fw.RunReservePluginsReserve(t.Context(), state, makePod("p"), "n")
			if !status.IsSuccess() {
				fw.RunReservePluginsUnreserve(t.Context(), state, makePod("p"), "n")
			}
			if diff := cmp.Diff(tt.wantStatus, status, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunBindPlugins(t *testing.T) {
	skip := framework.NewStatus(framework.Skip)
	tests := []struct {
		name       string
		statuses   []*framework.Status
		wantStatus *framework.Status
		wantCalls  []string
	}{
		{name: "first non-skip binds", statuses: []*framework.Status{skip, nil, nil}, wantCalls: []string{"B0", "B1"}},
		{name: "all skip", statuses: []*framework.Status{skip, skip, skip}, wantStatus: skip, wantCalls: []string{"B0", "B1", "B2"}},
		{
			name: "error stops", statuses: []*framework.Status{framework.AsStatus(errors.New("boom")), nil, nil},
			wantStatus: framework.AsStatus(errors.New(`running Bind plugin "B0": boom`)), wantCalls: []string{"B0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			r := Registry{}
			must(r.Register("Sort", fixed(&queueSortPlugin{name: "Sort"}), ArgsSpec{}))
			var names []string
			for i, s := range tt.statuses {
				n := fmt.Sprintf("B%d", i)
				must(r.Register(n, fixed(&bindPlugin{name: n, status: s, calls: &calls}), ArgsSpec{}))
				names = append(names, n)
			}
			fw, err := NewFramework(t.Context(), r, &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{QueueSort: enabled("Sort"), Bind: enabled(names...)}},
				WithDefaultPlugins(&configv1.Plugins{}))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			status := fw.RunBindPlugins(t.Context(), framework.NewCycleState(), makePod("p"), "n")
			if diff := cmp.Diff(tt.wantStatus, status, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

type preBindPlugin struct {
	name      string
	preflight *framework.Status
	calls     *[]string
}

func (p *preBindPlugin) Name() string { return p.name }
func (p *preBindPlugin) PreBindPreFlight(context.Context, *framework.CycleState, *v1.Pod, string) (*framework.PreBindPreFlightResult, *framework.Status) {
	return nil, p.preflight
}
func (p *preBindPlugin) PreBind(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	*p.calls = append(*p.calls, p.name)
	return nil
}

func TestPreBindPreFlightSkips(t *testing.T) {
	var calls []string
	extra := map[string]framework.Plugin{
		"A": &preBindPlugin{name: "A", preflight: framework.NewStatus(framework.Skip), calls: &calls},
		"B": &preBindPlugin{name: "B", calls: &calls},
	}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{PreBind: enabled("A", "B")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	state := framework.NewCycleState()
	if s := fw.RunPreBindPreFlights(t.Context(), state, makePod("p"), "n"); !s.IsSuccess() {
		t.Fatalf("preflight = %v, want success", s)
	}
	if s := fw.RunPreBindPlugins(t.Context(), state, makePod("p"), "n"); !s.IsSuccess() {
		t.Fatal(s)
	}
	if diff := cmp.Diff([]string{"B"}, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestEnqueueExtensions(t *testing.T) {
	extra := map[string]framework.Plugin{"F1": &filterPlugin{name: "F1"}, "S1": &scorePlugin{name: "S1"}}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: enabled("F1", "S1")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	var got []string
	for _, e := range fw.EnqueueExtensions() {
		events, _ := e.EventsToRegister(t.Context())
		got = append(got, fmt.Sprintf("%s:%d", e.Name(), len(events)))
	}
	// F1 can reject pods and registers nothing, so it gets every event;
	// S1 only scores and is not listed.
	want := []string{fmt.Sprintf("F1:%d", len(framework.UnrollWildCardResource()))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	p := func(v int32) *int32 { return &v }
	tests := []struct {
		name            string
		profile, global *int32
		nodes, want     int32
	}{
		{name: "below 100 nodes: all", nodes: 99, want: 99},
		{name: "adaptive for 5000 nodes", nodes: 5000, want: 500},
		{name: "adaptive floor 5%", nodes: 100000, want: 5000},
		{name: "profile wins", profile: p(30), global: p(70), nodes: 1000, want: 300},
		{name: "global when profile unset", global: p(70), nodes: 1000, want: 700},
		{name: "never fewer than 100", profile: p(1), nodes: 1000, want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NumFeasibleNodesToFind(tt.profile, tt.global, tt.nodes); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
