// Package scheduling_test runs the scheduling loop against a real API
// server with the built-in plugins of the default profile (and, with
// GenericWorkload on, those of workload-aware profiles): profiles
// published programmatically, Node objects with capacity and a Ready
// condition (no kubelets), and pods that must end up bound, or reported as
// unschedulable the way kube-scheduler reports them.
package scheduling_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

var (
	env   *envtest.Environment
	cs    kubernetes.Interface
	sched *scheduler.Scheduler
	// metricsRegistry exports sched's metrics.
	metricsRegistry *prometheus.Registry
	cancel          context.CancelFunc
	done            chan error
)

func TestScheduling(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "Scheduling loop suite")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	// Hundreds of pods are created and bound; the default client QPS would
	// make the suite measure the rate limiter.
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.Level(zapcore.Level(-2)))
	ctx = klog.NewContext(ctx, logger)
	metricsRegistry = prometheus.NewRegistry()
	m, err := metrics.New(metricsRegistry)
	Expect(err).NotTo(HaveOccurred())
	// The extenders the suite serves run on loopback.
	extenders, err := extender.NewPolicy(extender.LoopbackURLPrefixes(), 0)
	Expect(err).NotTo(HaveOccurred())
	sched, err = scheduler.New(ctx, cs, registry(), scheduler.WithDefaultPlugins(plugins.DefaultPlugins()), scheduler.WithMetrics(m),
		scheduler.WithExtenderPolicy(extenders), scheduler.WithWorkloadGates(true, false))
	Expect(err).NotTo(HaveOccurred())
	// The control plane serves the workload API: the loop starts the
	// PodGroup informer with the others, as the operator has it do then.
	Expect(sched.StartPodGroupInformer(ctx)).To(Succeed())
	done = make(chan error, 1)
	go func() { done <- sched.Start(ctx) }()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
