// Package dra_test runs the operator in-process against a real API server
// and the real Dynamic Resource Allocation controllers of
// kube-controller-manager (the resource claim controller, which makes
// claims from templates and clears reservedFor, and the device taint
// eviction controller), with the simulated DRA driver, which publishes
// simulated GPUs as ResourceSlices, and the simulated kubelet of the local
// run: pods with ResourceClaims are placed where their devices are, their
// claims allocated and reserved as kube-scheduler 1.37.2 does it, and the
// pods it refuses are reported with its messages.
package dra_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// The profiles the suite's pods name: the default profile, and one that
// runs Coscheduling for gangs.
const (
	defaultProfile  = "dra"
	gangProfile     = "dra-gangs"
	approvalProfile = "dra-approval"
)

var profileManifests = map[string]string{
	defaultProfile: "metadata:\n  name: " + defaultProfile + "\nspec: {}\n",
	approvalProfile: `metadata:
  name: ` + approvalProfile + `
spec:
  plugins:
    multiPoint:
      enabled:
      - name: ManualApproval
`,
	gangProfile: `metadata:
  name: ` + gangProfile + `
spec:
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 60
      podGroupRejectPercentage: 100
`,
}

var (
	env *envtest.Environment
	kcm *testenv.ControllerManager
	cs  kubernetes.Interface
	c   client.Client
	// stop stops the operator, the simulated driver and kubelet, and
	// waits for them.
	stop func()
)

func TestDRA(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	RunSpecs(t, "Dynamic Resource Allocation suite")
}

var _ = BeforeSuite(func() {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.Level(zapcore.Level(-2)))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	// The garbage collector too: it deletes the claims made for deleted
	// pods, which the resource claim controller leaves to it.
	kcm, err = testenv.StartControllerManager(env, GinkgoWriter, append(localcluster.DRAControllers(), "garbage-collector-controller")...)
	Expect(err).NotTo(HaveOccurred())

	cfg.QPS, cfg.Burst = 200, 400
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err = client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	factory := informers.NewSharedInformerFactory(cs, 0)
	driver, err := localcluster.NewSimulatedDRADriver(cs, factory)
	Expect(err).NotTo(HaveOccurred())
	kubelet, err := localcluster.NewKubelet(cs, factory)
	Expect(err).NotTo(HaveOccurred())
	factory.Start(ctx.Done())
	driverDone, kubeletDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(driverDone); driver.Run(ctx) }()
	go func() { defer close(kubeletDone); kubelet.Run(ctx) }()

	running, err := testenv.StartOperator(ctx, cfg, testenv.OperatorOptions{
		Manager: ctrl.Options{Scheme: env.Scheme},
		Operator: operator.Options{
			ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
			WaitingPodRetention:    2 * time.Second,
			MetricsRegisterer:      prometheus.NewRegistry(),
		},
	})
	Expect(err).NotTo(HaveOccurred())
	stop = func() {
		cancel()
		Expect(running.Stop()).To(Succeed())
		Eventually(driverDone).WithTimeout(time.Minute).Should(BeClosed())
		Eventually(kubeletDone).WithTimeout(time.Minute).Should(BeClosed())
		factory.Shutdown()
	}

	for name, manifest := range profileManifests {
		sp := &schedulingv1alpha1.SchedulingProfile{}
		Expect(yaml.UnmarshalStrict([]byte(manifest), sp)).To(Succeed())
		Expect(c.Create(ctx, sp)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, sp)).To(Succeed())
			g.Expect(sp.Status.ServingGeneration).To(Equal(sp.Generation))
			g.Expect(meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive)).To(BeTrue(), "profile %s: %v", name, sp.Status.Conditions)
		}).Should(Succeed())
	}
})

var _ = AfterSuite(func() {
	if stop != nil {
		stop()
	}
	if kcm != nil {
		Expect(kcm.Stop()).To(Succeed())
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
