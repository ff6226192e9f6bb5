package testing

import (
	"context"
	"fmt"
	gotesting "testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
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
	fwk, err := BuildFramework(r, profile, snapshot, opts...)
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

// BuildFramework is NewFramework for tests of the refusal itself: it
// returns the error, and the caller closes the instance.
func BuildFramework(r runtime.Registry, profile *configv1.KubeSchedulerProfile, snapshot framework.SharedLister, opts ...runtime.Option) (framework.Framework, error) {
	// Plugins that watch the cluster (preemption, spreading) get informers
	// over an empty fake client unless an option supplies real ones.
	client := fake.NewClientset()
	all := []runtime.Option{
		runtime.WithDefaultPlugins(&configv1.Plugins{}),
		runtime.WithClientSet(client),
		runtime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)),
	}
	if snapshot != nil {
		all = append(all, runtime.WithSnapshotSharedLister(snapshot))
	}
	all = append(all, opts...)
	return runtime.NewFramework(context.Background(), r, profile, all...)
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
	feasible, err := fwk.FindNodesThatPassFilters(ctx, state, pod, &diagnosis, candidates, 0, len(candidates))
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

// Names of the QueueSort and Bind plugins every profile needs.
const (
	prioritySort  = "PrioritySort"
	defaultBinder = "DefaultBinder"
)

// PluginProfile is MultiPointProfile with PrioritySort and DefaultBinder
// added (unless listed), the QueueSort and Bind plugins the runtime
// requires, so a test profile names only the plugins under test.
func PluginProfile(plugins ...configv1.Plugin) *configv1.KubeSchedulerProfile {
	var hasSort, hasBind bool
	for _, p := range plugins {
		hasSort = hasSort || p.Name == prioritySort
		hasBind = hasBind || p.Name == defaultBinder
	}
	var all []configv1.Plugin
	if !hasSort {
		all = append(all, configv1.Plugin{Name: prioritySort})
	}
	all = append(all, plugins...)
	if !hasBind {
		all = append(all, configv1.Plugin{Name: defaultBinder})
	}
	return MultiPointProfile(all...)
}

// QueueingHint tells what the queue would decide for pod, rejected by
// pluginName, on event: QueueSkip when the plugin registered no event that
// matches, else the registered hint's verdict (Queue when it has none).
// It goes through the instance's EnqueueExtensions, so it checks the
// registration as well as the hint.
func QueueingHint(ctx context.Context, fwk framework.Framework, pluginName string, event framework.ClusterEvent, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	for _, ext := range fwk.EnqueueExtensions() {
		if ext.Name() != pluginName {
			continue
		}
		events, err := ext.EventsToRegister(ctx)
		if err != nil {
			return framework.QueueSkip, err
		}
		for _, e := range events {
			if !e.Event.Match(event) {
				continue
			}
			if e.QueueingHintFn == nil {
				return framework.Queue, nil
			}
			return e.QueueingHintFn(klog.FromContext(ctx), pod, oldObj, newObj)
		}
		return framework.QueueSkip, nil
	}
	return framework.QueueSkip, fmt.Errorf("plugin %q registers no events in this instance", pluginName)
}

// Registration is a cluster event a plugin registered, and whether it
// came with a queueing hint (without one, every such event queues).
type Registration struct {
	Event  framework.ClusterEvent
	Hinted bool
}

// Registrations returns the cluster events pluginName registered in the
// instance, in order.
func Registrations(tb gotesting.TB, fwk framework.Framework, pluginName string) []Registration {
	tb.Helper()
	var out []Registration
	for _, ext := range fwk.EnqueueExtensions() {
		if ext.Name() != pluginName {
			continue
		}
		events, err := ext.EventsToRegister(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range events {
			out = append(out, Registration{Event: e.Event, Hinted: e.QueueingHintFn != nil})
		}
	}
	return out
}

// RegisteredEvents returns the cluster events pluginName registered in the
// instance, and fails the test if one has no queueing hint. Use
// Registrations for plugins whose upstream counterpart leaves some events
// without a hint.
func RegisteredEvents(tb gotesting.TB, fwk framework.Framework, pluginName string) []framework.ClusterEvent {
	tb.Helper()
	var out []framework.ClusterEvent
	for _, r := range Registrations(tb, fwk, pluginName) {
		if !r.Hinted {
			tb.Errorf("event %s has no queueing hint", r.Event.Label())
		}
		out = append(out, r.Event)
	}
	return out
}
