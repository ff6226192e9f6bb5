package faults

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/outage"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

const (
	namespace = "faults"
	// schedulerName serves the bursts with the default plugins;
	// approvalScheduler holds every pod for a decision (ManualApproval).
	schedulerName     = "faults"
	approvalScheduler = "faults-approval"
	leaseName         = "profile-scheduler.scheduling.schedprofiles.io"
	// Five nodes of 2 cpu hold 100 pods of 100m: the suite's pods fill
	// them to about three quarters, so a scheduler working from a stale
	// view of the nodes could overcommit one.
	nodeCount           = 5
	nodeCPU, nodeMemory = "2", "8Gi"
	podCPU, podMemory   = "100m", "64Mi"
	// Short lease settings keep the suite short: a leader paused past
	// its Lease is replaced within seconds.
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// decider is the decidedBy of the suite's decisions.
	decider = "fault-suite"
)

var (
	ctx context.Context
	cs  kubernetes.Interface
	c   client.Client
	// requests is c with a timeout on each request, for the writes made
	// while the API server may be down.
	requests client.Client
	watch    *outage.PodWatch
	dir      string

	// etcd and apiserver are the control plane's processes, restartable.
	etcd, apiserver *testenv.ControlPlaneProcess
	// replicas are the two operator replicas; proxies[i] is the proxy
	// between replicas[i] and the API server.
	replicas []*outage.Replica
	proxies  []*proxy
	// restarts counts replicas found exited (a leader that lost its
	// Lease exits, as kube-scheduler does) and started again.
	restarts int
)

func TestFaults(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fault suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	// Errors only: the control plane's outages make client-go noisy.
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.Level(zapcore.ErrorLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(cancel)

	var err error
	dir, err = os.MkdirTemp("", "faults-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() || os.Getenv("FAULTS_KEEP_LOGS") != "" {
			GinkgoWriter.Printf("replica and control plane logs kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	bin, err := testenv.BuildOperator(ctx, dir)
	Expect(err).NotTo(HaveOccurred())

	env, err := testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	// kube-apiserver stops first, whichever process it is now, while
	// etcd still serves its shutdown; etcd last.
	DeferCleanup(func() error {
		var errs []error
		if apiserver != nil {
			errs = append(errs, apiserver.Stop())
		}
		errs = append(errs, env.Stop())
		if etcd != nil {
			errs = append(errs, etcd.Stop())
		}
		return errors.Join(errs...)
	})
	etcd, err = testenv.FindControlPlaneProcess("etcd", filepath.Join(dir, "etcd.log"))
	Expect(err).NotTo(HaveOccurred())
	apiserver, err = testenv.FindControlPlaneProcess("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"))
	Expect(err).NotTo(HaveOccurred())

	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	bounded := rest.CopyConfig(cfg)
	bounded.Timeout = 5 * time.Second
	requests, err = client.New(bounded, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	for i := range nodeCount {
		Expect(testenv.CreateNode(ctx, c, testenv.Node(fmt.Sprintf("node-%d", i), nodeCPU, nodeMemory, nil))).To(Succeed())
	}
	Expect(c.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: schedulerName}})).To(Succeed())
	Expect(c.Create(ctx, approvalProfile())).To(Succeed())

	watch = outage.NewPodWatch()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(watch.Handler())
	Expect(err).NotTo(HaveOccurred())
	watchCtx, stopWatch := context.WithCancel(ctx)
	factory.Start(watchCtx.Done())
	DeferCleanup(func() { stopWatch(); factory.Shutdown() })
	for typ, ok := range factory.WaitForCacheSync(watchCtx.Done()) {
		Expect(ok).To(BeTrue(), "informer of %v synced", typ)
	}

	server, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	Expect(server.Host).NotTo(BeEmpty(), "the API server's address %q", cfg.Host)
	for _, name := range []string{"a", "b"} {
		p, err := newProxy(server.Host)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.close)
		kubeconfig, err := outage.AdminKubeconfig(env, dir, "replica-"+name, "https://"+p.addr())
		Expect(err).NotTo(HaveOccurred())
		r, err := outage.NewReplica(name, bin, filepath.Join(dir, "replica-"+name+".log"), []string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect",
			"--leader-election-id=" + leaseName,
			"--leader-election-namespace=" + namespace,
			"--leader-elect-lease-duration=" + leaseDuration.String(),
			"--leader-elect-renew-deadline=" + renewDeadline.String(),
			"--leader-elect-retry-period=" + retryPeriod.String(),
			"--zap-time-encoding=rfc3339nano",
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Start()).To(Succeed())
		DeferCleanup(func() error {
			// A paused replica would not see SIGTERM.
			_ = r.Resume()
			return r.Stop()
		})
		replicas, proxies = append(replicas, r), append(proxies, p)
	}
})

// approvalProfile holds every pod of approvalScheduler at Permit for a
// decision, for longer than the suite runs.
func approvalProfile() *schedulingv1alpha1.SchedulingProfile {
	p := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: approvalScheduler}}
	Expect(yaml.Unmarshal([]byte(`
plugins:
  multiPoint:
    enabled:
    - name: ManualApproval
pluginConfig:
- name: ManualApproval
  args:
    approvalWindow: 30m
`), &p.Spec)).To(Succeed())
	return p
}

// steadyLeader waits until both replicas are ready and exactly one leads,
// starting again any replica that exited, and returns the leader with the
// Lease's holder identity.
func steadyLeader() (*outage.Replica, string) {
	var leader *outage.Replica
	var holder string
	Eventually(func(g Gomega) {
		leader = nil
		for _, r := range replicas {
			if r.Exited() {
				GinkgoWriter.Printf("%s replica %s exited (%v); starting it again\n", stamp(), r.Name, r.Err())
				restarts++
				g.Expect(r.Start()).To(Succeed())
			}
		}
		// Names, not replicas, go to the matchers: formatting a replica
		// would read its process's state while the process exits.
		var leading []string
		for _, r := range replicas {
			g.Expect(r.Ready(ctx)).To(BeTrue(), "replica %s ready", r.Name)
			if r.Leads(ctx, leaseName) {
				leading = append(leading, r.Name)
				leader = r
			}
		}
		g.Expect(leading).To(HaveLen(1), "one leader")
		lease, err := cs.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		holder = *lease.Spec.HolderIdentity
	}).Should(Succeed())
	return leader, holder
}

// proxyOf is the proxy in front of r.
func proxyOf(r *outage.Replica) *proxy {
	for i := range replicas {
		if replicas[i] == r {
			return proxies[i]
		}
	}
	Fail("no proxy for replica " + r.Name)
	return nil
}

// createRetrying creates pod, retrying while the API server cannot take
// it; a create that timed out but went through counts as created.
func createRetrying(pod *corev1.Pod) {
	Eventually(func() error {
		err := requests.Create(ctx, pod.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}).Should(Succeed(), "creating pod %s", pod.Name)
}

// stamp is the wall clock, for progress lines.
func stamp() string { return time.Now().Format("15:04:05.000") }

// indent indents every line of s.
func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
