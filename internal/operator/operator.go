// Package operator wires profile-scheduler together on one controller-runtime
// manager: the scheduling loop, the SchedulingProfile and WaitingPod
// controllers, the mirror that shows pods held at Permit as WaitingPods, and
// the SchedulingProfile admission webhook.
// main.go and the integration suites both use it, so the suites run exactly
// what ships.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/controllers"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/internal/webhook"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Options configures the operator.
type Options struct {
	// Registry holds the plugins profiles may use. Setup adds
	// ManualApproval and Coscheduling, which need the operator's WaitingPod
	// and PodGroup caches.
	Registry runtime.Registry
	// ReservedSchedulerNames are never served: another scheduler owns them.
	ReservedSchedulerNames []string
	// WaitingPodRetention is how long a WaitingPod stays after its pod is
	// bound or gone.
	WaitingPodRetention time.Duration
	// MetricsRegisterer exports the scheduling loop's metrics; nil keeps
	// them unexported. Each operator in a process needs its own.
	MetricsRegisterer prometheus.Registerer
	// Scheduler configures the scheduling loop, after the defaults Setup
	// gives it (the default plugins, the metrics, the reserved names).
	Scheduler []scheduler.Option
	// Namespace is the operator's own, where it keeps each profile's last
	// valid spec in a ControllerRevision (its Role allows them there
	// only). Empty means the namespace of the service account it runs as,
	// or default outside a cluster.
	Namespace string
	// ShadowStatusPeriod is how often shadow profiles' counts are written
	// to their status at most (controllers.DefaultShadowStatusPeriod when 0).
	ShadowStatusPeriod time.Duration
	// MaxShadows is how many shadow profiles run at most, the oldest
	// first; 0 means profilebuild.DefaultMaxShadows.
	MaxShadows int
	// AdmissionWebhook serves the SchedulingProfile validating webhook
	// on the manager's webhook server, on every replica. The server's
	// certificate is the caller's to set up (webhook.Certificates, or a
	// mounted directory).
	AdmissionWebhook bool
}

// Operator is what Setup built, for callers that need to look inside.
type Operator struct {
	Scheduler *scheduler.Scheduler
	Profiles  *profiles.Set
	// Checker checks profiles as the SchedulingProfile controller
	// compiles them, for the admission webhook.
	Checker *profilebuild.Checker
}

// EventSource is the name events of the operator's controllers carry.
const EventSource = "profile-scheduler"

// Setup adds the scheduling loop and the controllers to mgr, and the
// readiness and liveness checks that report on them. The loop and the
// controllers run on the elected leader only; every replica keeps the
// informers they read synced, so that a standby takes over warm.
func Setup(ctx context.Context, mgr manager.Manager, o Options) (*Operator, error) {
	// Core objects go as protobuf, as kube-scheduler sends them: cheaper to
	// encode and decode on both ends. Custom resources stay with the
	// manager's own JSON client.
	coreConfig := rest.CopyConfig(mgr.GetConfig())
	coreConfig.ContentType = "application/vnd.kubernetes.protobuf"
	coreConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	clientset, err := kubernetes.NewForConfig(coreConfig)
	if err != nil {
		return nil, err
	}
	if err := registerOperatorPlugins(o.Registry, controllers.Decisions{Reader: mgr.GetCache()}, controllers.PodGroups{Reader: mgr.GetCache()}); err != nil {
		return nil, err
	}
	// Coscheduling reads PodGroups from the manager's cache, which runs on
	// every replica; its changes requeue the members of new groups.
	podGroupInformer, err := mgr.GetCache().GetInformer(ctx, &podgroupv1alpha1.PodGroup{})
	if err != nil {
		return nil, err
	}
	m := metrics.NewUnregistered()
	if o.MetricsRegisterer != nil {
		if m, err = metrics.New(o.MetricsRegisterer); err != nil {
			return nil, fmt.Errorf("registering the scheduling loop's metrics: %w", err)
		}
	}
	schedOpts := append([]scheduler.Option{
		scheduler.WithDefaultPlugins(plugins.DefaultPlugins()),
		scheduler.WithMetrics(m),
		scheduler.WithReservedSchedulerNames(o.ReservedSchedulerNames...),
		scheduler.WithEventSource(coscheduling.PodGroupEvents, podGroupInformer),
	}, o.Scheduler...)
	sched, err := scheduler.New(ctx, clientset, o.Registry, schedOpts...)
	if err != nil {
		return nil, fmt.Errorf("building the scheduling loop: %w", err)
	}
	if err := mgr.Add(sched); err != nil {
		return nil, err
	}
	if err := mgr.Add(sched.Informers()); err != nil {
		return nil, err
	}
	// The profile controller's informer would otherwise be made when the
	// controller starts, on winning the Lease: make it now, so that the
	// manager starts it with its cache on every replica.
	if _, err := mgr.GetCache().GetInformer(ctx, &schedulingv1alpha1.SchedulingProfile{}); err != nil {
		return nil, err
	}

	recorder := mgr.GetEventRecorder(EventSource)
	mirror := controllers.NewWaitingPodMirror(mgr.GetClient(), recorder, sched.Profiles(), sched.ResourceClaims(), sched)
	if err := mirror.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	members := controllers.NewPodGroupMemberInformer(clientset)
	if err := mgr.Add(controllers.PodGroupMemberInformerRunnable(members)); err != nil {
		return nil, err
	}
	if err := addProbes(mgr, sched, members); err != nil {
		return nil, err
	}
	podGroups := controllers.NewPodGroupReconciler(mgr.GetClient(), members, recorder)
	if err := podGroups.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	schedBuild := profilebuild.Builder(sched)
	build := func(ctx context.Context, profile *configv1.KubeSchedulerProfile, opts ...runtime.Option) (framework.Framework, error) {
		return schedBuild(ctx, profile, append(opts,
			runtime.WithWaitingPodObserver(mirror), runtime.WithWaitingPodObserver(podGroups))...)
	}
	namespace := o.Namespace
	if namespace == "" {
		namespace = controllers.OperatorNamespace()
	}
	planner := newPlanner(o.ReservedSchedulerNames, sched.ExtenderPolicy(), sched.WorkloadGates(), namespace)
	if err := controllers.NewSchedulingProfileReconciler(mgr.GetClient(), sched.Profiles(), build, recorder, planner,
		controllers.WithRevisionNamespace(namespace),
		controllers.WithShadows(func(name, of string) controllers.Shadow { return sched.NewShadow(name, of) }, o.ShadowStatusPeriod),
		controllers.WithMaxShadows(o.MaxShadows),
		controllers.WithWorkloadAPI(controllers.NewWorkloadAPI(clientset.Discovery()), 0, sched.StartPodGroupInformer),
	).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if sched.WorkloadGates().GenericWorkload {
		// Standbys cache PodGroups too, once served, as they cache pods.
		if err := mgr.Add(controllers.WarmPodGroups(clientset.Discovery(), 0, sched.StartPodGroupInformer)); err != nil {
			return nil, err
		}
	}
	// The replica about to schedule reads the API server's version once,
	// when it starts to lead (at start without leader election): a
	// standby's event would not pass the Lease fence, and it is the leader
	// whose placements depend on the API server's behaviour.
	// The manager starts runnables with a context of its own, without
	// Setup's logger: the check takes that logger along.
	regarding := operatorObject(namespace)
	schedVersion := version.MustParseGeneric(SchedulerVersion)
	logger := klog.FromContext(ctx)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if _, err := CheckAPIServerVersion(klog.NewContext(ctx, logger), clientset.Discovery(), recorder, regarding, schedVersion); err != nil {
			logger.Error(err, "Cannot check the API server's version against the supported skew")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	// Decisions read and watch pods through the scheduling loop's pod
	// informer (InformerFor hands back the one the loop made): the operator
	// caches each pod once.
	podInformer := sched.InformerFactory().Core().V1().Pods().Informer()
	if err := controllers.NewWaitingPodReconciler(mgr.GetClient(), mirror, podInformer, sched.Profiles(), recorder,
		o.WaitingPodRetention).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	checker := profilebuild.NewChecker(planner, profilebuild.Offline(o.Registry, clientset))
	if o.AdmissionWebhook {
		maxShadows := o.MaxShadows
		if maxShadows <= 0 {
			maxShadows = profilebuild.DefaultMaxShadows
		}
		if err := webhook.Register(mgr, checker, mgr.GetCache(), maxShadows, o.MetricsRegisterer); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("webhook-server", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
	}
	return &Operator{Scheduler: sched, Profiles: sched.Profiles(), Checker: checker}, nil
}

// registerOperatorPlugins adds to r the plugins that read the operator's
// own objects: ManualApproval its WaitingPods' decisions, Coscheduling its
// PodGroups.
func registerOperatorPlugins(r runtime.Registry, decisions manualapproval.Decisions, groups coscheduling.PodGroups) error {
	if err := manualapproval.Register(r, decisions); err != nil {
		return err
	}
	return coscheduling.Register(r, groups)
}

// newPlanner plans profiles as the operator serves them: onto the
// default plugins, with the omitted default plugins in status, against
// the operator's workload gates.
func newPlanner(reserved []string, policy extender.Policy, gates runtime.WorkloadGates, namespace string) *profilebuild.Planner {
	return profilebuild.NewPlanner(profilebuild.Options{
		DefaultPlugins:         plugins.DefaultPlugins(),
		ReservedSchedulerNames: reserved,
		ExtenderPolicy:         policy,
		Namespace:              namespace,
		OmittedDefaultPlugins:  plugins.OmittedDefaultPluginsFor,
		WorkloadGates:          gates,
	})
}

// OfflineChecker checks profiles as an operator with these settings
// would, without a cluster: the plugins are those the operator serves, and
// ManualApproval and Coscheduling, which read the cluster only when they
// run, are built without it. namespace is the operator's, named in
// messages about extenders' TLS Secrets.
func OfflineChecker(reserved []string, policy extender.Policy, gates runtime.WorkloadGates, namespace string) (*profilebuild.Checker, error) {
	r := plugins.NewInTreeRegistry()
	if err := registerOperatorPlugins(r, nil, nil); err != nil {
		return nil, err
	}
	return profilebuild.NewChecker(newPlanner(reserved, policy, gates, namespace), profilebuild.Offline(r, nil)), nil
}

// cacheSyncProbeTimeout bounds how long the readiness check waits for the
// manager's cache, well within a probe's default one-second timeout.
const cacheSyncProbeTimeout = 200 * time.Millisecond

// addProbes reports a replica ready once the scheduling loop's informers,
// the PodGroup members' and the controllers' cache have synced, leader or
// standby, and alive unless a scheduling cycle is stuck.
func addProbes(mgr manager.Manager, sched *scheduler.Scheduler, members toolscache.SharedIndexInformer) error {
	if err := mgr.AddReadyzCheck("scheduler-informers", sched.CheckInformersSynced); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("podgroup-members", func(*http.Request) error {
		if !members.HasSynced() {
			return errors.New("the PodGroup members' informer has not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("controller-caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncProbeTimeout)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the controllers' caches have not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.AddHealthzCheck("scheduling-loop", sched.CheckLoopProgress)
}
