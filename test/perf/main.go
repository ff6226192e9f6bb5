// Command perf benchmarks the operator's scheduling against a real API
// server, in the manner of upstream's scheduler_perf: for each workload it
// starts kube-apiserver and etcd on loopback, creates simulated nodes and
// pods already placed, measures the rate at which the harness alone can
// bind the workload's pods (the ceiling of this API server on this
// machine), then runs the operator binary as its own process, as it runs
// in a cluster, and measures how fast it schedules the same number of pods
// and what that costs it: CPU time per pod from /proc, peak RSS, and heap
// in use from its /metrics. With --upstream, kube-scheduler is measured
// the same way on the same API server. A memory workload measures both at
// rest in a large cluster instead. It prints a table and writes the
// figures as JSON. See docs/performance.md.
//
//	go run ./test/perf --workloads=default --out=bin/perf   # what make bench runs
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Results is the JSON the harness writes.
type Results struct {
	Time    time.Time       `json:"time"`
	Machine testenv.Machine `json:"machine"`
	// QPS and Burst are the client limits of the schedulers and the binder.
	QPS     float32 `json:"kubeAPIQPS"`
	Burst   int     `json:"kubeAPIBurst"`
	Workers int     `json:"harnessWorkers"`
	// LoadBefore and LoadAfter are the machine's load averages (1, 5, 15
	// minutes) around the run: on a shared machine, other work shows here.
	LoadBefore string   `json:"loadAverageBefore,omitempty"`
	LoadAfter  string   `json:"loadAverageAfter,omitempty"`
	Workloads  []Result `json:"workloads"`
}

func main() {
	var (
		workloads string
		out       string
		qps       float64
		burst     int
		workers   int
		scale     int
		timeout   time.Duration
		upstream  bool
		profile   time.Duration
	)
	flag.StringVar(&workloads, "workloads", "default", "Comma-separated workloads, or default, or all: "+workloadNames()+".")
	flag.StringVar(&out, "out", "", "Directory to write results.json, the operator binary, the schedulers' logs and their heap profiles at the end of each workload into (default: a temporary directory, removed after a successful run).")
	flag.Float64Var(&qps, "kube-api-qps", 5000, "Client QPS of the schedulers (operator and kube-scheduler) and of the harness's binder (scheduler_perf raises it to 5000).")
	flag.IntVar(&burst, "kube-api-burst", 5000, "Client burst of the schedulers and of the harness's binder.")
	flag.IntVar(&workers, "workers", 32, "Goroutines the harness creates and binds pods with.")
	flag.IntVar(&scale, "scale-down", 1, "Divide node and pod counts by this, for a quick look.")
	flag.DurationVar(&timeout, "timeout", 10*time.Minute, "Longest the measured phase of one workload may take.")
	flag.BoolVar(&upstream, "upstream", false, "Also measure upstream kube-scheduler on the same API server, as its own process like the operator (build it with WANT=kube-scheduler hack/build-control-plane.sh).")
	flag.DurationVar(&profile, "cpu-profile", 0, "Take a CPU profile of this long from each scheduler (its /debug/pprof/profile) at the start of each measured phase, into <out>/<workload>.<scheduler>.cpu.pprof; 0 takes none.")
	// The harness's own logs (its clients'): errors only, unless asked.
	// The schedulers log to files beside results.json.
	zapOpts := zap.Options{Level: zapcore.ErrorLevel}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	selected, err := selectWorkloads(workloads, scale)
	if err == nil {
		o := Options{
			QPS: float32(qps), Burst: burst, Workers: workers, Timeout: timeout, Progress: os.Stderr, CPUProfile: profile,
			CRDDir: filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		}
		if upstream {
			o.Upstream = "kube-scheduler"
		}
		err = run(ctx, selected, o, out, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

// run runs the workloads and reports them. Unless o names them, the
// operator binary is built and the logs written into outDir, or into a
// temporary directory that a successful run removes.
func run(ctx context.Context, workloads []Workload, o Options, outDir string, stdout io.Writer) (err error) {
	dir := outDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "perf-"); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				err = os.RemoveAll(dir)
			}
		}()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if o.LogDir == "" {
		o.LogDir = dir
	}
	if o.Operator == "" {
		o.logf("building the operator")
		if o.Operator, err = testenv.BuildOperator(ctx, dir); err != nil {
			return err
		}
	}
	if o.AssetsDir == "" {
		dir, err := testenv.AssetsDir()
		if err != nil {
			return err
		}
		o.AssetsDir = dir
	}
	if o.Upstream != "" && !filepath.IsAbs(o.Upstream) {
		o.Upstream = filepath.Join(o.AssetsDir, o.Upstream)
		if _, err := os.Stat(o.Upstream); err != nil {
			return fmt.Errorf("no kube-scheduler in %s: build it with WANT=kube-scheduler hack/build-control-plane.sh", o.AssetsDir)
		}
	}
	report := Results{Time: time.Now().UTC(), Machine: testenv.ThisMachine(), QPS: o.QPS, Burst: o.Burst, Workers: o.Workers, LoadBefore: testenv.LoadAverage()}
	for _, w := range workloads {
		res, err := Run(ctx, o, w)
		if err != nil {
			return err
		}
		report.Workloads = append(report.Workloads, *res)
	}
	report.LoadAfter = testenv.LoadAverage()
	printTable(stdout, &report)
	if outDir == "" {
		return nil
	}
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(outDir, "results.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nJSON: %s\n", path)
	return err
}

func printTable(w io.Writer, r *Results) {
	m := r.Machine
	fmt.Fprintf(w, "\n%d CPUs (%s), %s, kube-apiserver v%s, client QPS %g burst %d, load average %s before, %s after\n\n",
		m.CPUs, m.CPUModel, m.GoVersion, m.KubernetesVersion, r.QPS, r.Burst, r.LoadBefore, r.LoadAfter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tnodes\tpods\tpods/s avg\tp50\tp90\tp99\tceiling pods/s\tratio\tattempt p50 ms\tp90 ms\tp99 ms\tkube-scheduler pods/s\tratio\t")
	for _, res := range r.Workloads {
		t, a := res.Throughput, res.AttemptLatency
		ceiling, ratio := "-", "-"
		if res.BindingCeiling.Average > 0 {
			ceiling, ratio = fmt.Sprintf("%.0f", res.BindingCeiling.Average), fmt.Sprintf("%.2f", res.Ratio)
		}
		upstream, upstreamRatio := "-", "-"
		if res.Upstream != nil {
			upstream = fmt.Sprintf("%.0f", res.Upstream.Average)
			if res.BindingCeiling.Average > 0 {
				upstreamRatio = fmt.Sprintf("%.2f", res.UpstreamRatio)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			res.Name, res.Nodes, res.Pods, t.Average, t.Perc50, t.Perc90, t.Perc99, ceiling, ratio,
			a.format(a.Perc50, 1000, "%.2f"), a.format(a.Perc90, 1000, "%.2f"), a.format(a.Perc99, 1000, "%.2f"), upstream, upstreamRatio)
	}
	_ = tw.Flush()

	// What each process spent: CPU over the measured phase, memory at the
	// end of the workload.
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tCPU-s/1000 pods\tRSS MiB\tpeak RSS MiB\theap MiB\tkube-scheduler CPU-s/1000 pods\tRSS MiB\tpeak RSS MiB\theap MiB\t")
	for _, res := range r.Workloads {
		upstream := "-\t-\t-\t-"
		if res.UpstreamCost != nil {
			upstream = costColumns(*res.UpstreamCost)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", res.Name, costColumns(res.Cost), upstream)
	}
	_ = tw.Flush()

	// What the API server and etcd spent on each phase: on this machine
	// they share the cores with the scheduler.
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tAPI server+etcd CPU-s/1000 pods: ceiling\tprofile-scheduler\tkube-scheduler\twrites/pod: ceiling\tprofile-scheduler\tkube-scheduler\t")
	for _, res := range r.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", res.Name,
			serverCPU(res.CeilingServerCost), serverCPU(res.ServerCost), serverCPU(res.UpstreamServerCost),
			serverWrites(res.CeilingServerCost), serverWrites(res.ServerCost), serverWrites(res.UpstreamServerCost))
	}
	_ = tw.Flush()
}

func serverCPU(c *ServerCost) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", c.CPUSecondsPer1000Pods)
}

func serverWrites(c *ServerCost) string {
	if c == nil {
		return "-"
	}
	total := 0.0
	for _, n := range c.WritesPerPod {
		total += n
	}
	return fmt.Sprintf("%.2f", total)
}

func costColumns(c Cost) string {
	heap := "n/a"
	if c.HeapInuseBytes != nil {
		heap = fmt.Sprintf("%.0f", mebibytes(*c.HeapInuseBytes))
	}
	return fmt.Sprintf("%.2f\t%.0f\t%.0f\t%s", c.CPUSecondsPer1000Pods, mebibytes(c.RSSBytes), mebibytes(c.PeakRSSBytes), heap)
}
