package testing

import (
	"context"
	"fmt"
	gotesting "testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Plugin is a multiPoint entry of a test profile; weight 0 leaves it unset.
func Plugin(name string, weight int32) configv1.Plugin {
	p := configv1.Plugin{Name: name}
	if weight != 0 {
		p.Weight = &weight
	}
	return p
}

// MultiPointProfile is a profile enabling plugins at multiPoint, in order.
func MultiPointProfile(plugins ...configv1.Plugin) *configv1.KubeSchedulerProfile {
	return &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: plugins}}}
}

// NewFramework builds profile with the real runtime from the plugins of r
// and closes the instance when the test ends. Unless an option says
// otherwise, the profile is not merged onto any default plugins, so it
// runs exactly what it names (it must still name a QueueSort and a Bind
// plugin). snapshot may be nil for plugins that never read it.
func NewFramework(tb gotesting.TB, r runtime.Registry, profile *configv1.KubeSchedulerProfile, snapshot framework.SharedLister, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	all := []runtime.Option{runtime.WithDefaultPlugins(&configv1.Plugins{})}
	if snapshot != nil {
		all = append(all, runtime.WithSnapshotSharedLister(snapshot))
	}
	all = append(all, opts...)
	fwk, err := runtime.NewFramework(context.Background(), r, profile, all...)
	if err != nil {
		tb.Fatalf("building the framework instance: %v", err)
	}
	tb.Cleanup(func() {
		if err := fwk.Close(); err != nil {
			tb.Errorf("closing the framework instance: %v", err)
		}
	})
	return fwk
}

// Result is the outcome of one scheduling cycle up to scoring.
type Result struct {
	// PreFilter is the status of the PreFilter plugins (nil on success).
	PreFilter *framework.Status
	// Filter holds the verdict of every node: nil when the node passed.
	// Nodes that PreFilter ruled out, or all nodes when PreFilter
	// rejected the pod, carry the status the scheduler records for them.
	Filter map[string]*framework.Status
	// Scores holds the total weighted score of each feasible node, after
	// normalization; nil when no node passed or no Score plugin runs.
	Scores map[string]int64
	// Message is the unschedulable message the scheduler reports when no
	// node passed, e.g. "0/3 nodes are available: 3 Insufficient cpu.".
	Message string
	// Err is an internal error of any extension point.
	Err error
}

// RunCycle runs PreFilter, Filter (over every node of snapshot), PreScore
// and Score for pod the way the scheduling loop does, and reports what
// each node got. Unlike the loop it scores even a single feasible node and
// never stops filtering early, so every node's verdict is visible.
func RunCycle(ctx context.Context, fwk framework.Framework, snapshot framework.SharedLister, pod *v1.Pod) Result {
	var res Result
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		res.Err = err
		return res
	}
	state := framework.NewCycleState()
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	fitError := func() {
		res.Message = (&framework.FitError{Pod: pod, NumAllNodes: len(nodes), Diagnosis: diagnosis}).Error()
	}
	res.Filter = make(map[string]*framework.Status, len(nodes))

	preRes, s, narrowing := fwk.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = narrowing
	res.PreFilter = s
	if !s.IsSuccess() {
		if !s.IsRejected() {
			res.Err = s.AsError()
			return res
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
		for _, ni := range nodes {
			res.Filter[ni.Node().Name] = s
		}
		fitError()
		return res
	}

	candidates := nodes
	if !preRes.AllNodes() {
		candidates = make([]*framework.NodeInfo, 0, len(preRes.NodeNames))
		for _, ni := range nodes {
			if preRes.NodeNames.Has(ni.Node().Name) {
				candidates = append(candidates, ni)
			}
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(narrowing))))
	}
	feasible, _, err := fwk.FindNodesThatPassFilters(ctx, state, pod, &diagnosis, candidates, 0, len(candidates))
	if err != nil {
		res.Err = err
		return res
	}
	for _, ni := range nodes {
		res.Filter[ni.Node().Name] = diagnosis.NodeToStatus.Get(ni.Node().Name)
	}
	for _, ni := range feasible {
		res.Filter[ni.Node().Name] = nil
	}
	if len(feasible) == 0 {
		fitError()
		return res
	}
	if !fwk.HasScorePlugins() {
		return res
	}
	if s := fwk.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
		res.Err = s.AsError()
		return res
	}
	scores, s := fwk.RunScorePlugins(ctx, state, pod, feasible)
	if !s.IsSuccess() {
		res.Err = s.AsError()
		return res
	}
	res.Scores = make(map[string]int64, len(scores))
	for _, nps := range scores {
		res.Scores[nps.Name] = nps.TotalScore
	}
	return res
}
