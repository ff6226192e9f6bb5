package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// TestHarness runs the benchmark harness on tiny workloads, so that it
// keeps working; the benchmark itself is make bench.
func TestHarness(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "benchmark harness smoke suite")
}

var _ = BeforeSuite(func() {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.Level(zapcore.ErrorLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
})

var _ = Describe("The benchmark harness", func() {

	It("measures throughput, the binding ceiling, latency, CPU and memory of a basic, an approval, a gang and an extender workload, and writes them", func() {
		workloads, err := selectWorkloads("SchedulingBasic/500Nodes,ManualApproval/500Nodes,Gangs/500Nodes,Extender/500Nodes", 50)
		Expect(err).NotTo(HaveOccurred())
		Expect(workloads).To(HaveLen(4))
		Expect(workloads[0].Nodes).To(Equal(10))

		dir := GinkgoT().TempDir()
		var table bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(run(ctx, workloads, Options{
			QPS: 5000, Burst: 5000, Workers: 8, Timeout: 2 * time.Minute, Progress: GinkgoWriter,
			CRDDir: filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		}, dir, &table)).To(Succeed())
		GinkgoWriter.Println(table.String())
		Expect(table.String()).To(ContainSubstring("ceiling pods/s"))
		Expect(table.String()).To(ContainSubstring("ManualApproval/500Nodes"))
		Expect(table.String()).To(ContainSubstring("Gangs/500Nodes"))
		Expect(table.String()).To(ContainSubstring("Extender/500Nodes"))
		Expect(table.String()).To(ContainSubstring("CPU-s/1000 pods"))
		// The operator ran as its own process and logged to the out dir.
		Expect(filepath.Join(dir, "profile-scheduler")).To(BeAnExistingFile())
		Expect(filepath.Join(dir, "SchedulingBasic_500Nodes.profile-scheduler.log")).To(BeAnExistingFile())

		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		Expect(err).NotTo(HaveOccurred())
		var report Results
		Expect(json.Unmarshal(data, &report)).To(Succeed())
		Expect(report.Machine.CPUs).To(BeNumerically(">", 0))
		Expect(report.Workloads).To(HaveLen(4))
		for _, res := range report.Workloads {
			Expect(res.Throughput.Average).To(BeNumerically(">", 0), res.Name)
			Expect(res.BindingCeiling.Average).To(BeNumerically(">", 0), res.Name)
			Expect(res.Ratio).To(BeNumerically("~", res.Throughput.Average/res.BindingCeiling.Average, 1e-9), res.Name)
			Expect(res.Attempts).To(HaveKeyWithValue("scheduled", res.Pods), res.Name)
			Expect(res.AttemptLatency.Samples).To(Equal(res.Pods), res.Name)
			Expect(res.AttemptLatency.Perc50).To(BeNumerically(">", 0), res.Name)
			Expect(res.AttemptLatency.Perc99).To(BeNumerically(">=", res.AttemptLatency.Perc50), res.Name)
			Expect(res.PodSchedulingLatency.Samples).To(Equal(res.Pods), res.Name)
			expectCost(res.Cost, res.Name)
			Expect(res.UpstreamCost).To(BeNil(), res.Name)
			// The ceiling writes bindings only; a scheduler a binding and
			// a Scheduled event per pod (events go out asynchronously,
			// some after the phase), and an approval workload a
			// WaitingPod and its decision besides.
			expectServerCost(res.CeilingServerCost, res.Name+" ceiling")
			Expect(res.CeilingServerCost.WritesPerPod).To(Equal(map[string]float64{"POST pods/binding": 1}), res.Name)
			expectServerCost(res.ServerCost, res.Name)
			Expect(res.ServerCost.WritesPerPod).To(HaveKeyWithValue("POST events", BeNumerically(">", 0)), res.Name)
			if res.Name == "ManualApproval/500Nodes" {
				Expect(res.ServerCost.WritesPerPod).To(HaveKeyWithValue("POST waitingpods", BeNumerically("~", 1, 1e-9)))
				Expect(res.ServerCost.WritesPerPod).To(HaveKeyWithValue("PATCH waitingpods", BeNumerically("~", 1, 1e-9)))
				// The pod's WaitingAtPermit condition: one apply per hold and
				// one per release at most, fewer when the queue coalesces them.
				Expect(res.ServerCost.WritesPerPod["APPLY pods/status"]).To(BeNumerically("<=", 2))
			}
			Expect(res.UpstreamServerCost).To(BeNil(), res.Name)
		}
	})

	It("measures upstream kube-scheduler on the same API server when it is built", func() {
		assets, err := testenv.AssetsDir()
		Expect(err).NotTo(HaveOccurred())
		upstream := filepath.Join(assets, "kube-scheduler")
		if _, err := os.Stat(upstream); err != nil {
			Skip("kube-scheduler is not built (WANT=kube-scheduler hack/build-control-plane.sh)")
		}
		// Enough pods that kube-scheduler's CPU time for them spans
		// several clock ticks of /proc.
		workloads, err := selectWorkloads("NodeAffinity/500Nodes", 20)
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		var table bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(run(ctx, workloads, Options{
			QPS: 5000, Burst: 5000, Workers: 8, Timeout: 2 * time.Minute, Progress: GinkgoWriter, Upstream: upstream,
			CRDDir: filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		}, dir, &table)).To(Succeed())
		GinkgoWriter.Println(table.String())
		// The last two columns: kube-scheduler's pods/s and its ratio to the
		// ceiling (with 20 pods, the watch may show them bound in a burst).
		Expect(table.String()).To(MatchRegexp(`NodeAffinity/500Nodes\s.*\s\d+\s+\d+\.\d\d\s*\n`))

		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		Expect(err).NotTo(HaveOccurred())
		var report Results
		Expect(json.Unmarshal(data, &report)).To(Succeed())
		Expect(report.Workloads).To(HaveLen(1))
		res := report.Workloads[0]
		expectCost(res.Cost, "operator")
		Expect(res.UpstreamCost).NotTo(BeNil())
		expectCost(*res.UpstreamCost, "kube-scheduler")
		expectServerCost(res.ServerCost, "operator")
		expectServerCost(res.UpstreamServerCost, "kube-scheduler")
		Expect(res.UpstreamServerCost.WritesPerPod).To(HaveKeyWithValue("POST events", BeNumerically(">", 0)))
	})

	It("runs identical pods with opportunistic batching and without, in both schedulers", func() {
		workloads, err := selectWorkloads("IdenticalPods/5000Nodes,IdenticalPods/5000Nodes_NoBatching", 100)
		Expect(err).NotTo(HaveOccurred())
		o := Options{
			QPS: 5000, Burst: 5000, Workers: 8, Timeout: 2 * time.Minute, Progress: GinkgoWriter,
			CRDDir: filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		}
		assets, err := testenv.AssetsDir()
		Expect(err).NotTo(HaveOccurred())
		// kube-scheduler too, when it is built.
		upstream := filepath.Join(assets, "kube-scheduler")
		if _, err := os.Stat(upstream); err == nil {
			o.Upstream = upstream
		}
		dir := GinkgoT().TempDir()
		var table bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(run(ctx, workloads, o, dir, &table)).To(Succeed())
		GinkgoWriter.Println(table.String())

		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		Expect(err).NotTo(HaveOccurred())
		var report Results
		Expect(json.Unmarshal(data, &report)).To(Succeed())
		Expect(report.Workloads).To(HaveLen(2))
		batched, unbatched := report.Workloads[0], report.Workloads[1]
		// A run of identical pods under a profile that signs them: nearly
		// every pod takes the hint of the cycle before, unless the gate is
		// off.
		Expect(batched.BatchAttempts).To(HaveKeyWithValue("hint_used", BeNumerically(">", batched.Pods/2)))
		Expect(unbatched.BatchAttempts).NotTo(HaveKey("hint_used"))
		if o.Upstream != "" {
			Expect(batched.UpstreamBatchAttempts).To(HaveKeyWithValue("hint_used", BeNumerically(">", batched.Pods/2)))
			Expect(unbatched.UpstreamBatchAttempts).NotTo(HaveKey("hint_used"))
		}
	})

	It("measures a DRA workload beside kube-scheduler, each finding every simulated GPU free", func() {
		assets, err := testenv.AssetsDir()
		Expect(err).NotTo(HaveOccurred())
		upstream := filepath.Join(assets, "kube-scheduler")
		if _, err := os.Stat(upstream); err != nil {
			Skip("kube-scheduler is not built (WANT=kube-scheduler hack/build-control-plane.sh)")
		}
		// 20 nodes, 10 of them with 4 GPUs, and 32 pods of one GPU each:
		// kube-scheduler places its 32 only if the operator's claims
		// gave their devices back.
		workloads, err := selectWorkloads("DRA/500Nodes", 25)
		Expect(err).NotTo(HaveOccurred())
		Expect(workloads[0].Pods).To(Equal(32))
		dir := GinkgoT().TempDir()
		var table bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(run(ctx, workloads, Options{
			QPS: 5000, Burst: 5000, Workers: 8, Timeout: 2 * time.Minute, Progress: GinkgoWriter, Upstream: upstream,
			CRDDir: filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		}, dir, &table)).To(Succeed())
		GinkgoWriter.Println(table.String())

		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		Expect(err).NotTo(HaveOccurred())
		var report Results
		Expect(json.Unmarshal(data, &report)).To(Succeed())
		res := report.Workloads[0]
		Expect(res.Attempts).To(HaveKeyWithValue("scheduled", res.Pods))
		expectCost(res.Cost, "operator")
		Expect(res.UpstreamCost).NotTo(BeNil())
		expectCost(*res.UpstreamCost, "kube-scheduler")
		// Every claim was made before its phase's clock started: the
		// phases measure the binder and the schedulers, not the resource
		// claim controller.
		for phase, cost := range map[string]*ServerCost{
			"ceiling": res.CeilingServerCost, "operator": res.ServerCost, "kube-scheduler": res.UpstreamServerCost,
		} {
			expectServerCost(cost, phase)
			Expect(cost.WritesPerPod).NotTo(HaveKey("POST resourceclaims"), phase)
		}
	})
})

// expectCost checks that every figure of a scheduler's cost was measured.
func expectCost(c Cost, who string) {
	GinkgoHelper()
	Expect(c.CPUSecondsPer1000Pods).To(BeNumerically(">", 0), who)
	Expect(c.RSSBytes).To(BeNumerically(">", 0), who)
	Expect(c.PeakRSSBytes).To(BeNumerically(">=", c.RSSBytes), who)
	Expect(c.HeapInuseBytes).NotTo(BeNil(), who)
	Expect(*c.HeapInuseBytes).To(BeNumerically(">", 0), who)
}

// expectServerCost checks what the API server and etcd spent on a phase:
// every pod bound once, and CPU time read (with a handful of pods a phase
// may take less than a clock tick of /proc).
func expectServerCost(c *ServerCost, phase string) {
	GinkgoHelper()
	Expect(c).NotTo(BeNil(), phase)
	Expect(c.CPUSecondsPer1000Pods).To(BeNumerically(">=", 0), phase)
	Expect(c.WritesPerPod).To(HaveKeyWithValue("POST pods/binding", BeNumerically("~", 1, 1e-9)), phase)
}
