package scheduler

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Benchmark plugins shaped like the default profile's hot path: per-pod
// work in PreFilter, then a cheap Filter and Score per node.

type benchSort struct{}

func (benchSort) Name() string { return "BenchSort" }
func (benchSort) Less(a, b *framework.QueuedPodInfo) bool {
	return a.Timestamp.Before(b.Timestamp)
}

type benchFit struct{}

const benchFitKey framework.StateKey = "PreFilterBenchFit"

type benchFitState struct{ framework.PodResource }

func (s *benchFitState) Clone() framework.StateData { return s }

func (benchFit) Name() string { return "BenchFit" }
func (benchFit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	pi, _ := framework.NewPodInfo(pod)
	state.Write(benchFitKey, &benchFitState{pi.CalculateResource()})
	return nil, nil
}
func (benchFit) PreFilterExtensions() framework.PreFilterExtensions { return nil }
func (benchFit) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*benchFitState](state, benchFitKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if ni.Allocatable.MilliCPU < ni.Requested.MilliCPU+s.Resource.MilliCPU {
		return framework.NewStatus(framework.Unschedulable, "Insufficient cpu")
	}
	if ni.Allocatable.Memory < ni.Requested.Memory+s.Resource.Memory {
		return framework.NewStatus(framework.Unschedulable, "Insufficient memory")
	}
	if len(ni.Pods)+1 > ni.Allocatable.AllowedPodNumber {
		return framework.NewStatus(framework.Unschedulable, "Too many pods")
	}
	return nil
}
func (benchFit) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*benchFitState](state, benchFitKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	free := ni.Allocatable.MilliCPU - ni.Requested.MilliCPU - s.Resource.MilliCPU
	return max(free, 0) * framework.MaxNodeScore / ni.Allocatable.MilliCPU, nil
}
func (benchFit) ScoreExtensions() framework.ScoreExtensions { return nil }

type benchTaints struct{}

func (benchTaints) Name() string { return "BenchTaints" }
func (benchTaints) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.Node().Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoSchedule }, false); untolerated {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint")
	}
	return nil
}

type benchBinder struct{}

func (benchBinder) Name() string { return "BenchBinder" }
func (benchBinder) Bind(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

// BenchmarkSchedulingCycle is one scheduling cycle (snapshot update,
// PreFilter, Filter, PreScore, Score, selection, assume, Reserve, Permit)
// for a pod requesting 1 CPU in a cluster of 5000 nodes in 10 zones with
// 10 pods each. The assumed pod is forgotten after each cycle, so every
// cycle sees one changed node, as in steady state. "minimal" runs a
// resource fit and a taint filter; "default-profile" runs the built-in
// default profile.
func BenchmarkSchedulingCycle(b *testing.B) {
	fixed := func(p framework.Plugin) runtime.Factory {
		return func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) { return p, nil }
	}
	minimal := runtime.Registry{}
	var minimalPlugins configv1.Plugins
	for _, p := range []framework.Plugin{benchSort{}, benchFit{}, benchTaints{}, benchBinder{}} {
		if err := minimal.Register(p.Name(), fixed(p), runtime.ArgsSpec{}); err != nil {
			b.Fatal(err)
		}
		minimalPlugins.MultiPoint.Enabled = append(minimalPlugins.MultiPoint.Enabled, configv1.Plugin{Name: p.Name()})
	}
	b.Run("minimal", func(b *testing.B) { benchmarkSchedulingCycle(b, minimal, &minimalPlugins) })
	b.Run("default-profile", func(b *testing.B) {
		benchmarkSchedulingCycle(b, plugins.NewInTreeRegistry(), plugins.DefaultPlugins())
	})
}

func benchmarkSchedulingCycle(b *testing.B, r runtime.Registry, defaults *configv1.Plugins) {
	ctx := klog.NewContext(context.Background(), klog.Background())
	s, err := New(ctx, fake.NewClientset(), r, WithDefaultPlugins(defaults))
	if err != nil {
		b.Fatal(err)
	}
	name := "bench"
	fwk, err := profilebuild.Builder(s)(ctx, &configv1.KubeSchedulerProfile{SchedulerName: &name})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fwk.Close() }()

	logger := klog.FromContext(ctx)
	addBenchCluster(b, s, 5000, 10)
	pod := st.MakePod().Name("incoming").UID("incoming").SchedulerName(name).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj()

	b.ReportAllocs()
	for b.Loop() {
		pi, _ := framework.NewPodInfo(pod)
		qpi := &framework.QueuedPodInfo{PodInfo: pi}
		state := framework.NewCycleState()
		podsToActivate := framework.NewPodsToActivate()
		state.Write(framework.PodsToActivateKey, podsToActivate)
		result, assumed, status := s.schedulingCycle(ctx, state, fwk, qpi, podsToActivate)
		if !status.IsSuccess() {
			b.Fatal(status.AsError())
		}
		if result.EvaluatedNodes != 500 {
			b.Fatalf("evaluated %d nodes, want 500 (10%% of 5000)", result.EvaluatedNodes)
		}
		fwk.RunReservePluginsUnreserve(ctx, state, assumed.Pod, result.SuggestedHost)
		if err := s.cache.ForgetPod(logger, assumed.Pod); err != nil {
			b.Fatal(err)
		}
	}
}

// addBenchCluster adds numNodes nodes of 32 CPUs and 64Gi in 10 zones to
// s's cache, each running podsPerNode pods of 100m and 100Mi, and takes a
// snapshot.
func addBenchCluster(b *testing.B, s *Scheduler, numNodes, podsPerNode int) {
	logger := s.logger
	for i := 0; i < numNodes; i++ {
		node := fmt.Sprint("node-", i)
		s.cache.AddNode(logger, st.MakeNode().Name(node).Label(v1.LabelTopologyZone, fmt.Sprint("zone-", i%10)).Label(v1.LabelHostname, node).
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "32", v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}).Obj())
		for j := 0; j < podsPerNode; j++ {
			p := st.MakePod().Name(fmt.Sprintf("pod-%d-%d", i, j)).Node(node).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "100m", v1.ResourceMemory: "100Mi"}).Obj()
			if err := s.cache.AddPod(logger, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.cache.UpdateSnapshot(logger, s.picker.snapshot); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIdenticalPods schedules a run of identical pods (1 CPU, 1Gi,
// one container) one after another through the queue, as the loop does,
// each staying assumed on its node, with upstream's opportunistic
// batching on and off, at 5000 and 15000 nodes (10 pods each). The
// profile is the default one without PodTopologySpread, whose system
// default constraints make upstream's default profile sign no pod (so it
// never batches). Besides wall time per pod (ns/op, with Filter and
// Score spread over the cores) it reports the process's CPU time per pod
// (cpu-ns/op) and the share of pods that took the hint.
func BenchmarkIdenticalPods(b *testing.B) {
	for _, nodes := range []int{5000, 15000} {
		for _, batching := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/batching=%t", nodes, batching), func(b *testing.B) {
				benchmarkIdenticalPods(b, nodes, batching)
			})
		}
	}
}

func benchmarkIdenticalPods(b *testing.B, numNodes int, batching bool) {
	ctx := klog.NewContext(context.Background(), klog.Background())
	m := metrics.NewUnregistered()
	s, err := New(ctx, fake.NewClientset(), plugins.NewInTreeRegistry(), WithDefaultPlugins(plugins.DefaultPlugins()),
		WithOpportunisticBatching(batching), WithMetrics(m))
	if err != nil {
		b.Fatal(err)
	}
	name := "bench"
	fwk, err := profilebuild.Builder(s)(ctx, &configv1.KubeSchedulerProfile{SchedulerName: &name, Plugins: &configv1.Plugins{
		MultiPoint: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: "PodTopologySpread"}}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fwk.Close() }()
	s.Profiles().Publish(name, fwk)
	addBenchCluster(b, s, numNodes, 10)
	logger := s.logger

	var before syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		pod := st.MakePod().Name(fmt.Sprint("incoming-", i)).UID(fmt.Sprint("incoming-", i)).SchedulerName(name).Container("app:1").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj()
		s.queue.Add(logger, pod)
		entity, err := s.queue.Pop(logger)
		if err != nil {
			b.Fatal(err)
		}
		qpi := entity.(*framework.QueuedPodInfo)
		state := framework.NewCycleState()
		podsToActivate := framework.NewPodsToActivate()
		state.Write(framework.PodsToActivateKey, podsToActivate)
		if _, _, status := s.schedulingCycle(ctx, state, fwk, qpi, podsToActivate); !status.IsSuccess() {
			b.Fatal(status.AsError())
		}
		s.queue.Done(pod.UID)
	}
	var after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	var hinted dto.Metric
	if err := m.BatchAttempts.WithLabelValues(name, metrics.BatchAttemptHintUsed).Write(&hinted); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(hinted.GetCounter().GetValue()/float64(b.N), "hinted/op")
}
