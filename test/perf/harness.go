package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dto "github.com/prometheus/client_model/go"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/outage"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Namespaces and schedulerNames of the phases of a workload.
const (
	initNamespace    = "perf-init"
	ceilingNamespace = "perf-ceiling"
	measureNamespace = "perf"
	measureProfile   = "perf"
	// The same pods for upstream kube-scheduler, when it runs alongside.
	upstreamNamespace = "perf-upstream"
	upstreamProfile   = "perf-upstream"
	warmupProfile     = "perf-warmup"
	shadowProfile     = "perf-shadow"
	// unscheduled is a schedulerName no scheduler serves: the harness
	// binds these pods itself.
	unscheduled = "perf-harness"
)

// steadyState is how long a memory workload leaves each scheduler idle,
// its pods scheduled, before it reads the scheduler's memory.
const steadyState = 5 * time.Second

// Options configures a run.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd; CRDDir the CRDs.
	AssetsDir, CRDDir string
	// Operator is the profile-scheduler binary; run builds it when empty.
	Operator string
	// LogDir receives the schedulers' logs and the heap profiles of their
	// live heap at the end of each workload (outFile), one file per
	// workload and scheduler.
	LogDir string
	// QPS and Burst limit the schedulers' clients, and the harness's
	// binder when it measures the ceiling.
	QPS   float32
	Burst int
	// Workers is how many goroutines create and bind pods in the harness.
	Workers int
	// Timeout bounds the measured phase of one workload.
	Timeout time.Duration
	// Progress receives a line per phase.
	Progress io.Writer
	// Upstream, when set, is a kube-scheduler binary to measure on the same
	// API server after the operator, with the same profile and pods.
	Upstream string
	// CPUProfile, when set, is how long a CPU profile each scheduler takes
	// of itself from the start of its measured phase, written beside the
	// logs (cpuProfileFile).
	CPUProfile time.Duration
}

// Result is what one workload measured.
type Result struct {
	Name     string `json:"name"`
	Nodes    int    `json:"nodes"`
	InitPods int    `json:"initPods"`
	Pods     int    `json:"pods"`
	// Throughput is the operator's, in pods bound per second: the average
	// over the whole phase and percentiles of the per-second counts.
	Throughput Summary `json:"throughput"`
	// BindingCeiling is the rate at which the harness alone creates
	// pods/binding for the same number of pods on the same API server,
	// measured the same way: pods seen bound by a watch. Memory workloads
	// do not measure it.
	BindingCeiling Summary `json:"bindingCeiling"`
	// PerSecond are the pods bound in each whole second of the phase.
	PerSecond []float64 `json:"perSecond"`
	// Ratio is Throughput.Average / BindingCeiling.Average.
	Ratio float64 `json:"ratio"`
	// AttemptLatency is scheduler_scheduling_attempt_duration_seconds
	// (result scheduled) of the measured pods, in seconds.
	AttemptLatency Summary `json:"attemptLatencySeconds"`
	// PodSchedulingLatency is scheduler_pod_scheduling_sli_duration_seconds:
	// from entering the queue to bound, every attempt included.
	PodSchedulingLatency Summary `json:"podSchedulingSLISeconds"`
	// Attempts counts scheduler_schedule_attempts_total by result.
	Attempts map[string]int `json:"attempts"`
	// BatchAttempts counts scheduler_batch_attempts_total by result:
	// hint_used for each pod placed by opportunistic batching without a
	// search; UpstreamBatchAttempts is kube-scheduler's.
	BatchAttempts         map[string]int `json:"batchAttempts,omitempty"`
	UpstreamBatchAttempts map[string]int `json:"upstreamBatchAttempts,omitempty"`
	// FirstBindSeconds is how long after the profile was created the first
	// measured pod was bound (instance build and queue start-up).
	FirstBindSeconds float64 `json:"firstBindSeconds"`
	// MeasuredSeconds is the length of the measured phase.
	MeasuredSeconds float64 `json:"measuredSeconds"`
	// Cost is what the operator's process spent: its measured phase runs
	// from the profile's creation to the last binding.
	Cost Cost `json:"cost"`
	// ShadowEvaluations and ShadowSkipped count, for a workload with a
	// shadow, scheduler_shadow_evaluations_total by result and
	// scheduler_shadow_skipped_pods_total by reason over the measured phase.
	ShadowEvaluations map[string]int `json:"shadowEvaluations,omitempty"`
	ShadowSkipped     map[string]int `json:"shadowSkipped,omitempty"`
	// Upstream is kube-scheduler's throughput on the same API server, from
	// its first binding on (its start-up is left out), when measured.
	Upstream *Summary `json:"upstreamThroughput,omitempty"`
	// UpstreamRatio is Upstream.Average / BindingCeiling.Average.
	UpstreamRatio float64 `json:"upstreamRatio,omitempty"`
	// UpstreamCost is what kube-scheduler's process spent, its measured
	// phase running from its first binding to its last.
	UpstreamCost *Cost `json:"upstreamCost,omitempty"`
	// CeilingServerCost, ServerCost and UpstreamServerCost are what
	// kube-apiserver and etcd spent in the ceiling's phase, the
	// operator's and kube-scheduler's.
	CeilingServerCost  *ServerCost `json:"ceilingServerCost,omitempty"`
	ServerCost         *ServerCost `json:"serverCost,omitempty"`
	UpstreamServerCost *ServerCost `json:"upstreamServerCost,omitempty"`
}

// Cost is what a scheduler's process spent on a workload, read from
// outside the process.
type Cost struct {
	// CPUSecondsPer1000Pods is the process's user and system CPU time
	// (/proc/<pid>/stat) over the measured phase, per 1000 pods bound in it.
	CPUSecondsPer1000Pods float64 `json:"cpuSecondsPer1000Pods"`
	// RSSBytes and PeakRSSBytes are VmRSS and VmHWM (/proc/<pid>/status)
	// at the end of the workload.
	RSSBytes     int64 `json:"rssBytes"`
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// RSSFileBytes is the file-backed part of RSSBytes (RssFile): the
	// binary's pages in memory, as opposed to heap and runtime.
	RSSFileBytes int64 `json:"rssFileBytes"`
	// HeapInuseBytes is go_memstats_heap_inuse_bytes from the process's
	// /metrics at the end of the workload, read after the resident set and
	// a garbage collection: the live heap. Absent when it could not be read.
	HeapInuseBytes *int64 `json:"heapInuseBytes,omitempty"`
}

func (o Options) logf(format string, args ...any) {
	if o.Progress != nil {
		_, _ = fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// Run runs one workload on a fresh control plane.
func Run(ctx context.Context, o Options, w Workload) (*Result, error) {
	ticks, err := clockTicks()
	if err != nil {
		return nil, err
	}
	o.logf("== %s: starting kube-apiserver and etcd", w.Name)
	clusterOptions := localcluster.Options{AssetsDir: o.AssetsDir, CRDDir: o.CRDDir}
	if w.DRA {
		// Claims are made from the pods' templates by the resource claim
		// controller, in a process of its own as in a cluster.
		clusterOptions.ControllerManager = true
		clusterOptions.Controllers = localcluster.DRAControllers()
	}
	cluster, err := localcluster.Start(clusterOptions)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cluster.Stop() }()
	// The schedulers' kubeconfig holds an administrator's key: it goes
	// with the workload.
	dir, err := os.MkdirTemp("", "perf-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := cluster.WriteAdminKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	server, err := newAPIServer(cluster, cs.CoreV1().RESTClient(), ticks)
	if err != nil {
		return nil, err
	}
	h := &harness{o: o, w: w, cfg: cfg, cs: cs, server: server, dir: dir, kubeconfig: kubeconfig, ticks: ticks}
	return h.run(ctx)
}

type harness struct {
	o   Options
	w   Workload
	cfg *rest.Config
	cs  kubernetes.Interface
	// server is the workload's kube-apiserver and etcd.
	server *apiServer
	nodes  []string
	// dir holds the workload's throw-away files, kubeconfig among them.
	dir, kubeconfig string
	// ticks is the unit of /proc CPU times, per second.
	ticks int
	// extender serves the Extender workload's extender; nil for the others.
	extender *benchExtender
}

func (h *harness) run(ctx context.Context) (*Result, error) {
	w, o := h.w, h.o
	res := &Result{Name: w.Name, Nodes: w.Nodes, InitPods: w.InitPods, Pods: w.Pods}
	if w.Extender {
		e, err := startBenchExtender()
		if err != nil {
			return nil, err
		}
		defer e.stop()
		h.extender = e
	}

	start := time.Now()
	nodes := localcluster.Nodes("node", w.Nodes, perfNode)
	gpuNodes := 0
	if w.DRA {
		var stopDRA func()
		var err error
		if gpuNodes, stopDRA, err = h.startDRA(ctx, nodes); err != nil {
			return nil, err
		}
		defer stopDRA()
	}
	if err := localcluster.CreateNodes(ctx, h.cs, nodes, o.Workers); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		h.nodes = append(h.nodes, n.Name)
	}
	for _, ns := range []string{initNamespace, ceilingNamespace, measureNamespace, upstreamNamespace} {
		if _, err := h.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if w.DRA {
		if err := h.awaitDevices(ctx, gpuNodes, ceilingNamespace, measureNamespace, upstreamNamespace); err != nil {
			return nil, err
		}
		o.logf("   %d nodes with %d simulated GPUs each", gpuNodes, localcluster.StandardGPUs().Count)
	}
	o.logf("   %d nodes in %v", w.Nodes, time.Since(start).Round(time.Millisecond))

	// Pods already running: bound by the harness, as cluster state.
	start = time.Now()
	initPods, err := h.createPods(ctx, initNamespace, w.InitPods, false)
	if err != nil {
		return nil, err
	}
	if err := h.bindPods(ctx, initPods); err != nil {
		return nil, err
	}
	o.logf("   %d pods running in %v", w.InitPods, time.Since(start).Round(time.Millisecond))

	if !w.Memory {
		// The ceiling: the harness alone binds the same number of pods.
		ceilingPods, err := h.createPods(ctx, ceilingNamespace, w.Pods, true)
		if err != nil {
			return nil, err
		}
		if w.DRA {
			if err := h.awaitClaims(ctx, ceilingNamespace, w.Pods); err != nil {
				return nil, err
			}
		}
		if res.BindingCeiling, res.CeilingServerCost, err = h.measureCeiling(ctx, ceilingPods); err != nil {
			return nil, err
		}
		o.logf("   binding ceiling: %.0f pods/s; %s", res.BindingCeiling.Average, res.CeilingServerCost)
		if err := h.cs.CoreV1().Pods(ceilingNamespace).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			return nil, err
		}
		if w.DRA {
			if err := h.deleteClaims(ctx, ceilingNamespace); err != nil {
				return nil, err
			}
		}
	}

	// The operator, and an instance to warm it up: informers synced, the
	// loop running.
	op, err := h.startOperator()
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.stop() }()
	kc, err := client.New(h.cfg, client.Options{Scheme: localcluster.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := h.warmUp(ctx, kc, op); err != nil {
		return nil, err
	}

	// The measured pods wait for a profile that does not exist yet; creating
	// it starts the clock, as for the ceiling, whose pods (and claims) also
	// existed.
	bound := &boundCounter{done: make(chan struct{}), total: int64(w.Pods)}
	stopWatch, err := h.watchBound(ctx, measureNamespace, bound)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	if w.Gang > 0 {
		if err := h.createPodGroups(ctx, kc); err != nil {
			return nil, err
		}
	}
	if err := h.createWorkloadPodGroups(ctx, measureNamespace); err != nil {
		return nil, err
	}
	if _, err := h.createPods(ctx, measureNamespace, w.Pods, true); err != nil {
		return nil, err
	}
	if w.DRA {
		if err := h.awaitClaims(ctx, measureNamespace, w.Pods); err != nil {
			return nil, err
		}
	}
	if w.Approve {
		stopApprover, err := h.startApprover(ctx)
		if err != nil {
			return nil, err
		}
		defer stopApprover()
	}
	spec := schedulingv1alpha1.SchedulingProfileSpec{}
	if err := yaml.UnmarshalStrict([]byte(w.Profile), &spec); err != nil {
		return nil, fmt.Errorf("workload %s: profile: %w", w.Name, err)
	}
	if h.extender != nil {
		// The block kube-scheduler gets, pasted into the profile.
		data, err := json.Marshal(h.extender.extenderBlock())
		if err != nil {
			return nil, err
		}
		var ext schedulingv1alpha1.Extender
		if err := json.Unmarshal(data, &ext); err != nil {
			return nil, err
		}
		spec.Extenders = append(spec.Extenders, ext)
	}
	if w.Shadow != "" {
		if err := h.startShadow(ctx, kc, op); err != nil {
			return nil, err
		}
	}
	before, err := op.scrape(ctx)
	if err != nil {
		return nil, err
	}

	o.logf("   scheduling %d pods", w.Pods)
	cpu := &cpuMeter{s: op, ticks: h.ticks}
	cpu.begin()
	serverMark := h.server.mark(ctx)
	profiled := h.startCPUProfile(ctx, op)
	t0 := time.Now()
	profile := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: measureProfile}, Spec: spec}
	if err := kc.Create(ctx, profile); err != nil {
		return nil, err
	}
	samples := sampleEverySecond(bound.done, bound.count)
	if err := h.waitBound(ctx, bound, op); err != nil {
		return nil, err
	}
	if res.Cost.CPUSecondsPer1000Pods, err = cpu.end(w.Pods); err != nil {
		return nil, err
	}
	if res.ServerCost, err = h.server.since(ctx, serverMark, w.Pods, w.Pods); err != nil {
		return nil, err
	}
	if err := <-profiled; err != nil {
		return nil, err
	}
	if h.extender != nil && h.extender.calls.Load() == 0 {
		return nil, fmt.Errorf("workload %s: the operator never called the extender", w.Name)
	}
	elapsed := bound.last().Sub(t0)
	// The binding goroutine records the attempt just after the API server
	// answered, which may be after the watch showed the pod bound; it
	// counts the attempt, then observes its latency and the pod's, so
	// wait for all three.
	profileLabel := map[string]string{"profile": measureProfile}
	scheduledLabel := map[string]string{"profile": measureProfile, "result": "scheduled"}
	var after []*dto.MetricFamily
	for deadline := time.Now().Add(5 * time.Second); ; {
		if after, err = op.scrape(ctx); err != nil {
			return nil, err
		}
		scheduled := counterDelta(before, after, "scheduler_schedule_attempts_total", profileLabel, "result")["scheduled"]
		attempts := histogramDelta(before, after, "scheduler_scheduling_attempt_duration_seconds", scheduledLabel).summary().Samples
		sli := histogramDelta(before, after, "scheduler_pod_scheduling_sli_duration_seconds", profileLabel).summary().Samples
		if min(scheduled, attempts, sli) >= w.Pods || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	res.MeasuredSeconds = elapsed.Seconds()
	res.FirstBindSeconds = bound.first().Sub(t0).Seconds()
	res.PerSecond = perSecond(<-samples)
	res.Throughput = summarize(res.PerSecond, float64(w.Pods)/elapsed.Seconds())
	if res.BindingCeiling.Average > 0 {
		res.Ratio = res.Throughput.Average / res.BindingCeiling.Average
	}
	res.AttemptLatency = histogramDelta(before, after, "scheduler_scheduling_attempt_duration_seconds", scheduledLabel).summary()
	res.PodSchedulingLatency = histogramDelta(before, after, "scheduler_pod_scheduling_sli_duration_seconds", profileLabel).summary()
	res.Attempts = counterDelta(before, after, "scheduler_schedule_attempts_total", profileLabel, "result")
	res.BatchAttempts = counterDelta(before, after, "scheduler_batch_attempts_total", profileLabel, "result")
	if w.Shadow != "" {
		shadowLabel := map[string]string{"profile": shadowProfile}
		res.ShadowEvaluations = counterDelta(before, after, "scheduler_shadow_evaluations_total", shadowLabel, "result")
		res.ShadowSkipped = counterDelta(before, after, "scheduler_shadow_skipped_pods_total", shadowLabel, "reason")
		o.logf("   shadow: evaluated %v, skipped %v", res.ShadowEvaluations, res.ShadowSkipped)
	}
	if err := h.readMemory(ctx, op, &res.Cost); err != nil {
		return nil, err
	}
	a := res.AttemptLatency
	o.logf("   %.0f pods/s%s, attempt p50 %s ms, p99 %s ms; %s; %s%s",
		res.Throughput.Average, ofCeiling(res.Ratio), a.format(a.Perc50, 1000, "%.1f"), a.format(a.Perc99, 1000, "%.1f"), res.Cost, res.ServerCost,
		batched(res.BatchAttempts))

	if err := h.checkPlacements(ctx); err != nil {
		return nil, err
	}

	if o.Upstream != "" && w.upstreamComparable() {
		// kube-scheduler gets the cluster the operator got: the measured
		// pods go, and the operator stops so that it takes no CPU.
		if err := op.stop(); err != nil {
			return nil, err
		}
		if err := h.cs.CoreV1().Pods(measureNamespace).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			return nil, err
		}
		if w.DRA {
			if err := h.deleteClaims(ctx, measureNamespace); err != nil {
				return nil, err
			}
		}
		if err := h.runUpstream(ctx, res); err != nil {
			return nil, err
		}
		o.logf("   kube-scheduler: %.0f pods/s%s; %s; %s%s", res.Upstream.Average, ofCeiling(res.UpstreamRatio),
			res.UpstreamCost, res.UpstreamServerCost, batched(res.UpstreamBatchAttempts))
	}
	return res, nil
}

// String is the cost on one line, for progress.
func (c Cost) String() string {
	heap := "heap n/a"
	if c.HeapInuseBytes != nil {
		heap = fmt.Sprintf("heap %.0f MiB", mebibytes(*c.HeapInuseBytes))
	}
	return fmt.Sprintf("%.2f CPU-s/1000 pods, RSS %.0f MiB (peak %.0f MiB, file-backed %.0f MiB), %s",
		c.CPUSecondsPer1000Pods, mebibytes(c.RSSBytes), mebibytes(c.PeakRSSBytes), mebibytes(c.RSSFileBytes), heap)
}

// batched is the share of pods that took opportunistic batching's hint,
// for progress; empty when the scheduler never tried.
func batched(attempts map[string]int) string {
	total := 0
	for _, n := range attempts {
		total += n
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("; batching hint used by %d of %d pods", attempts["hint_used"], total)
}

// ofCeiling is a ratio to the ceiling for progress; memory workloads
// measure none.
func ofCeiling(ratio float64) string {
	if ratio == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f%% of the ceiling)", 100*ratio)
}

func mebibytes(b int64) float64 { return float64(b) / (1 << 20) }

// waitBound waits until every measured pod is bound, failing early when
// the scheduler exits.
func (h *harness) waitBound(ctx context.Context, bound *boundCounter, s *schedulerProcess) error {
	select {
	case <-bound.done:
		return nil
	case <-s.Done():
		return s.exitError()
	case <-time.After(h.o.Timeout):
		return fmt.Errorf("workload %s: %s bound %d of %d pods in %v", h.w.Name, s.Name, bound.count(), h.w.Pods, h.o.Timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkPlacements holds the operator to what every workload must end with,
// whatever its speed: every measured pod bound, and bound once (no
// Scheduled events naming two nodes), and no node given more cpu, memory
// or pods than it has allocatable. It reads only what the API server
// shows, so it checks the scheduler rather than trusting it.
func (h *harness) checkPlacements(ctx context.Context) error {
	events, err := h.cs.EventsV1().Events(measureNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := h.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := h.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var measured []corev1.Pod
	var problems []string
	for _, p := range pods.Items {
		if p.Namespace != measureNamespace {
			continue
		}
		measured = append(measured, p)
		if p.Spec.NodeName == "" {
			problems = append(problems, "pod "+p.Name+" is not bound")
		}
	}
	if len(measured) != h.w.Pods {
		problems = append(problems, fmt.Sprintf("%d measured pods, want %d", len(measured), h.w.Pods))
	}
	problems = append(problems, outage.Overcommitted(pods.Items, nodes.Items)...)
	problems = append(problems, outage.ScheduledElsewhere(events.Items, measured)...)
	if len(problems) > 0 {
		return fmt.Errorf("workload %s: %s", h.w.Name, strings.Join(problems, "; "))
	}
	return nil
}

// readMemory fills c with the scheduler's memory at the end of the
// workload; a memory workload first leaves the scheduler idle.
func (h *harness) readMemory(ctx context.Context, s *schedulerProcess, c *Cost) error {
	if h.w.Memory {
		select {
		case <-time.After(steadyState):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !s.Running() {
		return s.exitError()
	}
	var err error
	if c.RSSBytes, c.PeakRSSBytes, c.RSSFileBytes, err = s.memory(); err != nil {
		return err
	}
	c.HeapInuseBytes = s.heapInuse(ctx, h.outFile(s.Name, "heap.pprof"))
	return nil
}

// startCPUProfile has s and kube-apiserver profile themselves for
// Options.CPUProfile, into <workload>.<scheduler>.cpu.pprof and
// <workload>.<scheduler>.kube-apiserver.cpu.pprof beside the logs, and
// reports on the channel when both are written; without the option it
// reports nil at once.
func (h *harness) startCPUProfile(ctx context.Context, s *schedulerProcess) <-chan error {
	done := make(chan error, 1)
	if h.o.CPUProfile <= 0 {
		done <- nil
		return done
	}
	go func() {
		server := make(chan error, 1)
		go func() {
			server <- h.server.cpuProfile(ctx, h.o.CPUProfile, h.outFile(s.Name, "kube-apiserver.cpu.pprof"))
		}()
		done <- errors.Join(s.cpuProfile(ctx, h.o.CPUProfile, h.outFile(s.Name, "cpu.pprof")), <-server)
	}()
	return done
}

// outFile is where a scheduler's file of this workload goes (its log,
// its profiles), ending in ext.
func (h *harness) outFile(scheduler, ext string) string {
	return filepath.Join(h.o.LogDir, strings.ReplaceAll(h.w.Name, "/", "_")+"."+scheduler+"."+ext)
}

// startOperator starts the operator binary as it runs in a cluster, with
// the harness's client limits, plain-HTTP metrics and probes on loopback,
// and no leader election.
func (h *harness) startOperator() (*schedulerProcess, error) {
	metricsAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	probeAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + h.kubeconfig,
		fmt.Sprintf("--kube-api-qps=%g", h.o.QPS),
		fmt.Sprintf("--kube-api-burst=%d", h.o.Burst),
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr,
		// The benchmark installs no admission webhook configuration.
		"--webhook-port=0",
		"--reserved-scheduler-names=" + corev1.DefaultSchedulerName,
		// The Extender workload's extender serves on loopback.
		"--allowed-extender-url-prefixes=http://127.0.0.1:*",
	}, h.w.schedulerArgs()...)
	return startScheduler("profile-scheduler", h.o.Operator, h.outFile("profile-scheduler", "log"), "http://"+metricsAddr+"/metrics", args...)
}

// startShadow creates the workload's shadow of the measured profile and
// waits until the operator runs it, before the measured phase.
func (h *harness) startShadow(ctx context.Context, kc client.Client, op *schedulerProcess) error {
	spec := schedulingv1alpha1.SchedulingProfileSpec{}
	if err := yaml.UnmarshalStrict([]byte(h.w.Shadow), &spec); err != nil {
		return fmt.Errorf("workload %s: shadow: %w", h.w.Name, err)
	}
	spec.ShadowOf = ptr.To(measureProfile)
	sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: shadowProfile}, Spec: spec}
	if err := kc.Create(ctx, sp); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileActive); c != nil && c.Reason == schedulingv1alpha1.ReasonShadowing {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-op.Done():
			return op.exitError()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the shadow profile did not run within 2 minutes; the operator's log is %s", op.Log)
}

// warmUp schedules one pod with a throw-away profile, so the measured phase
// starts with the operator's informers synced and its loop running.
func (h *harness) warmUp(ctx context.Context, kc client.Client, op *schedulerProcess) error {
	if err := kc.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: warmupProfile}}); err != nil {
		return err
	}
	p := basicPod(initNamespace, "warm-up", warmupProfile)
	if _, err := h.cs.CoreV1().Pods(initNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		got, err := h.cs.CoreV1().Pods(initNamespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Spec.NodeName != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-op.Done():
			return op.exitError()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the warm-up pod was not bound within 2 minutes; the operator's log is %s", op.Log)
}

// createPods creates count pods in namespace for the harness's own
// schedulerName, or, when measured, for the measured profile (with the
// workload's pod changes).
func (h *harness) createPods(ctx context.Context, namespace string, count int, measured bool) ([]*corev1.Pod, error) {
	pods := make([]*corev1.Pod, count)
	err := localcluster.Parallel(ctx, count, h.o.Workers, func(ctx context.Context, i int) error {
		schedulerName := unscheduled
		switch namespace {
		case measureNamespace:
			schedulerName = measureProfile
		case upstreamNamespace:
			schedulerName = upstreamProfile
		}
		p := basicPod(namespace, fmt.Sprintf("pod-%d", i), schedulerName)
		if measured && h.w.Pod != nil {
			h.w.Pod(p)
		}
		if measured && h.w.Gang > 0 {
			p.Labels[podgroupv1alpha1.PodGroupLabel] = gangOf(i, h.w.Gang)
		}
		if measured {
			h.w.inPodGroup(p, i)
		}
		created, err := h.cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", namespace, p.Name, err)
		}
		pods[i] = created
		return nil
	})
	return pods, err
}

// createPodGroups creates the PodGroups of the measured pods, each needing
// all its members.
func (h *harness) createPodGroups(ctx context.Context, kc client.Client) error {
	gangs := (h.w.Pods + h.w.Gang - 1) / h.w.Gang
	return localcluster.Parallel(ctx, gangs, h.o.Workers, func(ctx context.Context, i int) error {
		members := min(h.w.Gang, h.w.Pods-i*h.w.Gang)
		return kc.Create(ctx, &podgroupv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: measureNamespace, Name: gangOf(i*h.w.Gang, h.w.Gang)},
			Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: int32(members)},
		})
	})
}

// bindPods binds pods round-robin to the nodes from the harness's workers.
func (h *harness) bindPods(ctx context.Context, pods []*corev1.Pod) error {
	return localcluster.Parallel(ctx, len(pods), h.o.Workers, func(ctx context.Context, i int) error {
		p := pods[i]
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: h.nodes[i%len(h.nodes)]},
		}
		if err := h.cs.CoreV1().Pods(p.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("binding %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	})
}

// measureCeiling binds pods from the harness's workers and measures the
// rate as the operator's is measured: pods seen bound by a watch.
func (h *harness) measureCeiling(ctx context.Context, pods []*corev1.Pod) (Summary, *ServerCost, error) {
	bound := &boundCounter{done: make(chan struct{}), total: int64(len(pods))}
	stopWatch, err := h.watchBound(ctx, ceilingNamespace, bound)
	if err != nil {
		return Summary{}, nil, err
	}
	defer stopWatch()
	mark := h.server.mark(ctx)
	t0 := time.Now()
	samples := sampleEverySecond(bound.done, bound.count)
	if err := h.bindPods(ctx, pods); err != nil {
		return Summary{}, nil, err
	}
	select {
	case <-bound.done:
	case <-time.After(h.o.Timeout):
		return Summary{}, nil, fmt.Errorf("the watch showed %d of %d pods bound after %v", bound.count(), len(pods), h.o.Timeout)
	case <-ctx.Done():
		return Summary{}, nil, ctx.Err()
	}
	server, err := h.server.since(ctx, mark, len(pods), len(pods))
	if err != nil {
		return Summary{}, nil, err
	}
	return summarize(perSecond(<-samples), float64(len(pods))/bound.last().Sub(t0).Seconds()), server, nil
}

// boundCounter counts measured pods seen bound, with the first and last
// times.
type boundCounter struct {
	mu            sync.Mutex
	n, total      int64
	tFirst, tLast time.Time
	done          chan struct{}
	// onFirst, when set, runs as the first pod is seen bound.
	onFirst func()
}

func (b *boundCounter) add() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.n == 0 {
		b.tFirst = now
		if b.onFirst != nil {
			b.onFirst()
		}
	}
	b.n++
	b.tLast = now
	if b.n == b.total {
		close(b.done)
	}
}

func (b *boundCounter) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.n)
}

func (b *boundCounter) first() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tFirst
}

func (b *boundCounter) last() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tLast
}

// watchBound counts the pods of namespace as the watch shows them bound.
func (h *harness) watchBound(ctx context.Context, namespace string, b *boundCounter) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(h.cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				b.add()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			n, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && o.Spec.NodeName == "" && n.Spec.NodeName != "" {
				b.add()
			}
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return func() { cancel(); factory.Shutdown() }, nil
}

// startApprover approves every WaitingPod of the measured namespace as it
// appears, as an automated approver (a policy engine, a quota service)
// would, with the harness's workers.
func (h *harness) startApprover(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	c, err := ctrlcache.New(h.cfg, ctrlcache.Options{
		Scheme:            localcluster.Scheme(),
		DefaultNamespaces: map[string]ctrlcache.Config{measureNamespace: {}},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	kc, err := client.New(h.cfg, client.Options{Scheme: localcluster.Scheme()})
	if err != nil {
		cancel()
		return nil, err
	}
	names := make(chan types.NamespacedName, h.w.Pods)
	inf, err := c.GetInformer(ctx, &schedulingv1alpha1.WaitingPod{})
	if err != nil {
		cancel()
		return nil, err
	}
	enqueue := func(obj any) {
		if wp, ok := obj.(*schedulingv1alpha1.WaitingPod); ok && wp.Spec.Decision == "" {
			select {
			case names <- types.NamespacedName{Namespace: wp.Namespace, Name: wp.Name}:
			default:
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue}); err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Start(ctx) })
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"decision":"Approve","decidedBy":"perf-approver","reason":"benchmark"}}`))
	for range h.o.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-names:
					wp := &schedulingv1alpha1.WaitingPod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
					if err := kc.Patch(ctx, wp, patch); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
						h.o.logf("approving %s: %v", key, err)
					}
				}
			}
		})
	}
	return func() { cancel(); wg.Wait() }, nil
}

// sampleEverySecond records count() once a second until done is closed,
// then sends the readings. The last, partial second is not recorded.
func sampleEverySecond(done <-chan struct{}, count func() int) <-chan []int {
	out := make(chan []int, 1)
	go func() {
		var readings []int
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- readings
				return
			case <-tick.C:
				readings = append(readings, count())
			}
		}
	}()
	return out
}

// histogramDelta sums the series of the named histogram whose labels
// include match, after less before.
func histogramDelta(before, after []*dto.MetricFamily, name string, match map[string]string) histogram {
	sum := func(families []*dto.MetricFamily) histogram {
		var total histogram
		for _, m := range series(families, name, match) {
			h := histogramOf(m.GetHistogram())
			if total.bounds == nil {
				total = h
				continue
			}
			total.count += h.count
			total.sum += h.sum
			for i := range total.counts {
				total.counts[i] += h.counts[i]
			}
		}
		return total
	}
	return sum(after).minus(sum(before))
}

// counterDelta returns the named counter's increase by the value of label.
func counterDelta(before, after []*dto.MetricFamily, name string, match map[string]string, label string) map[string]int {
	out := map[string]int{}
	for _, m := range series(after, name, match) {
		out[labelValue(m, label)] += int(m.GetCounter().GetValue())
	}
	for _, m := range series(before, name, match) {
		out[labelValue(m, label)] -= int(m.GetCounter().GetValue())
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

func series(families []*dto.MetricFamily, name string, match map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			ok := true
			for k, v := range match {
				if labelValue(m, k) != v {
					ok = false
				}
			}
			if ok {
				out = append(out, m)
			}
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
