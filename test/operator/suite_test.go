// Package operator_test runs the whole operator (scheduling loop, profile and
// WaitingPod controllers, WaitingPod mirror) in-process against a real API
// server, and drives it the way users do: profiles applied and pods approved
// with the real kubectl binary.
package operator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// retention is how long resolved WaitingPods stay in these tests.
const retention = 2 * time.Second

var (
	env       *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	kubectl   *testenv.Kubectl
	manifests string

	// op is the running operator; stopOperator stops it.
	op           *operator.Operator
	stopOperator func()
	// metricsRegistry exports the running operator's scheduling metrics.
	metricsRegistry *prometheus.Registry
)

// shadowStatusPeriod is how often shadows' counts reach their status here.
const shadowStatusPeriod = 500 * time.Millisecond

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	pluginDir := GinkgoT().TempDir()
	Expect(testenv.BuildKubectlPlugins(pluginDir)).To(Succeed())

	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	// The webhook judges the profiles webhook_test.go labels; the other
	// specs drive invalid profiles to their status.
	Expect(testenv.InstallWebhook(env, &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: "true"}})).To(Succeed())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())

	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	path, err := testenv.WriteKubeconfig(dir, "admin", data)
	Expect(err).NotTo(HaveOccurred())
	kubectl, err = testenv.NewKubectl(path, pluginDir)
	Expect(err).NotTo(HaveOccurred())
	manifests = filepath.Join(dir, "manifests")
	Expect(os.Mkdir(manifests, 0o755)).To(Succeed())
	kubectlOK("apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "policy"))

	startOperator()
})

var _ = AfterSuite(func() {
	if stopOperator != nil {
		stopOperator()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startOperator runs the operator as main.go wires it, in this process,
// with the in-tree plugins and whatever extra adds to them.
func startOperator(extra ...func(runtime.Registry) error) {
	GinkgoHelper()
	registry := plugins.NewInTreeRegistry()
	for _, add := range extra {
		Expect(add(registry)).To(Succeed())
	}
	metricsRegistry = prometheus.NewRegistry()
	running, err := testenv.StartOperator(context.Background(), cfg, testenv.OperatorOptions{
		Manager: ctrl.Options{Scheme: env.Scheme, WebhookServer: testenv.WebhookServer(env)},
		Operator: operator.Options{
			Registry:               registry,
			ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
			WaitingPodRetention:    retention,
			MetricsRegisterer:      metricsRegistry,
			ShadowStatusPeriod:     shadowStatusPeriod,
			AdmissionWebhook:       true,
			Scheduler: []scheduler.Option{
				scheduler.WithUnservedWarningDelay(unservedWarningDelay),
				scheduler.WithOwnSchedulerNamePrefixes(ownPrefix),
				// Workload-aware profiles are available, as with
				// --feature-gates=GenericWorkload=true; other profiles
				// are as without.
				scheduler.WithWorkloadGates(true, false),
			},
		},
	})
	Expect(err).NotTo(HaveOccurred())
	op = running.Operator
	stopOperator = func() {
		Expect(running.Stop()).To(Succeed())
		stopOperator = nil
	}
}

// kubectlOK runs kubectl as the admin and requires success.
func kubectlOK(args ...string) string {
	GinkgoHelper()
	r, err := kubectl.Run(args...)
	Expect(err).NotTo(HaveOccurred())
	Expect(r.Code).To(BeZero(), "kubectl %v:\n%s%s", args, r.Stdout, r.Stderr)
	return r.Stdout
}

// apply writes a manifest to a file and applies it with kubectl, as a user
// or a GitOps tool would; it returns the file.
func apply(name, manifest string, extraArgs ...string) string {
	GinkgoHelper()
	file := filepath.Join(manifests, name+".yaml")
	Expect(os.WriteFile(file, []byte(manifest), 0o644)).To(Succeed())
	kubectlOK(append([]string{"apply", "-f", file}, extraArgs...)...)
	return file
}

// namespace creates a fresh namespace for one spec.
func namespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "op-"}}
	Expect(k8sClient.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
