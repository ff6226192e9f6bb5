// Command profile-scheduler runs the operator: the controllers that turn
// SchedulingProfiles into live scheduling-framework instances and mirror pods
// held at Permit as WaitingPods, and the scheduling loop that uses them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
}

// options are the operator's command-line settings.
type options struct {
	metricsAddr             string
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	qps                     float64
	burst                   int
	// percentageOfNodesToScore and parallelism are kube-scheduler's
	// settings of the same names, for the whole scheduling loop.
	percentageOfNodesToScore int
	parallelism              int
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint listens on; 0 disables it.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the liveness and readiness probes listen on.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader with a Lease so that only one replica schedules.")
	flag.StringVar(&o.leaderElectionID, "leader-election-id", "profile-scheduler.scheduling.schedprofiles.io", "Name of the leader election Lease.")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the operator's own namespace.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Queries per second to the API server, as kube-scheduler's clientConnection.qps.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the API server, as kube-scheduler's clientConnection.burst.")
	flag.IntVar(&o.percentageOfNodesToScore, "percentage-of-nodes-to-score", 0, "Share of the nodes to find feasible before scoring, for profiles that set none; 0 means adaptive, as kube-scheduler's percentageOfNodesToScore.")
	flag.IntVar(&o.parallelism, "parallelism", 0, "Goroutines used to filter and score nodes; 0 means one per CPU.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	setupLog := ctrl.Log.WithName("setup")

	if err := run(o); err != nil {
		setupLog.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

func run(o options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		// The scheduling loop stops with the manager; releasing the Lease at
		// once lets a standby take over without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), ctrl.Log)
	if _, err := setupScheduler(ctx, mgr, o); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager")
	return mgr.Start(ctx)
}

// setupScheduler adds the scheduling loop, with the built-in plugins, to
// mgr; it runs on the elected leader only. Instances are built with the
// returned scheduler's NewFramework and served once published into its
// Profiles().
func setupScheduler(ctx context.Context, mgr manager.Manager, o options) (*scheduler.Scheduler, error) {
	client, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	// A profile that names no plugins runs the built-in default profile.
	plugins.InstallDefaultPlugins()
	if o.percentageOfNodesToScore < 0 || o.percentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("--percentage-of-nodes-to-score must be between 0 and 100, got %d", o.percentageOfNodesToScore)
	}
	opts := []scheduler.Option{scheduler.WithParallelism(o.parallelism)}
	if o.percentageOfNodesToScore != 0 {
		opts = append(opts, scheduler.WithPercentageOfNodesToScore(int32(o.percentageOfNodesToScore)))
	}
	sched, err := scheduler.New(ctx, client, plugins.NewInTreeRegistry(), opts...)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(sched); err != nil {
		return nil, err
	}
	return sched, nil
}
