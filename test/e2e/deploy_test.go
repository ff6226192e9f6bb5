package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// What config/default installs, by the names kustomize gives them.
const (
	deployNamespace = "profile-scheduler-system"
	serviceAccount  = "system:serviceaccount:" + deployNamespace + ":profile-scheduler-controller-manager"
	approverRole    = "profile-scheduler-approver"
	leaseName       = "profile-scheduler.scheduling.schedprofiles.io"
)

var _ = Describe("Installing with config/default", Ordered, func() {
	var (
		cluster   *localcluster.Cluster
		admin     client.Client
		kubectl   *testenv.Kubectl
		pluginDir string
		dir       string
		ctx       context.Context
	)

	kubectlOK := func(k *testenv.Kubectl, args ...string) string {
		GinkgoHelper()
		r, err := k.Run(args...)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), "kubectl %v:\n%s%s", args, r.Stdout, r.Stderr)
		return r.Stdout
	}
	config := func(parts ...string) string {
		return filepath.Join(append([]string{testenv.RepoRoot(), "config"}, parts...)...)
	}

	BeforeAll(func() {
		ctx = context.Background()
		dir = GinkgoT().TempDir()
		pluginDir = filepath.Join(dir, "bin")
		Expect(testenv.BuildKubectlPlugins(pluginDir)).To(Succeed())
		assets, err := testenv.AssetsDir()
		Expect(err).NotTo(HaveOccurred())
		// No CRDs up front: config/default installs them.
		cluster, err = localcluster.Start(localcluster.Options{AssetsDir: assets})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cluster.Stop)
		adminConfig, err := cluster.WriteAdminKubeconfig(filepath.Join(dir, "admin.kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		admin, err = client.New(adminConfig, client.Options{Scheme: localcluster.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		kubectl, err = testenv.NewKubectl(filepath.Join(dir, "admin.kubeconfig"), pluginDir)
		Expect(err).NotTo(HaveOccurred())
	})

	It("applies to a fresh cluster, and a server-side dry run of it passes", func() {
		out := kubectlOK(kubectl, "apply", "--server-side", "-k", config("default"))
		Expect(out).To(ContainSubstring("deployment.apps/profile-scheduler-controller-manager serverside-applied"))
		out = kubectlOK(kubectl, "apply", "-k", config("default"), "--dry-run=server")
		Expect(out).To(ContainSubstring("validatingadmissionpolicybinding.admissionregistration.k8s.io/profile-scheduler-waitingpod-decided-by"))
		r, err := kubectl.Run("diff", "--server-side", "-k", config("default"))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), "the installed objects differ from config/default:\n%s%s", r.Stdout, r.Stderr)
	})

	It("sets the image make deploy is given, without touching the checkout", func() {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "deploy.sh"), "render", "example.com:5000/team/profile-scheduler:v1.2.3").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("image: example.com:5000/team/profile-scheduler:v1.2.3\n"))
		Expect(string(out)).NotTo(ContainSubstring("image: profile-scheduler:latest"))
		out, err = exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "deploy.sh"), "render", "example.com/ps@sha256:0123").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("image: example.com/ps@sha256:0123\n"))
	})

	It("installs a hardened, leader-elected Deployment", func() {
		out := kubectlOK(kubectl, "get", "deployment", "-n", deployNamespace, "profile-scheduler-controller-manager", "-o", "yaml")
		for _, want := range []string{
			"- --leader-elect", "readOnlyRootFilesystem: true", "runAsNonRoot: true",
			"allowPrivilegeEscalation: false", "containerPort: 8080", "path: /healthz", "path: /readyz",
			"serviceAccountName: profile-scheduler-controller-manager",
		} {
			Expect(out).To(ContainSubstring(want))
		}
		Expect(out).To(MatchRegexp(`requests:\s+cpu: \S+\s+memory: \S+`))
	})

	It("runs the operator under the installed ServiceAccount and RBAC: schedules, elects a leader, and lets approvers decide", func() {
		// The operator as the Deployment runs it, with the rights of its
		// ServiceAccount and nothing more.
		opConfig := rest.CopyConfig(cluster.Config)
		opConfig.Impersonate = rest.ImpersonationConfig{
			UserName: serviceAccount,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace, "system:authenticated"},
		}
		mgr, err := ctrl.NewManager(opConfig, ctrl.Options{
			Scheme:                        localcluster.Scheme(),
			Metrics:                       metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:        "0",
			LeaderElection:                true,
			LeaderElectionID:              leaseName,
			LeaderElectionNamespace:       deployNamespace,
			LeaderElectionReleaseOnCancel: true,
		})
		Expect(err).NotTo(HaveOccurred())
		opCtx, cancel := context.WithCancel(ctx)
		_, err = operator.Setup(opCtx, mgr, operator.Options{
			Registry:               plugins.NewInTreeRegistry(),
			ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
		})
		Expect(err).NotTo(HaveOccurred())
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(opCtx)).To(Succeed())
		}()
		DeferCleanup(func() { cancel(); <-done })

		Expect(localcluster.CreateNodes(ctx, cluster.Clientset, localcluster.Nodes("node", 3, localcluster.Standard), 3)).To(Succeed())
		kubectlOK(kubectl, "apply", "-k", config("samples"))
		for _, name := range []string{"profile-scheduler", "bin-packing", "approvals"} {
			Eventually(func(g Gomega) {
				sp := &schedulingv1alpha1.SchedulingProfile{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, sp)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive)).To(BeTrue(), "%s: %+v", name, sp.Status.Conditions)
			}, "90s").Should(Succeed())
		}
		Eventually(func() string {
			out, _ := kubectl.Run("get", "lease", "-n", deployNamespace, leaseName, "-o", "jsonpath={.spec.holderIdentity}")
			return out.Stdout
		}).ShouldNot(BeEmpty())

		// The default profile runs the cluster-wide plugins, whose informers
		// need the RBAC for services, controllers and PodDisruptionBudgets.
		kubectlOK(kubectl, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "pods", "web.yaml"))
		kubectlOK(kubectl, "wait", "--for=condition=PodScheduled", "pods", "-l", "app=web", "--timeout=60s")

		// An approver: bound to the approver ClusterRole and nothing else.
		_, data, err := cluster.AddUser("alice")
		Expect(err).NotTo(HaveOccurred())
		alicePath := filepath.Join(dir, "alice.kubeconfig")
		Expect(os.WriteFile(alicePath, data, 0o600)).To(Succeed())
		alice, err := testenv.NewKubectl(alicePath, pluginDir)
		Expect(err).NotTo(HaveOccurred())
		kubectlOK(kubectl, "create", "clusterrolebinding", "alice-approves", "--clusterrole="+approverRole, "--user=alice")
		r, err := alice.Run("auth", "can-i", "delete", "pods")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(r.Stdout)).To(Equal("no"))

		kubectlOK(kubectl, "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "pods", "train.yaml"))
		kubectlOK(kubectl, "wait", "--for=create", "waitingpod/train-0", "--timeout=60s")
		kubectlOK(kubectl, "wait", "--for=condition=Waiting", "waitingpod/train-0", "--timeout=60s")
		Expect(kubectlOK(alice, "approve", "waitingpod/train-0", "--reason", "quota checked")).To(Equal("waitingpod/train-0 approved\n"))
		kubectlOK(kubectl, "wait", "--for=condition=PodScheduled", "pod/train-0", "--timeout=60s")
		Eventually(func() string {
			return kubectlOK(kubectl, "get", "events", "--field-selector", "involvedObject.name=train-0,reason=Approved")
		}).Should(ContainSubstring("Approved by alice"))

		pod := &corev1.Pod{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "train-0"}, pod)).To(Succeed())
		Expect(pod.Spec.NodeName).To(HavePrefix("node-"))
	})
})
