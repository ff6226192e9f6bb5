// Command profile-scheduler runs the operator: the controllers that turn
// SchedulingProfiles into live scheduling-framework instances and mirror pods
// held at Permit as WaitingPods, and the scheduling loop that uses them.
// Its subcommands `validate` and `convert` (internal/cli) check and make
// SchedulingProfile manifests without a cluster.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/controllers"
	"github.com/schedprofiles/profile-scheduler/internal/cli"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/internal/webhook"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	utilruntime.Must(podgroupv1alpha1.AddToScheme(scheme))
}

// options are the operator's command-line settings.
type options struct {
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	profiling               bool
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	// leaseDuration, renewDeadline and retryPeriod are kube-scheduler's
	// leaderElection settings of the same names, with its defaults.
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	qps           float64
	burst         int
	// percentageOfNodesToScore and parallelism are kube-scheduler's
	// settings of the same names, for the whole scheduling loop.
	percentageOfNodesToScore int
	parallelism              int

	// validation decides which profiles may serve; `profile-scheduler
	// validate` takes the same flags.
	validation operator.ValidationFlags
	// ownSchedulerNamePrefixes mark schedulerNames as this operator's
	// before any profile served them, for the NoProfile event.
	ownSchedulerNamePrefixes string
	waitingPodRetention      time.Duration
	maxShadows               int

	// webhookPort serves the admission webhook; 0 turns it off.
	webhookPort int
	// webhookCertDir holds a mounted serving certificate; empty means
	// the operator keeps its own in webhookCertSecret and puts its CA in
	// webhookConfiguration, for webhookService's DNS names.
	webhookCertDir       string
	webhookCertSecret    string
	webhookConfiguration string
	webhookService       string
}

func main() {
	if len(os.Args) > 1 {
		// The subcommands need no cluster and have flags of their own.
		s := cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
		switch os.Args[1] {
		case "validate":
			os.Exit(cli.Validate(context.Background(), os.Args[2:], s))
		case "convert":
			os.Exit(cli.Convert(context.Background(), os.Args[2:], s))
		case "promote":
			os.Exit(cli.Promote(context.Background(), os.Args[2:], s))
		}
	}
	// Help and mistakes in flags are reported by parseFlags rather than
	// by the flag package, so that help asked for goes to standard output
	// with exit code 0.
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.Usage = func() {}
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint listens on; 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics; false serves plain HTTP to anyone.")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory holding tls.crt and tls.key for the secure metrics endpoint, reloaded when they change; empty means a self-signed certificate made at start.")
	flag.BoolVar(&o.profiling, "profiling", true, "Serve Go's profiles under /debug/pprof/ on the metrics endpoint, as kube-scheduler's enableProfiling: to callers authorized for those paths when it is secure; with --metrics-secure=false only on a loopback address (the operator refuses to start otherwise).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the liveness and readiness probes listen on.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader with a Lease so that only one replica schedules.")
	flag.StringVar(&o.leaderElectionID, "leader-election-id", "profile-scheduler.scheduling.schedprofiles.io", "Name of the leader election Lease.")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the operator's own namespace.")
	flag.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before it takes the Lease over; bounds the failover time when a leader dies without releasing it.")
	flag.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew the Lease before it gives up leadership and stops; must be less than the lease duration.")
	flag.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often replicas try to acquire or renew the Lease.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Queries per second to the API server, as kube-scheduler's clientConnection.qps.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries to the API server, as kube-scheduler's clientConnection.burst.")
	flag.IntVar(&o.percentageOfNodesToScore, "percentage-of-nodes-to-score", 0, "Share of the nodes to find feasible before scoring, for profiles that set none; 0 means adaptive, as kube-scheduler's percentageOfNodesToScore.")
	flag.IntVar(&o.parallelism, "parallelism", 0, "Goroutines used to filter and score nodes; 0 means one per CPU.")
	flag.DurationVar(&o.waitingPodRetention, "waitingpod-retention", 30*time.Second, "How long a WaitingPod stays after its pod is bound, finished or deleted.")
	flag.StringVar(&o.ownSchedulerNamePrefixes, "own-scheduler-name-prefixes", "", "Comma-separated schedulerName prefixes that are this operator's: a pending pod with such a schedulerName that no SchedulingProfile serves gets a NoProfile event, as do pods of names a profile served since the operator started. Empty means only the latter.")
	flag.IntVar(&o.maxShadows, "max-shadows", profilebuild.DefaultMaxShadows, "How many shadow profiles (spec.shadowOf) run at most: each evaluates up to 20 placements a second on the leader. The admission webhook refuses more; the oldest run, newer ones are refused in status.")
	o.validation.AddFlags(flag.CommandLine)
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "Port the SchedulingProfile validating admission webhook listens on, on every replica; 0 turns the webhook off (out of a cluster, where the API server cannot call it).")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Directory holding tls.crt and tls.key for the webhook, reloaded when they change (cert-manager's, mounted); empty means the operator keeps its own CA and certificate in --webhook-cert-secret and the CA in --webhook-configuration's caBundle.")
	flag.StringVar(&o.webhookCertSecret, "webhook-cert-secret", "profile-scheduler-webhook-cert", "Secret in the operator's namespace where it keeps the webhook's CA and certificate, when --webhook-cert-dir is empty.")
	flag.StringVar(&o.webhookConfiguration, "webhook-configuration", "profile-scheduler-validating-webhook-configuration", "ValidatingWebhookConfiguration whose caBundle the operator keeps, when --webhook-cert-dir is empty.")
	flag.StringVar(&o.webhookService, "webhook-service", "profile-scheduler-webhook-service", "Service in the operator's namespace the API server calls the webhook through: the certificate's DNS names, when --webhook-cert-dir is empty.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	if code, stop := parseFlags(os.Args[1:]); stop {
		os.Exit(code)
	}

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	setupLog := ctrl.Log.WithName("setup")

	if err := run(o); err != nil {
		setupLog.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

// parseFlags parses the operator's flags. It says whether to stop, with
// which exit code, instead of running the operator: help was asked for
// (-h, --help or help), or the command line is wrong. An argument that is
// not a flag is no subcommand, and would otherwise start the operator.
func parseFlags(args []string) (code int, stop bool) {
	usage := func(w io.Writer) {
		flag.CommandLine.SetOutput(w)
		fmt.Fprint(w, cli.Usage)
		flag.PrintDefaults()
	}
	err := flag.CommandLine.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp) || (err == nil && flag.Arg(0) == "help"):
		usage(os.Stdout)
		return 0, true
	case err != nil:
		// The flag package has printed the error.
		usage(os.Stderr)
		return cli.ExitUsage, true
	case flag.NArg() > 0:
		fmt.Fprintf(os.Stderr, "profile-scheduler: unknown command %q: the subcommands are validate, convert and help\n", flag.Arg(0))
		return cli.ExitUsage, true
	}
	return 0, false
}

func run(o options) error {
	// Flags first: a mistake in them is reported before anything starts.
	if o.maxShadows < 1 {
		return fmt.Errorf("--max-shadows must be at least 1, got %d", o.maxShadows)
	}
	schedOpts, err := schedulerOptions(o)
	if err != nil {
		return err
	}
	metrics, err := operator.MetricsServer(o.metricsAddr, o.metricsSecure, o.metricsCertDir, o.profiling)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst

	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// The scheduling loop stops with the manager; releasing the Lease at
		// once lets a standby take over without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
	}
	// Before the fence: standbys serve the webhook and may be first to
	// write its certificate.
	webhookServer, certs, err := webhookServing(rest.CopyConfig(cfg), o)
	if err != nil {
		return err
	}
	mgrOpts.WebhookServer = webhookServer
	if o.leaderElect {
		// Every write but the Lease's own goes through the fence, which
		// closes once the Lease has not been renewed within the renew
		// deadline: a leader paused past its Lease writes nothing when it
		// resumes.
		fence, err := operator.NewLeaseFence(cfg, o.renewDeadline, clock.RealClock{})
		if err != nil {
			return err
		}
		mgrOpts.LeaderElectionConfig = rest.CopyConfig(cfg)
		mgrOpts.LeaderElectionConfig.Wrap(fence.ObserveRenewals)
		cfg.Wrap(fence.Guard)
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return err
	}
	if certs != nil {
		if err := certs.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), ctrl.Log)
	if _, err := operator.Setup(ctx, mgr, operator.Options{
		AdmissionWebhook:       o.webhookPort != 0,
		Registry:               plugins.NewInTreeRegistry(),
		ReservedSchedulerNames: o.validation.Reserved(),
		WaitingPodRetention:    o.waitingPodRetention,
		MaxShadows:             o.maxShadows,
		Scheduler:              schedOpts,
		// The registry the manager serves on /metrics.
		MetricsRegisterer: ctrlmetrics.Registry,
	}); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager")
	return mgr.Start(ctx)
}

// webhookServing returns the admission webhook's server, nil when it is
// off, and the Certificates that keep its certificate, nil when it reads
// mounted ones.
func webhookServing(cfg *rest.Config, o options) (ctrlwebhook.Server, *webhook.Certificates, error) {
	if o.webhookPort == 0 {
		return nil, nil, nil
	}
	serverOpts := ctrlwebhook.Options{Port: o.webhookPort, CertDir: o.webhookCertDir}
	if o.webhookCertDir != "" {
		return ctrlwebhook.NewServer(serverOpts), nil, nil
	}
	namespace := controllers.OperatorNamespace()
	certs, err := webhook.NewCertificates(cfg, webhook.CertificateOptions{
		Secret:               types.NamespacedName{Namespace: namespace, Name: o.webhookCertSecret},
		WebhookConfiguration: o.webhookConfiguration,
		Hosts:                webhook.ServiceHosts(o.webhookService, namespace),
	})
	if err != nil {
		return nil, nil, err
	}
	serverOpts.TLSOpts = []func(*tls.Config){certs.TLS}
	return ctrlwebhook.NewServer(serverOpts), certs, nil
}

// schedulerOptions turns the loop's flags into scheduler options.
func schedulerOptions(o options) ([]scheduler.Option, error) {
	if o.percentageOfNodesToScore < 0 || o.percentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("--percentage-of-nodes-to-score must be between 0 and 100, got %d", o.percentageOfNodesToScore)
	}
	policy, err := o.validation.ExtenderPolicy()
	if err != nil {
		return nil, err
	}
	gates := o.validation.WorkloadGates()
	opts := []scheduler.Option{
		scheduler.WithParallelism(o.parallelism),
		scheduler.WithExtenderPolicy(policy),
		scheduler.WithOwnSchedulerNamePrefixes(operator.SplitList(o.ownSchedulerNamePrefixes)...),
		scheduler.WithOpportunisticBatching(o.validation.OpportunisticBatching()),
		scheduler.WithWorkloadGates(gates.GenericWorkload, gates.TopologyAwareWorkloadScheduling),
	}
	if o.percentageOfNodesToScore != 0 {
		opts = append(opts, scheduler.WithPercentageOfNodesToScore(int32(o.percentageOfNodesToScore)))
	}
	return opts, nil
}
