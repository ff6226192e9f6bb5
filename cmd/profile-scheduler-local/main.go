// Command profile-scheduler-local runs the whole product on this machine in
// the foreground: a throw-away kube-apiserver and etcd on loopback (etcd
// answers only kube-apiserver's client certificate), the CRDs,
// the approver ClusterRole and the admission policy, simulated nodes across
// three zones with a simulated kubelet, kube-controller-manager with the
// controllers workloads and volumes need (Deployments, StatefulSets, Jobs,
// claims, ResourceClaims from templates...), a simulated local-volume
// provisioner and the `local` StorageClass it serves, a simulated DRA
// driver publishing GPUs on half the nodes with their DeviceClass, the
// sample profiles, and the operator itself, in
// this process. It writes an administrator's kubeconfig and prints the
// kubectl commands to try. Ctrl-C stops everything it started. On Linux the
// run also stops when the process that started it ends (make killed
// outright, the terminal closed), the control plane dies with this process
// when it is killed outright, and the next run removes what such a run
// left after checking that none of it still runs; a run refuses to start
// beside a live one.
//
// `make run-local` builds and runs it from the root of the checkout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

type options struct {
	dir         string
	configDir   string
	assets      string
	pluginDir   string
	nodes       int
	kubelet     bool
	storage     bool
	dra         bool
	controllers string
	runTime     time.Duration
	samples     bool
	metricsAddr string
	probeAddr   string
	qps         float64
	burst       int
	retention   time.Duration
	// extenderURLPrefixes are where profiles' extenders may be called.
	extenderURLPrefixes string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", filepath.Join("bin", "local"), "Directory of the run's files: the kubeconfig (DIR/kubeconfig), the list of its processes (DIR/processes.json) and the control plane's data and certificates (DIR/cluster); all are removed on exit, or by the next run if this one is killed.")
	flag.StringVar(&o.configDir, "config-dir", "config", "The checkout's config directory: CRDs, policy, approver role and samples are read from it.")
	flag.StringVar(&o.assets, "control-plane", os.Getenv("KUBEBUILDER_ASSETS"), "Directory holding the kube-apiserver, etcd and kube-controller-manager binaries (default $KUBEBUILDER_ASSETS; make run-local sets it).")
	flag.StringVar(&o.pluginDir, "plugin-dir", "", "Directory holding kubectl-approve and kubectl-reject, for the PATH printed (default: this binary's directory).")
	flag.IntVar(&o.nodes, "nodes", 6, "Number of simulated nodes, spread over three zones.")
	flag.BoolVar(&o.kubelet, "kubelet", true, "Simulate kubelets: bound pods turn Running and deleted pods go away at once.")
	flag.BoolVar(&o.storage, "storage", true, "Run a simulated local-volume provisioner, with the StorageClass of config/samples/storage: claims of pods get volumes on the pod's node.")
	flag.BoolVar(&o.dra, "dra", true, "Run a simulated DRA driver: every other node gets 4 simulated GPUs (driver gpu.example.com, DeviceClass gpu.example.com), published as ResourceSlices for pods' ResourceClaims.")
	flag.StringVar(&o.controllers, "controllers", strings.Join(localcluster.AllControllers(), ","), "kube-controller-manager's --controllers, comma-separated: 'name' runs a controller, '-name' leaves it out, '*' runs kube-controller-manager's defaults (whose node lifecycle controller evicts the simulated nodes' pods); empty runs no kube-controller-manager.")
	flag.DurationVar(&o.runTime, "simulated-run-time", 30*time.Second, "How long the simulated kubelet lets a pod with restartPolicy Never or OnFailure (a Job's pod) run before it succeeds; 0: for ever.")
	flag.BoolVar(&o.samples, "samples", true, "Apply the sample SchedulingProfiles of config/samples.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "Loopback address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "127.0.0.1:8081", "Loopback address of the health probes; 0 disables them.")
	flag.Float64Var(&o.qps, "kube-api-qps", 50, "Queries per second of the operator to the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 100, "Burst of queries of the operator to the API server.")
	flag.DurationVar(&o.retention, "waitingpod-retention", 30*time.Second, "How long a WaitingPod stays after its pod is bound, finished or deleted.")
	flag.StringVar(&o.extenderURLPrefixes, strings.TrimPrefix(extender.AllowedURLPrefixesFlag, "--"), strings.Join(extender.LoopbackURLPrefixes(), ","), "Comma-separated URL prefixes SchedulingProfiles' HTTP extenders may be called at, as the operator's flag; by default extenders on this machine, at any port.")
	// Readable console logs at info level; --zap-log-level=debug shows more.
	// No stack traces with errors: they are for the code's authors, and a
	// person running this reads the message.
	zapOpts := zap.Options{Development: true, StacktraceLevel: zapcore.PanicLevel}
	zapOpts.BindFlags(flag.CommandLine)
	_ = flag.Set("zap-log-level", "info")
	flag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	log := ctrl.Log.WithName("local")

	ctx, stop := signalContext(log)
	defer stop()
	// Ctrl-C during start-up is a stop, not a failure. A failure is one
	// line: most are the user's to fix (a run already going, a flag), and
	// a stack trace says nothing to them.
	if err := run(klog.NewContext(ctx, ctrl.Log), o, os.Stdout); err != nil && ctx.Err() == nil {
		stop()
		fmt.Fprintf(os.Stderr, "profile-scheduler-local: %v\n", err)
		os.Exit(1)
	}
}

// signalContext is cancelled by the first SIGINT, SIGTERM or SIGHUP. Later
// signals do not cut the shutdown short: the child processes must be
// stopped whatever happens.
func signalContext(log interface{ Info(string, ...any) }) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := true
		for sig := range ch {
			if first {
				log.Info("Stopping: operator, then the control plane", "signal", sig.String())
				cancel()
				first = false
				continue
			}
			log.Info("Still stopping; the control plane processes must end first", "signal", sig.String())
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func run(ctx context.Context, o options, out io.Writer) error {
	log := klog.FromContext(ctx).WithName("local")
	for flagName, addr := range map[string]string{"--metrics-bind-address": o.metricsAddr, "--health-probe-bind-address": o.probeAddr} {
		if err := loopbackOnly(addr); err != nil {
			return fmt.Errorf("%s: %w", flagName, err)
		}
	}
	controllers, err := parseControllers(o.controllers)
	if err != nil {
		return fmt.Errorf("--controllers: %w", err)
	}
	if o.runTime < 0 {
		return fmt.Errorf("--simulated-run-time must not be negative, got %s", o.runTime)
	}
	if o.nodes < 0 {
		return fmt.Errorf("--nodes must not be negative, got %d", o.nodes)
	}
	if o.pluginDir == "" {
		if exe, err := os.Executable(); err == nil {
			o.pluginDir = filepath.Dir(exe)
		}
	}

	// A run killed outright cannot stop its control plane or remove its
	// files. On Linux the control plane dies with it; the state file names
	// the processes of the run, so that the next run refuses to start while
	// one of them still runs and otherwise removes what was left: etcd's
	// data, the certificates and their keys, the kubeconfig.
	stateFile := filepath.Join(o.dir, "processes.json")
	clusterDir := filepath.Join(o.dir, "cluster")
	kubeconfig, err := filepath.Abs(filepath.Join(o.dir, "kubeconfig"))
	if err != nil {
		return err
	}
	if err := localcluster.CheckStateFile(stateFile); err != nil {
		return err
	}
	if err := removeLeftovers(log, clusterDir, kubeconfig); err != nil {
		return err
	}
	// This process first, so that a run started while this one starts its
	// control plane refuses rather than removing the cluster's directory.
	self := localcluster.Process{Name: "profile-scheduler-local", PID: os.Getpid(), Command: os.Args[0]}
	if err := localcluster.WriteStateFile(stateFile, []localcluster.Process{self}); err != nil {
		return err
	}
	log.Info("Starting kube-apiserver and etcd on loopback", "version", localcluster.KubernetesVersion, "kube-controller-manager", controllers)
	cluster, err := localcluster.Start(localcluster.Options{
		AssetsDir:         o.assets,
		CRDDir:            filepath.Join(o.configDir, "crd", "bases"),
		ControllerManager: len(controllers) > 0,
		Controllers:       controllers,
		// The admission webhook, as config/webhook installs it, calling
		// the operator in this process.
		Webhooks: []string{filepath.Join(o.configDir, "webhook", "manifests.yaml")},
		Dir:      clusterDir,
	})
	if err != nil {
		_ = os.Remove(stateFile)
		return err
	}
	defer func() {
		log.Info("Stopping the control plane")
		if err := cluster.Stop(); err != nil {
			log.Error(err, "Stopping the control plane; the next run checks that nothing is left", "stateFile", stateFile)
			return
		}
		_ = os.Remove(stateFile)
		log.Info("Stopped; nothing is left running")
	}()
	if err := localcluster.WriteStateFile(stateFile, append([]localcluster.Process{self}, cluster.Processes()...)); err != nil {
		return err
	}

	if _, err := cluster.WriteAdminKubeconfig(kubeconfig); err != nil {
		return err
	}
	defer func() { _ = os.Remove(kubeconfig) }()

	applier, err := localcluster.NewApplier(cluster.Config, "profile-scheduler-local")
	if err != nil {
		return err
	}
	// What `make deploy` installs besides the operator itself: the admission
	// policy that keeps decisions attributable and the approvers' roles.
	if err := applier.ApplyFiles(ctx, filepath.Join(o.configDir, "policy"), filepath.Join(o.configDir, "rbac", "approver_role.yaml"),
		filepath.Join(o.configDir, "rbac", "schedulingprofile_reader_role.yaml")); err != nil {
		return err
	}
	nodes := localcluster.Nodes("node", o.nodes, localcluster.Standard)
	var gpuNodes []string
	if o.dra {
		// node-1, node-3, …: half the nodes, across every zone.
		for i := 1; i < len(nodes); i += 2 {
			localcluster.AddSimulatedGPUs(nodes[i], localcluster.StandardGPUs())
			gpuNodes = append(gpuNodes, nodes[i].Name)
		}
	}
	if err := localcluster.CreateNodes(ctx, cluster.Clientset, nodes, 4); err != nil {
		return err
	}
	log.Info("Created simulated nodes", "count", len(nodes), "zones", localcluster.Zones, "gpuNodes", gpuNodes)

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var background []<-chan struct{}
	defer func() {
		cancelRun()
		for _, done := range background {
			<-done
		}
	}()
	if o.kubelet {
		factory := informers.NewSharedInformerFactory(cluster.Clientset, 0)
		kubelet, err := localcluster.NewKubelet(cluster.Clientset, factory, localcluster.WithSimulatedRunTime(o.runTime))
		if err != nil {
			return err
		}
		factory.Start(runCtx.Done())
		background = append(background, goDone(func() { kubelet.Run(runCtx); factory.Shutdown() }))
	}
	if o.storage {
		if err := applier.ApplyFiles(ctx, filepath.Join(o.configDir, "samples", "storage")); err != nil {
			return err
		}
		factory := informers.NewSharedInformerFactory(cluster.Clientset, 0)
		provisioner, err := localcluster.NewSimulatedProvisioner(cluster.Clientset, factory)
		if err != nil {
			return err
		}
		factory.Start(runCtx.Done())
		background = append(background, goDone(func() { provisioner.Run(runCtx); factory.Shutdown() }))
		log.Info("Started the simulated local-volume provisioner", "provisioner", localcluster.SimulatedProvisionerName)
	}
	if o.dra {
		factory := informers.NewSharedInformerFactory(cluster.Clientset, 0)
		driver, err := localcluster.NewSimulatedDRADriver(cluster.Clientset, factory)
		if err != nil {
			return err
		}
		factory.Start(runCtx.Done())
		background = append(background, goDone(func() { driver.Run(runCtx); factory.Shutdown() }))
		log.Info("Started the simulated DRA driver", "driver", localcluster.SimulatedDRADriverName, "deviceClass", localcluster.SimulatedGPUClassName,
			"gpusPerNode", localcluster.StandardGPUs().Count)
	}

	mgr, err := newManager(runCtx, cluster.Config, cluster.WebhookServer(), o)
	if err != nil {
		return err
	}
	mgrErr := make(chan error, 1)
	background = append(background, goDone(func() { mgrErr <- mgr.Start(runCtx) }))

	// The webhook refuses every profile until it serves (failurePolicy
	// Fail), the samples included.
	if err := waitWebhook(runCtx, mgr, mgrErr); err != nil {
		return err
	}
	var profiles []string
	if o.samples {
		objs, err := localcluster.ReadManifests(filepath.Join(o.configDir, "samples"))
		if err != nil {
			return err
		}
		if err := applier.Apply(ctx, objs...); err != nil {
			return err
		}
		for _, obj := range objs {
			profiles = append(profiles, obj.GetName())
		}
		slices.Sort(profiles)
		if err := waitActive(runCtx, mgr.GetClient(), profiles, mgrErr); err != nil {
			return err
		}
	}

	printBanner(out, cluster.Host(), kubeconfig, o, len(nodes), profiles)
	log.Info("Ready; press Ctrl-C to stop")
	// A workload's pods depend on kube-controller-manager: without it the
	// run would go on with no pods and no hint (a name in --controllers it
	// does not know makes it exit).
	var kcmExited <-chan struct{}
	if kcm := cluster.ControllerManager(); kcm != nil {
		kcmExited = kcm.Exited()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-mgrErr:
		return fmt.Errorf("operator stopped: %w", err)
	case <-kcmExited:
		return cluster.ControllerManager().Err()
	}
}

// removeLeftovers removes what a run killed outright left: the cluster's
// directory and the kubeconfig. The caller has checked that none of that
// run's processes still runs.
func removeLeftovers(log logr.Logger, clusterDir, kubeconfig string) error {
	for _, path := range []string{clusterDir, kubeconfig} {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		log.Info("Removing what an earlier run left", "path", path)
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("removing what an earlier run left: %w", err)
		}
	}
	return nil
}

// newManager wires the operator as main.go does, on loopback.
func newManager(ctx context.Context, base *rest.Config, webhookServer webhook.Server, o options) (ctrl.Manager, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst
	// Plain HTTP on loopback, with Go's profiles, as kube-scheduler's
	// enableProfiling.
	metrics, err := operator.MetricsServer(o.metricsAddr, false, "", true)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 localcluster.Scheme(),
		Metrics:                metrics,
		HealthProbeBindAddress: o.probeAddr,
		WebhookServer:          webhookServer,
	})
	if err != nil {
		return nil, err
	}
	policy, err := extender.NewPolicy(strings.Split(o.extenderURLPrefixes, ","), 0)
	if err != nil {
		return nil, err
	}
	if _, err := operator.Setup(ctx, mgr, operator.Options{
		Registry:               plugins.NewInTreeRegistry(),
		ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
		WaitingPodRetention:    o.retention,
		// The local API server serves the workload API
		// (localcluster.WorkloadAPIServerArgs): profiles may use it.
		Scheduler: []scheduler.Option{scheduler.WithExtenderPolicy(policy), scheduler.WithWorkloadGates(true, true)},
		// The registry the manager serves on /metrics.
		MetricsRegisterer: ctrlmetrics.Registry,
		AdmissionWebhook:  true,
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// waitWebhook waits until the operator's webhook server listens.
func waitWebhook(ctx context.Context, mgr ctrl.Manager, mgrErr <-chan error) error {
	started := mgr.GetWebhookServer().StartedChecker()
	deadline := time.After(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for started(nil) != nil {
		select {
		case <-ctx.Done():
			return nil
		case err := <-mgrErr:
			return fmt.Errorf("operator stopped: %w", err)
		case <-deadline:
			return fmt.Errorf("the admission webhook does not answer after a minute: %w", started(nil))
		case <-tick.C:
		}
	}
	return nil
}

// waitActive waits until every named profile serves its current generation.
func waitActive(ctx context.Context, c client.Client, names []string, mgrErr <-chan error) error {
	deadline := time.After(time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := slices.DeleteFunc(slices.Clone(names), func(name string) bool {
			sp := &schedulingv1alpha1.SchedulingProfile{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
				return false
			}
			return sp.Status.ServingGeneration == sp.Generation &&
				meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive)
		})
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-mgrErr:
			return fmt.Errorf("operator stopped: %w", err)
		case <-deadline:
			return fmt.Errorf("sample profiles %v are not active after a minute: kubectl describe schedulingprofiles", pending)
		case <-tick.C:
		}
	}
}

func printBanner(out io.Writer, host, kubeconfig string, o options, nodes int, profiles []string) {
	path := ""
	if _, err := os.Stat(filepath.Join(o.pluginDir, "kubectl-approve")); err == nil {
		path = " PATH=" + o.pluginDir + ":$PATH"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nprofile-scheduler is running on a local control plane (kube-apiserver v%s at %s)\n", localcluster.KubernetesVersion, host)
	fmt.Fprintf(&b, "with %d simulated nodes in zones %s", nodes, strings.Join(localcluster.Zones, ", "))
	if len(profiles) > 0 {
		fmt.Fprintf(&b, " and the profiles %s", strings.Join(profiles, ", "))
	}
	b.WriteString(".\n\nIn another terminal, from the root of the checkout:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s%s\n", kubeconfig, path)
	cmds := []string{
		"kubectl get nodes -L topology.kubernetes.io/zone",
		"kubectl get schedulingprofiles",
		"kubectl apply -f config/samples/pods/web.yaml",
		"kubectl get pods -o wide",
		"kubectl apply -f config/samples/pods/train.yaml",
		"kubectl get waitingpods",
		`kubectl approve waitingpod/train-0 --reason "capacity reviewed"`,
		"kubectl apply -f config/samples/pods/gang.yaml",
		"kubectl label nodes node-0 node-1 node-2 gang=workers",
		"kubectl get waitingpods,pg -o wide",
	}
	if o.storage {
		cmds = append(cmds, "kubectl apply -f config/samples/pods/database.yaml", "kubectl get pvc,pv")
	}
	if o.dra {
		cmds = append(cmds, "kubectl get deviceclasses,resourceslices")
	}
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "  %s\n", cmd)
	}
	b.WriteString("\nThe README's \"Try it\" section walks through a whole session.\n")
	if o.metricsAddr != "0" {
		fmt.Fprintf(&b, "Metrics: http://%s/metrics\n", o.metricsAddr)
	}
	b.WriteString("Press Ctrl-C to stop everything.\n\n")
	_, _ = io.WriteString(out, b.String())
}

// parseControllers splits a --controllers value, refusing what
// kube-controller-manager could not read as controller names.
func parseControllers(value string) ([]string, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var controllers []string
	for _, c := range strings.Split(value, ",") {
		c = strings.TrimSpace(c)
		if c != "*" && !controllerName.MatchString(c) {
			return nil, fmt.Errorf("%q is not a controller name, '-name' or '*' (kube-controller-manager --help lists the names)", c)
		}
		controllers = append(controllers, c)
	}
	return controllers, nil
}

// loopbackOnly refuses an address that would listen beyond this machine.
func loopbackOnly(addr string) error {
	if addr == "0" || operator.IsLoopbackAddress(addr) {
		return nil
	}
	return errors.New("the local run listens on loopback only: use 127.0.0.1:PORT")
}

// controllerName is a kube-controller-manager controller, or one left out.
var controllerName = regexp.MustCompile(`^-?[a-z0-9]+(-[a-z0-9]+)*$`)

func goDone(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return done
}
