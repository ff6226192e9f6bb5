// Command failover measures how long the operator stops scheduling when
// its leader dies, against a real API server: it starts kube-apiserver and
// etcd on loopback, simulated nodes, a SchedulingProfile and two replicas
// of the real operator binary with leader election, creates pods at a
// steady rate, and then, again and again, kills the leading replica with
// SIGKILL (no Lease release, as when a node or the process crashes) and
// watches the new leader take over.
//
// For each failover it records, from the moment of the SIGKILL (T0):
//
//   - T0 to the Lease's acquireTime as written by the new holder: the
//     leader election part, bounded below by the lease duration since the
//     dead leader's last renewal;
//   - acquireTime to the first pod seen bound after it: what the new
//     leader needs before it schedules (informer sync when standbys are
//     cold, nearly nothing when they are warm);
//   - T0 to that first binding: the outage as a user of the scheduler sees it.
//
// A binding counts as the new leader's only if the watch shows it after the
// new holder's acquireTime: binding requests the dead leader sent just
// before SIGKILL may still complete, and show on the watch, after T0, but
// not a whole lease duration after its last renewal, which is the earliest
// a standby may acquire the Lease; and from acquireTime on, the new holder
// is the only replica that schedules. After each failover it
// restarts the killed replica, so there are always two, waits until every
// pod created before the failover is bound, and checks that no pod was
// bound twice (no nodeName ever changed on the watch, no pod has Scheduled
// events naming two nodes) and that no node is overcommitted in cpu,
// memory or pod count. It prints a table and writes the figures as JSON.
//
//	go run ./test/failover --failovers=10 --out=bin/failover   # what make bench-failover runs
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

// Results is the JSON the benchmark writes.
type Results struct {
	Time    time.Time       `json:"time"`
	Machine testenv.Machine `json:"machine"`
	// LoadBefore and LoadAfter are the machine's load averages (1, 5, 15
	// minutes) around the run: on a shared machine, other work shows here.
	LoadBefore string `json:"loadAverageBefore,omitempty"`
	LoadAfter  string `json:"loadAverageAfter,omitempty"`
	// The replicas' leader election settings, in seconds.
	LeaseDuration float64    `json:"leaseDurationSeconds"`
	RenewDeadline float64    `json:"renewDeadlineSeconds"`
	RetryPeriod   float64    `json:"retryPeriodSeconds"`
	Nodes         int        `json:"nodes"`
	Rate          float64    `json:"podsPerSecond"`
	Failovers     []Failover `json:"failovers"`
	// Distributions over the failovers of the three figures.
	DeathToFirstBind    Distribution `json:"deathToFirstBind"`
	DeathToAcquired     Distribution `json:"deathToLeaseAcquired"`
	AcquiredToFirstBind Distribution `json:"leaseAcquiredToFirstBind"`
	PodsCreated         int          `json:"podsCreated"`
	PodsBound           int          `json:"podsBound"`
	// UnplannedRestarts counts replicas that exited without being killed,
	// such as a leader that could not renew its Lease in time.
	UnplannedRestarts int `json:"unplannedRestarts"`
}

func main() {
	var (
		o   Options
		out string
	)
	flag.IntVar(&o.Failovers, "failovers", 10, "How many times to kill the leader.")
	flag.IntVar(&o.Nodes, "nodes", 100, "Simulated nodes (4 cpu, 32Gi, 110 pods each).")
	flag.Float64Var(&o.Rate, "rate", 10, "Pods created per second, throughout the run.")
	flag.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "Replicas' lease duration (kube-scheduler's default).")
	flag.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "Replicas' renew deadline (kube-scheduler's default).")
	flag.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "Replicas' retry period (kube-scheduler's default).")
	flag.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "Longest wait for each step of a failover: a steady leader, the new leader's first binding, the backlog bound.")
	flag.DurationVar(&o.Grace, "grace", 5*time.Second, "Age from which the checks require a pod bound.")
	flag.StringVar(&out, "out", "", "Directory to write results.json and the replicas' logs into (default: a temporary directory, removed at the end).")
	flag.Parse()
	// Errors only, from the API server's environment and the watch.
	logger := zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, out, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		stop()
		os.Exit(1)
	}
}

// run runs the benchmark, prints its table to stdout and, with outDir,
// writes results.json and keeps the replicas' logs there.
func run(ctx context.Context, o Options, outDir string, stdout, progress io.Writer) error {
	o.Progress = progress
	if outDir == "" {
		dir, err := os.MkdirTemp("", "failover-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		o.Dir = dir
	} else {
		dir, err := filepath.Abs(outDir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		o.Dir = dir
	}
	report := Results{
		Time: time.Now().UTC(), Machine: testenv.ThisMachine(), LoadBefore: testenv.LoadAverage(),
		LeaseDuration: o.LeaseDuration.Seconds(), RenewDeadline: o.RenewDeadline.Seconds(), RetryPeriod: o.RetryPeriod.Seconds(),
		Nodes: o.Nodes, Rate: o.Rate,
	}
	res, err := runFailovers(ctx, o)
	if err != nil {
		return err
	}
	report.LoadAfter = testenv.LoadAverage()
	report.Failovers, report.PodsCreated, report.PodsBound, report.UnplannedRestarts = res.Failovers, res.PodsCreated, res.PodsBound, res.UnplannedRestarts
	var total, election, start []float64
	for _, f := range res.Failovers {
		total = append(total, f.DeathToFirstBind)
		election = append(election, f.DeathToAcquired)
		start = append(start, f.AcquiredToFirstBind)
	}
	report.DeathToFirstBind, report.DeathToAcquired, report.AcquiredToFirstBind = distribution(total), distribution(election), distribution(start)
	printTable(stdout, &report)
	if outDir == "" {
		return nil
	}
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(o.Dir, "results.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\nJSON: %s\n", path)
	return err
}

func printTable(w io.Writer, r *Results) {
	m := r.Machine
	fmt.Fprintf(w, "\n%d CPUs (%s), %s, kube-apiserver v%s, load average %s before, %s after\n",
		m.CPUs, m.CPUModel, m.GoVersion, m.KubernetesVersion, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(w, "lease duration %gs, renew deadline %gs, retry period %gs; %d nodes, %g pods/s; %d pods created, %d bound; %d unplanned restarts\n\n",
		r.LeaseDuration, r.RenewDeadline, r.RetryPeriod, r.Nodes, r.Rate, r.PodsCreated, r.PodsBound, r.UnplannedRestarts)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "failover\tdeath→lease acquired s\tacquired→first bind s\tdeath→first bind s\tdeath→backlog bound s\t")
	for i, f := range r.Failovers {
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t%.3f\t\n", i+1, f.DeathToAcquired, f.AcquiredToFirstBind, f.DeathToFirstBind, f.Drain)
	}
	for _, row := range []struct {
		name string
		pick func(Distribution) float64
	}{
		{"p50", func(d Distribution) float64 { return d.Perc50 }},
		{"p99", func(d Distribution) float64 { return d.Perc99 }},
		{"max", func(d Distribution) float64 { return d.Max }},
	} {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t\t\n", row.name, row.pick(r.DeathToAcquired), row.pick(r.AcquiredToFirstBind), row.pick(r.DeathToFirstBind))
	}
	_ = tw.Flush()
}
