package defaultpreemption

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/interpodaffinity"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/noderesources"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/podtopologyspread"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/volumerestrictions"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// nominator is an in-memory PodNominator: the scheduling queue's role,
// reduced to what preemption and RunFilterPluginsWithNominatedPods use.
type nominator struct {
	mu     sync.Mutex
	byNode map[string][]*framework.PodInfo
}

var _ framework.PodNominator = (*nominator)(nil)

func (n *nominator) AddNominatedPod(_ klog.Logger, pi *framework.PodInfo, ni *framework.NominatingInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pi.Pod)
	node := pi.Pod.Status.NominatedNodeName
	if ni.Mode() == framework.ModeOverride {
		node = ni.NominatedNodeName
	}
	if node == "" {
		return
	}
	if n.byNode == nil {
		n.byNode = map[string][]*framework.PodInfo{}
	}
	n.byNode[node] = append(n.byNode[node], pi)
}

func (n *nominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod)
}

func (n *nominator) deleteLocked(pod *v1.Pod) {
	for node, pis := range n.byNode {
		for i, pi := range pis {
			if pi.Pod.UID == pod.UID {
				n.byNode[node] = append(pis[:i:i], pis[i+1:]...)
				break
			}
		}
	}
}

func (n *nominator) UpdateNominatedPod(logger klog.Logger, _ *v1.Pod, pi *framework.PodInfo) {
	n.AddNominatedPod(logger, pi, nil)
}

func (n *nominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*framework.PodInfo(nil), n.byNode[node]...)
}

// activator records the pods moved to the active queue.
type activator struct {
	mu   sync.Mutex
	pods []string
}

// activated returns the pods moved so far.
func (a *activator) activated() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.pods...)
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.pods = append(a.pods, k)
	}
}

// waitPermit holds pods labelled "wait" at Permit.
type waitPermit struct{}

func (waitPermit) Name() string { return "WaitPermit" }

func (waitPermit) Permit(_ context.Context, _ *framework.CycleState, p *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if _, ok := p.Labels["wait"]; ok {
		return framework.NewStatus(framework.Wait), time.Minute
	}
	return nil, 0
}

// env is a framework instance with this plugin after NodeResourcesFit,
// PodTopologySpread, InterPodAffinity and VolumeRestrictions, on the
// scheduler cache's snapshot, with a fake clientset and informers.
type env struct {
	fwk       framework.Framework
	pl        *defaultPreemption
	cs        *fake.Clientset
	factory   informers.SharedInformerFactory
	recorder  *events.FakeRecorder
	snapshot  *cache.Snapshot
	nominator *nominator
	activator *activator
}

type envConfig struct {
	nodes []*v1.Node
	// pods are the placed pods (in the snapshot) and any other pod the
	// API and the informers should know, such as the preemptor.
	pods []*v1.Pod
	pdbs []*policy.PodDisruptionBudget
	args *configv1.DefaultPreemptionArgs
	// parallelism 1 makes the dry run visit nodes in order.
	parallelism int
	// extenders are the profile's HTTP extenders.
	extenders []configv1.Extender
	// features are the plugin's.
	features feature.Features
	// podGroups are the PodGroups the snapshot and the PodGroupManager
	// hold, with the pods naming them as members.
	podGroups []*schedulingv1beta1.PodGroup
	// pvcs are the claims the informers know.
	pvcs []*v1.PersistentVolumeClaim
}

func newEnv(tb testing.TB, cfg envConfig) *env {
	tb.Helper()
	var objs []k8sruntime.Object
	for _, p := range cfg.pods {
		objs = append(objs, p)
	}
	for _, pdb := range cfg.pdbs {
		objs = append(objs, pdb)
	}
	for _, pvc := range cfg.pvcs {
		objs = append(objs, pvc)
	}
	cs, factory := st.InformerFactory(tb, objs...)
	// The test extenders serve on loopback.
	extenderPolicy, err := extender.NewPolicy(extender.LoopbackURLPrefixes(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{
		cs:        cs,
		factory:   factory,
		recorder:  events.NewFakeRecorder(100),
		snapshot:  cacheSnapshot(tb, cfg.nodes, cfg.pods, cfg.podGroups),
		nominator: &nominator{},
		activator: &activator{},
	}
	r := runtime.Registry{}
	register := func(name string, f runtime.Factory, args runtime.ArgsSpec) {
		if err := r.Register(name, f, args); err != nil {
			tb.Fatal(err)
		}
	}
	register(queuesort.Name, queuesort.New, runtime.ArgsSpec{})
	register(defaultbinder.Name, defaultbinder.New, runtime.ArgsSpec{})
	register(noderesources.Name, noderesources.New, runtime.ArgsSpec{})
	register(podtopologyspread.Name, podtopologyspread.New, runtime.ArgsSpec{})
	register(interpodaffinity.Name, interpodaffinity.New, runtime.ArgsSpec{})
	register(volumerestrictions.Name, volumerestrictions.New, runtime.ArgsSpec{})
	register("WaitPermit", func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return waitPermit{}, nil
	}, runtime.ArgsSpec{})
	register(Name, func(ctx context.Context, obj k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
		p, err := New(ctx, obj, h, cfg.features)
		if err == nil {
			e.pl = p.(*defaultPreemption)
			// Start the dry run at the first node so tests are repeatable.
			e.pl.offset = func(int32) int32 { return 0 }
		}
		return p, err
	}, runtime.ArgsSpec{Validate: func(obj k8sruntime.Object) error { return ValidateArgs(obj.(*configv1.DefaultPreemptionArgs)) }})

	profile := st.MultiPointProfile(
		st.Plugin(queuesort.Name, 0),
		st.Plugin(noderesources.Name, 0),
		st.Plugin(podtopologyspread.Name, 0),
		st.Plugin(interpodaffinity.Name, 0),
		st.Plugin(volumerestrictions.Name, 0),
		st.Plugin(Name, 0),
		st.Plugin("WaitPermit", 0),
		st.Plugin(defaultbinder.Name, 0),
	)
	if cfg.args != nil {
		profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: k8sruntime.RawExtension{Object: cfg.args}}}
	}
	e.fwk = st.NewFramework(tb, r, profile, e.snapshot,
		runtime.WithClientSet(cs),
		runtime.WithInformerFactory(factory),
		runtime.WithEventRecorder(e.recorder),
		runtime.WithPodNominator(e.nominator),
		runtime.WithPodActivator(e.activator),
		runtime.WithParallelism(cfg.parallelism),
		runtime.WithExtenders(cfg.extenders),
		runtime.WithExtenderPolicy(extenderPolicy),
		runtime.WithPodGroupManager(st.NewPodGroups(cfg.podGroups, cfg.pods)))
	tb.Cleanup(e.pl.inFlight.Wait)
	return e
}

// filterAndPostFilter runs PreFilter and Filter on every node, then the
// PostFilter plugins with the nodes' statuses, as the scheduling loop does
// when no node fits.
func (e *env) filterAndPostFilter(tb testing.TB, pod *v1.Pod) (*framework.PostFilterResult, *framework.Status) {
	tb.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	nodes, _ := e.snapshot.List()
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		if !s.IsRejected() {
			tb.Fatalf("PreFilter: %v", s)
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
	} else {
		feasible, err := e.fwk.FindNodesThatPassFilters(ctx, state, pod, &diagnosis, nodes, 0, len(nodes))
		if err != nil {
			tb.Fatalf("Filter: %v", err)
		}
		if len(feasible) != 0 {
			tb.Fatalf("%d node(s) fit the preemptor, the test needs none", len(feasible))
		}
	}
	return e.fwk.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
}

// cacheSnapshot is the scheduler cache's snapshot of nodes, the pods
// placed on them and podGroups with the pods naming them as members: the
// snapshot pod-group preemption changes and puts back.
func cacheSnapshot(tb testing.TB, nodes []*v1.Node, pods []*v1.Pod, podGroups []*schedulingv1beta1.PodGroup) *cache.Snapshot {
	tb.Helper()
	logger, _ := ktesting.NewTestContext(tb)
	c := cache.New(cache.WithPodGroups(true))
	for _, n := range nodes {
		c.AddNode(logger, n)
	}
	for _, pg := range podGroups {
		c.AddPodGroup(pg)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			if err := c.AddPod(logger, p); err != nil {
				tb.Fatal(err)
			}
		}
		c.AddPodGroupMember(p)
	}
	s := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		tb.Fatal(err)
	}
	return s
}

func cpu(q string) map[v1.ResourceName]string { return map[v1.ResourceName]string{v1.ResourceCPU: q} }

func makeNode(name, cpuQ string) *st.NodeWrapper {
	return st.MakeNode().Name(name).Label(v1.LabelHostname, name).Capacity(cpu(cpuQ))
}

// placed is a running pod of priority prio requesting cpuQ on node,
// started at start (minutes after an arbitrary origin).
func placed(name, node string, prio int32, cpuQ string, start int) *st.PodWrapper {
	p := st.MakePod().Name(name).Node(node).Priority(prio).Req(cpu(cpuQ))
	p.Status.StartTime = &metav1.Time{Time: time.Date(2026, 1, 1, 0, start, 0, 0, time.UTC)}
	return p
}

func preemptor(prio int32, cpuQ string) *st.PodWrapper {
	return st.MakePod().Name("preemptor").Priority(prio).Req(cpu(cpuQ)).SchedulerName("default-scheduler")
}

func pdb(name string, selector map[string]string, allowed int32) *policy.PodDisruptionBudget {
	return &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: policy.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: selector},
			MinAvailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
		},
		Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}
