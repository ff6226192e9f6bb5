package upstreamdiff

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// oursSide is profile-scheduler's framework with its default profile,
// built from its in-tree registry as the scheduler builds a profile that
// names no plugins.
type oursSide struct {
	fwk       framework.Framework
	client    *fake.Clientset
	snapshot  *oursLister
	nominator *oursNominator
	deletions deletions
	dra       *dynamicresources.Manager
	// state is the last cycle's, which reserve continues.
	state  *framework.CycleState
	cancel context.CancelFunc
}

// oursNominator is upstreamNominator for this framework.
type oursNominator struct{ pods nominations }

func (*oursNominator) AddNominatedPod(klog.Logger, *framework.PodInfo, *framework.NominatingInfo) {}
func (*oursNominator) DeleteNominatedPodIfExists(*v1.Pod)                                         {}
func (*oursNominator) UpdateNominatedPod(klog.Logger, *v1.Pod, *framework.PodInfo)                {}

func (n *oursNominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	var out []*framework.PodInfo
	for _, p := range n.pods[node] {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			panic(err) // the generated pods always parse
		}
		out = append(out, pi)
	}
	return out
}

// oursLister is upstreamLister for this framework.
type oursLister struct{ *cache.Snapshot }

func newOursSide(ctx context.Context, objs []k8sruntime.Object) (*oursSide, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &oursSide{snapshot: &oursLister{cache.NewEmptySnapshot()}, nominator: &oursNominator{}, cancel: cancel}
	s.client = newFakeClient(objs, &s.deletions, func(namespace, name string) bool {
		_, err := s.claim(namespace, name)
		return err == nil
	})
	factory := informers.NewSharedInformerFactory(s.client, 0)
	// As the scheduler builds it, before its informers start.
	dra, err := dynamicresources.NewManager(ctx, s.client, factory)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building profile-scheduler's DRA manager: %w", err)
	}
	f, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), nil,
		runtime.WithDefaultPlugins(plugins.DefaultPlugins()),
		runtime.WithClientSet(s.client),
		runtime.WithInformerFactory(factory),
		runtime.WithSnapshotSharedLister(s.snapshot),
		runtime.WithSharedDRAManager(dra),
		runtime.WithPodNominator(s.nominator),
		runtime.WithEventRecorder(&events.FakeRecorder{}),
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building profile-scheduler's framework: %w", err)
	}
	s.fwk = f
	s.dra = dra
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// As the scheduler waits for its event sources before it schedules.
	if !toolscache.WaitForCacheSync(ctx.Done(), dra.ClaimEvents().HasSynced, dra.SliceEvents().HasSynced, dra.DeviceClassEvents().HasSynced) {
		cancel()
		return nil, errors.New("profile-scheduler's DRA caches did not sync")
	}
	return s, nil
}

// setState builds the snapshot through the scheduler's own cache, as the
// loop does (cache.NewSnapshot, a shortcut for tests, skips image states).
func (s *oursSide) setState(pods []*v1.Pod, nodes []*v1.Node, nominated nominations) error {
	s.nominator.pods = nominated
	logger := klog.Background()
	c := cache.New()
	for _, n := range nodes {
		c.AddNode(logger, n)
	}
	for _, p := range pods {
		if err := c.AddPod(logger, p); err != nil {
			return err
		}
	}
	snapshot := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, snapshot); err != nil {
		return err
	}
	s.snapshot.Snapshot = snapshot
	return nil
}

func (s *oursSide) reserve(ctx context.Context, pod *v1.Pod, node string) (verdict, []string, error) {
	v := oursVerdict(s.fwk.RunReservePluginsReserve(ctx, s.state, pod, node))
	devices, err := s.devicesInUse()
	return v, devices, err
}

func (s *oursSide) unreserve(ctx context.Context, pod *v1.Pod, node string) {
	s.fwk.RunReservePluginsUnreserve(ctx, s.state, pod, node)
}

func (s *oursSide) devicesInUse() ([]string, error) {
	allocated, err := s.dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	return devicesInUse(allocated), nil
}

func (s *oursSide) preEnqueue(ctx context.Context, pod *v1.Pod) verdict {
	for _, pl := range s.fwk.PreEnqueuePlugins() {
		if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
			return verdict{Code: st.Code().String(), Plugin: pl.Name(), Reasons: st.Reasons()}
		}
	}
	return verdict{Code: framework.Success.String()}
}

func (s *oursSide) preBind(ctx context.Context, pod *v1.Pod, node string) (preFlight, preBind verdict) {
	var pl framework.PreBindPlugin
	for _, p := range s.fwk.PreEnqueuePlugins() {
		if p.Name() == dynamicresources.Name {
			pl = p.(framework.PreBindPlugin)
		}
	}
	_, st := pl.PreBindPreFlight(ctx, s.state, pod, node)
	preFlight = oursVerdict(st)
	if !st.IsSuccess() {
		return preFlight, verdict{}
	}
	st = pl.PreBind(ctx, s.state, pod, node)
	if !st.IsSuccess() {
		s.fwk.RunReservePluginsUnreserve(ctx, s.state, pod, node)
	}
	return preFlight, oursVerdict(st)
}

func (s *oursSide) bind(ctx context.Context, pod *v1.Pod) error {
	_, err := s.client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

func (s *oursSide) deleted() []string { return s.deletions.list() }

func (s *oursSide) clientset() *fake.Clientset { return s.client }

func (s *oursSide) claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return s.dra.ResourceClaims().Get(namespace, name)
}

func (s *oursSide) close() {
	s.cancel()
	_ = s.fwk.Close()
}

func oursVerdict(st *framework.Status) verdict {
	if st.IsSuccess() {
		return verdict{Code: st.Code().String()}
	}
	return verdict{Code: st.Code().String(), Plugin: st.Plugin(), Reasons: st.Reasons()}
}

// cycle is upstreamSide.cycle on this framework.
func (s *oursSide) cycle(ctx context.Context, pod *v1.Pod, nodeNames []string) *result {
	res := &result{Signature: string(s.fwk.SignPod(ctx, pod))}
	state := framework.NewCycleState()
	s.state = state
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	fitError := func() {
		res.Message = (&framework.FitError{Pod: pod, NumAllNodes: len(nodeNames), Diagnosis: diagnosis}).Error()
	}
	postFilter := func() {
		r, st := s.fwk.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
		res.PostFilter = oursVerdict(st)
		if r != nil && r.NominatingInfo != nil {
			res.Nominated = r.NominatedNodeName
		}
	}
	preRes, st, unschedulable := s.fwk.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unschedulable
	res.PreFilter = oursVerdict(st)
	if !st.IsSuccess() {
		if !st.IsRejected() {
			res.Err = st.AsError().Error()
			return res
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(st)
		diagnosis.PreFilterMsg = st.Message()
		diagnosis.AddPluginStatus(st)
		fitError()
		postFilter()
		return res
	}
	candidates := nodeNames
	if !preRes.AllNodes() {
		res.PreFilterNodes = sets.List(preRes.NodeNames)
		candidates = slices.DeleteFunc(slices.Clone(nodeNames), func(n string) bool { return !preRes.NodeNames.Has(n) })
		diagnosis.NodeToStatus.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unschedulable))))
	}
	res.Filter = map[string]verdict{}
	var feasible []*framework.NodeInfo
	for _, name := range candidates {
		ni, err := s.snapshot.Get(name)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		st := s.fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		res.Filter[name] = oursVerdict(st)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
		case st.Code() == framework.Error:
			res.Err = st.AsError().Error()
			return res
		default:
			diagnosis.NodeToStatus.Set(name, st)
			diagnosis.AddPluginStatus(st)
		}
	}
	if len(feasible) == 0 {
		fitError()
		postFilter()
		return res
	}
	if st := s.fwk.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		res.Err = st.AsError().Error()
		return res
	}
	scores, st := s.fwk.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		res.Err = st.AsError().Error()
		return res
	}
	res.Scores = map[string][]pluginScore{}
	res.Totals = map[string]int64{}
	for _, nps := range scores {
		for _, ps := range nps.Scores {
			res.Scores[nps.Name] = append(res.Scores[nps.Name], pluginScore{Plugin: ps.Name, Score: ps.Score})
		}
		res.Totals[nps.Name] = nps.TotalScore
	}
	return res
}
