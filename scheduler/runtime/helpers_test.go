package runtime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Plugins used by the tests. Each implements a chosen set of extension
// points; their behaviour is configured per test through fields so that
// every runtime rule is exercised through a real instance.

type queueSortPlugin struct{ name string }

func (p *queueSortPlugin) Name() string { return p.name }
func (p *queueSortPlugin) Less(a, b *framework.QueuedPodInfo) bool {
	return a.Timestamp.Before(b.Timestamp)
}

type bindPlugin struct {
	name   string
	status *framework.Status
	calls  *[]string
}

func (p *bindPlugin) Name() string { return p.name }
func (p *bindPlugin) Bind(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	if p.calls != nil {
		*p.calls = append(*p.calls, p.name)
	}
	return p.status
}

// filterPlugin rejects nodes listed in reject; PreFilter behaviour is
// configured separately.
type filterPlugin struct {
	name      string
	reject    map[string]*framework.Status
	preResult *framework.PreFilterResult
	preStatus *framework.Status
}

func (p *filterPlugin) Name() string { return p.name }
func (p *filterPlugin) PreFilter(context.Context, *framework.CycleState, *v1.Pod, []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	return p.preResult, p.preStatus
}
func (p *filterPlugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }
func (p *filterPlugin) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if s, ok := p.reject[ni.Node().Name]; ok {
		return s.Clone()
	}
	return nil
}

// filterOnly implements Filter and nothing else.
type filterOnly struct{ name string }

func (p *filterOnly) Name() string { return p.name }
func (p *filterOnly) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

// scorePlugin scores a node by a fixed table, optionally normalizing by
// multiplying with normalizeFactor.
type scorePlugin struct {
	name            string
	scores          map[string]int64
	status          *framework.Status
	normalizeFactor int64
	preScoreStatus  *framework.Status
}

func (p *scorePlugin) Name() string { return p.name }
func (p *scorePlugin) PreScore(context.Context, *framework.CycleState, *v1.Pod, []*framework.NodeInfo) *framework.Status {
	return p.preScoreStatus
}
func (p *scorePlugin) Score(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.scores[ni.Node().Name], p.status
}
func (p *scorePlugin) ScoreExtensions() framework.ScoreExtensions {
	if p.normalizeFactor == 0 {
		return nil
	}
	return p
}
func (p *scorePlugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	for i := range scores {
		scores[i].Score *= p.normalizeFactor
	}
	return nil
}

type postFilterPlugin struct {
	name   string
	result *framework.PostFilterResult
	status *framework.Status
	calls  *[]string
}

func (p *postFilterPlugin) Name() string { return p.name }
func (p *postFilterPlugin) PostFilter(context.Context, *framework.CycleState, *v1.Pod, framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	*p.calls = append(*p.calls, p.name)
	return p.result, p.status
}

type reservePlugin struct {
	name   string
	status *framework.Status
	calls  *[]string
}

func (p *reservePlugin) Name() string { return p.name }
func (p *reservePlugin) Reserve(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	*p.calls = append(*p.calls, "Reserve/"+p.name)
	return p.status
}
func (p *reservePlugin) Unreserve(context.Context, *framework.CycleState, *v1.Pod, string) {
	*p.calls = append(*p.calls, "Unreserve/"+p.name)
}

type permitPlugin struct {
	name       string
	status     *framework.Status
	timeout    time.Duration
	maxTimeout time.Duration // 0: does not implement PermitTimeoutExtension
}

func (p *permitPlugin) Name() string { return p.name }
func (p *permitPlugin) Permit(context.Context, *framework.CycleState, *v1.Pod, string) (*framework.Status, time.Duration) {
	return p.status, p.timeout
}

type longPermitPlugin struct{ permitPlugin }

func (p *longPermitPlugin) MaxPermitTimeout() time.Duration { return p.maxTimeout }

type closingPlugin struct {
	name   string
	closed *bool
}

func (p *closingPlugin) Name() string                                                     { return p.name }
func (p *closingPlugin) Close() error                                                     { *p.closed = true; return nil }
func (p *closingPlugin) PostBind(context.Context, *framework.CycleState, *v1.Pod, string) {}

// argsPlugin is a plugin whose factory checks the args it received.
type argsPlugin struct {
	name string
}

func (p *argsPlugin) Name() string { return p.name }
func (p *argsPlugin) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

// fixed returns a factory that always returns p.
func fixed(p framework.Plugin) Factory {
	return func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) { return p, nil }
}

// baseRegistry holds the plugins every profile needs.
func baseRegistry(extra map[string]framework.Plugin) Registry {
	r := Registry{}
	must(r.Register("Sort", fixed(&queueSortPlugin{name: "Sort"}), ArgsSpec{}))
	must(r.Register("Binder", fixed(&bindPlugin{name: "Binder"}), ArgsSpec{}))
	for n, p := range extra {
		must(r.Register(n, fixed(p), ArgsSpec{}))
	}
	return r
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// baseDefaults is a default profile with only QueueSort and Bind.
func baseDefaults() *configv1.Plugins {
	return &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "Sort"}, {Name: "Binder"}}}}
}

func enabled(names ...string) configv1.PluginSet {
	var ps configv1.PluginSet
	for _, n := range names {
		ps.Enabled = append(ps.Enabled, configv1.Plugin{Name: n})
	}
	return ps
}

func weighted(name string, w int32) configv1.Plugin {
	return configv1.Plugin{Name: name, Weight: ptr.To(w)}
}

func newTestFramework(ctx context.Context, r Registry, plugins *configv1.Plugins, opts ...Option) (*frameworkImpl, error) {
	opts = append([]Option{WithDefaultPlugins(baseDefaults())}, opts...)
	fw, err := NewFramework(ctx, r, &configv1.KubeSchedulerProfile{SchedulerName: ptr.To("test"), Plugins: plugins}, opts...)
	if err != nil {
		return nil, err
	}
	return fw.(*frameworkImpl), nil
}

func makeNode(name string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}}})
	return ni
}

func makeNodes(n int) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		out[i] = makeNode(fmt.Sprintf("node-%d", i))
	}
	return out
}

func makePod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
}

// snapshot is a minimal SharedLister over a fixed node list; it holds no
// pod group (the embedded nil lister panics if asked for one).
type snapshot struct {
	framework.SharedLister
	nodes []*framework.NodeInfo
}

func (s *snapshot) NodeInfos() framework.NodeInfoLister       { return s }
func (s *snapshot) StorageInfos() framework.StorageInfoLister { return s }
func (s *snapshot) IsPVCUsedByPods(string) bool               { return false }
func (s *snapshot) List() ([]*framework.NodeInfo, error)      { return s.nodes, nil }
func (s *snapshot) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) {
	return nil, nil
}
func (s *snapshot) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return nil, nil
}
func (s *snapshot) Get(name string) (*framework.NodeInfo, error) {
	for _, n := range s.nodes {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

var _ framework.SharedLister = (*snapshot)(nil)
