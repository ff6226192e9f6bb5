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
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// upstreamSide is kube-scheduler 1.37.2's framework with its default
// profile, built from its v1 defaults and in-tree registry under its
// default feature gates.
type upstreamSide struct {
	fwk       framework.Framework
	client    *fake.Clientset
	snapshot  *upstreamLister
	nominator *upstreamNominator
	deletions deletions
	dra       fwk.SharedDRAManager
	// state is the last cycle's, which reserve continues.
	state  *framework.CycleState
	cancel context.CancelFunc
}

// upstreamLister lets the harness swap the snapshot under an instance
// built once; plugins read it through the handle at each cycle.
type upstreamLister struct{ *cache.Snapshot }

// upstreamNominator serves the harness's nominations; the frameworks only
// read them, the harness records them.
type upstreamNominator struct{ pods nominations }

func (*upstreamNominator) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (*upstreamNominator) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (*upstreamNominator) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}

func (n *upstreamNominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, p := range n.pods[node] {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			panic(err) // the generated pods always parse
		}
		out = append(out, pi)
	}
	return out
}

// upstreamProfile is the default profile of kube-scheduler 1.37.2.
func upstreamProfile() (*config.KubeSchedulerProfile, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	return cfg.Profiles[0].DeepCopy(), nil
}

func newUpstreamSide(ctx context.Context, objs []k8sruntime.Object) (*upstreamSide, error) {
	prof, err := upstreamProfile()
	if err != nil {
		return nil, err
	}
	// The framework records plugin metrics into upstream's global
	// metrics, which must exist first (registration happens once).
	metrics.Register()
	ctx, cancel := context.WithCancel(ctx)
	s := &upstreamSide{snapshot: &upstreamLister{cache.NewEmptySnapshot()}, nominator: &upstreamNominator{}, cancel: cancel}
	s.client = newFakeClient(objs, &s.deletions, func(namespace, name string) bool {
		_, err := s.claim(namespace, name)
		return err == nil
	})
	factory := informers.NewSharedInformerFactory(s.client, 0)
	// As kube-scheduler's New wires it: NodeVolumeLimits reads CSINodes
	// here, DynamicResources claims through an assume cache and slices
	// through the tracker, with DRADeviceTaintRules and
	// DRAConsumableCapacity as their default gates set them.
	csi := nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())
	logger := klog.FromContext(ctx)
	resource := factory.Resource().V1()
	claims := assumecache.NewAssumeCache(logger, resource.ResourceClaims().Informer(), "ResourceClaim", "", nil)
	trackerOpts := resourceslicetracker.Options{
		EnableDeviceTaintRules:   feature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
		EnableConsumableCapacity: feature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            resource.ResourceSlices(),
		KubeClient:               s.client,
	}
	if trackerOpts.EnableDeviceTaintRules {
		trackerOpts.TaintInformer = resource.DeviceTaintRules()
	}
	tracker, err := resourceslicetracker.StartTracker(ctx, trackerOpts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("starting kube-scheduler's ResourceSlice tracker: %w", err)
	}
	dra := dynamicresources.NewDRAManager(ctx, claims, tracker, factory)
	// As kube-scheduler's event handlers: the extended resource cache
	// hears of DeviceClasses (DRAExtendedResource, on by default).
	classes, err := resource.DeviceClasses().Informer().AddEventHandler(dra.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("feeding kube-scheduler's extended resource cache: %w", err)
	}
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), prof,
		frameworkruntime.WithClientSet(s.client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(s.snapshot),
		frameworkruntime.WithMutableSnapshotLister(s.snapshot),
		frameworkruntime.WithSharedCSIManager(csi),
		frameworkruntime.WithSharedDRAManager(dra),
		frameworkruntime.WithPodNominator(s.nominator),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building kube-scheduler's framework: %w", err)
	}
	s.fwk = f
	s.dra = dra
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// As kube-scheduler's WaitForHandlersSync: the claims' handlers, which
	// count the devices in use, the tracker and the extended resource
	// cache have seen every object.
	if !toolscache.WaitForCacheSync(ctx.Done(), claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}).HasSynced, tracker.HasSynced, classes.HasSynced) {
		cancel()
		return nil, errors.New("kube-scheduler's DRA caches did not sync")
	}
	return s, nil
}

func (s *upstreamSide) setState(pods []*v1.Pod, nodes []*v1.Node, nominated nominations) error {
	s.snapshot.Snapshot = cache.NewSnapshot(pods, nodes)
	s.nominator.pods = nominated
	return nil
}

func (s *upstreamSide) reserve(ctx context.Context, pod *v1.Pod, node string) (verdict, []string, error) {
	v := upstreamVerdict(s.fwk.RunReservePluginsReserve(ctx, s.state, pod, node))
	devices, err := s.devicesInUse()
	return v, devices, err
}

func (s *upstreamSide) unreserve(ctx context.Context, pod *v1.Pod, node string) {
	s.fwk.RunReservePluginsUnreserve(ctx, s.state, pod, node)
}

func (s *upstreamSide) devicesInUse() ([]string, error) {
	allocated, err := s.dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	return devicesInUse(allocated), nil
}

func (s *upstreamSide) preEnqueue(ctx context.Context, pod *v1.Pod) verdict {
	for _, pl := range s.fwk.PreEnqueuePlugins() {
		if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
			return verdict{Code: st.Code().String(), Plugin: pl.Name(), Reasons: st.Reasons()}
		}
	}
	return verdict{Code: fwk.Success.String()}
}

func (s *upstreamSide) preBind(ctx context.Context, pod *v1.Pod, node string) (preFlight, preBind verdict) {
	var pl fwk.PreBindPlugin
	for _, p := range s.fwk.PreEnqueuePlugins() {
		if p.Name() == dynamicresources.Name {
			pl = p.(fwk.PreBindPlugin)
		}
	}
	_, st := pl.PreBindPreFlight(ctx, s.state, pod, node)
	preFlight = upstreamVerdict(st)
	if !st.IsSuccess() {
		return preFlight, verdict{}
	}
	st = pl.PreBind(ctx, s.state, pod, node)
	if !st.IsSuccess() {
		s.fwk.RunReservePluginsUnreserve(ctx, s.state, pod, node)
	}
	return preFlight, upstreamVerdict(st)
}

func (s *upstreamSide) bind(ctx context.Context, pod *v1.Pod) error {
	_, err := s.client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

func (s *upstreamSide) deleted() []string { return s.deletions.list() }

func (s *upstreamSide) clientset() *fake.Clientset { return s.client }

func (s *upstreamSide) claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return s.dra.ResourceClaims().Get(namespace, name)
}

func (s *upstreamSide) close() { s.cancel() }

func upstreamVerdict(st *fwk.Status) verdict {
	if st.IsSuccess() {
		return verdict{Code: st.Code().String()}
	}
	return verdict{Code: st.Code().String(), Plugin: st.Plugin(), Reasons: st.Reasons()}
}

// cycle follows kube-scheduler's findNodesThatFitPod, prioritizeNodes and
// PostFilter call, but filters every node so each one's verdict is seen.
func (s *upstreamSide) cycle(ctx context.Context, pod *v1.Pod, nodeNames []string) *result {
	res := &result{Signature: string(s.fwk.SignPod(ctx, pod))}
	state := framework.NewCycleState()
	s.state = state
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	fitError := func() {
		res.Message = (&framework.FitError{Pod: pod, NumAllNodes: len(nodeNames), Diagnosis: diagnosis}).Error()
	}
	postFilter := func() {
		r, st := s.fwk.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
		res.PostFilter = upstreamVerdict(st)
		if r != nil && r.NominatingInfo != nil {
			res.Nominated = r.NominatedNodeName
		}
	}
	preRes, st, unschedulable := s.fwk.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unschedulable
	res.PreFilter = upstreamVerdict(st)
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
		diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unschedulable))))
	}
	res.Filter = map[string]verdict{}
	var feasible []fwk.NodeInfo
	for _, name := range candidates {
		ni, err := s.snapshot.Get(name)
		if err != nil {
			res.Err = err.Error()
			return res
		}
		st := s.fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		res.Filter[name] = upstreamVerdict(st)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
		case st.Code() == fwk.Error:
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
