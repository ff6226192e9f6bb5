// Command perf benchmarks the operator's scheduling against a real API
// server, in the manner of upstream's scheduler_perf: for each workload it
// starts kube-apiserver and etcd on loopback, creates simulated nodes and
// pods already placed, measures the rate at which the harness alone can
// bind the workload's pods (the ceiling of this API server on this
// machine), then runs the operator in this process and measures how fast it
// schedules the same number of pods. It prints a table and writes the
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

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// operatorLogLevel is the level of the operator's logs; Run silences them
// while it stops an operator, whose requests then fail by design.
var operatorLogLevel = uberzap.NewAtomicLevelAt(zapcore.ErrorLevel)

// Results is the JSON the harness writes.
type Results struct {
	Time    time.Time       `json:"time"`
	Machine testenv.Machine `json:"machine"`
	// QPS and Burst are the client limits of the operator and the binder.
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
	)
	flag.StringVar(&workloads, "workloads", "default", "Comma-separated workloads, or default, or all: "+workloadNames()+".")
	flag.StringVar(&out, "out", "", "Directory to write results.json into (default: print only).")
	flag.Float64Var(&qps, "kube-api-qps", 5000, "Client QPS of the operator and of the harness's binder (scheduler_perf raises it to 5000).")
	flag.IntVar(&burst, "kube-api-burst", 5000, "Client burst of the operator and of the harness's binder.")
	flag.IntVar(&workers, "workers", 32, "Goroutines the harness creates and binds pods with.")
	flag.IntVar(&scale, "scale-down", 1, "Divide node and pod counts by this, for a quick look.")
	flag.DurationVar(&timeout, "timeout", 10*time.Minute, "Longest the measured phase of one workload may take.")
	flag.BoolVar(&upstream, "upstream", false, "Also measure upstream kube-scheduler on the same API server (build it with WANT=kube-scheduler hack/build-control-plane.sh).")
	// The operator's own logs: errors only, unless asked; none once a
	// workload's figures are taken and its operator is being stopped.
	zapOpts := zap.Options{Level: operatorLogLevel}
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
			QPS: float32(qps), Burst: burst, Workers: workers, Timeout: timeout, Progress: os.Stderr,
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

func run(ctx context.Context, workloads []Workload, o Options, outDir string, stdout io.Writer) error {
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
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
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
		upstream, upstreamRatio := "-", "-"
		if res.Upstream != nil {
			upstream, upstreamRatio = fmt.Sprintf("%.0f", res.Upstream.Average), fmt.Sprintf("%.2f", res.UpstreamRatio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n",
			res.Name, res.Nodes, res.Pods, t.Average, t.Perc50, t.Perc90, t.Perc99,
			res.BindingCeiling.Average, res.Ratio, 1000*a.Perc50, 1000*a.Perc90, 1000*a.Perc99, upstream, upstreamRatio)
	}
	_ = tw.Flush()
}
