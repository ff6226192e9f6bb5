// Package storage_test runs the scheduling loop with the default profile
// against a real API server and the real volume controllers of
// kube-controller-manager (the PV binder and the protection controllers),
// with the simulated local-volume provisioner and simulated kubelet of the
// local run: claims are bound by the PV binder, provisioned on the node the
// scheduler selected, and pods that the volume plugins refuse are reported
// with kube-scheduler's messages.
package storage_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// schedulerName is the profile the suite's pods name: the default profile.
const schedulerName = "storage"

var (
	env    *envtest.Environment
	kcm    *testenv.ControllerManager
	cs     kubernetes.Interface
	c      client.Client
	cancel context.CancelFunc
	done   chan error
	// background is closed once the simulated provisioner and kubelet
	// have returned.
	background chan struct{}
)

func TestStorage(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	RunSpecs(t, "Storage scheduling suite")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	// The StatefulSet controller too, for the claims of volumeClaimTemplates.
	kcm, err = testenv.StartControllerManager(env, GinkgoWriter, append(localcluster.VolumeControllers(), "statefulset-controller")...)
	Expect(err).NotTo(HaveOccurred())

	cfg.QPS, cfg.Burst = 200, 400
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.Level(zapcore.Level(-2)))
	ctx = klog.NewContext(ctx, logger)

	factory := informers.NewSharedInformerFactory(cs, 0)
	provisioner, err := localcluster.NewSimulatedProvisioner(cs, factory)
	Expect(err).NotTo(HaveOccurred())
	kubelet, err := localcluster.NewKubelet(cs, factory)
	Expect(err).NotTo(HaveOccurred())
	factory.Start(ctx.Done())
	background = make(chan struct{})
	go func() {
		defer close(background)
		kubeletDone := make(chan struct{})
		go func() { defer close(kubeletDone); kubelet.Run(ctx) }()
		provisioner.Run(ctx)
		<-kubeletDone
		factory.Shutdown()
	}()

	sched, err := scheduler.New(ctx, cs, plugins.NewInTreeRegistry(), scheduler.WithDefaultPlugins(plugins.DefaultPlugins()))
	Expect(err).NotTo(HaveOccurred())
	done = make(chan error, 1)
	go func() { done <- sched.Start(ctx) }()
	fwk, err := profilebuild.Builder(sched)(ctx, &configv1.KubeSchedulerProfile{SchedulerName: ptr.To(schedulerName)})
	Expect(err).NotTo(HaveOccurred())
	sched.Profiles().Publish(schedulerName, fwk)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
		Eventually(background).WithTimeout(time.Minute).Should(BeClosed())
	}
	if kcm != nil {
		Expect(kcm.Stop()).To(Succeed())
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
