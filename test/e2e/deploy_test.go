package e2e_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/internal/webhook"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// What config/default installs, by the names kustomize gives them.
const (
	deployNamespace   = "profile-scheduler-system"
	serviceAccount    = "system:serviceaccount:" + deployNamespace + ":profile-scheduler-controller-manager"
	approverRole      = "profile-scheduler-approver"
	metricsReaderRole = "profile-scheduler-metrics-reader"
	leaseName         = "profile-scheduler.scheduling.schedprofiles.io"
	webhookConfig     = "profile-scheduler-validating-webhook-configuration"
	webhookCertSecret = "profile-scheduler-webhook-cert"
	webhookPath       = "/validate-scheduling-schedprofiles-io-v1alpha1-schedulingprofile"
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
	// operatorConfig acts as the Deployment's pods do: with the rights of
	// the installed ServiceAccount and nothing more.
	operatorConfig := func() *rest.Config {
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: serviceAccount,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace, "system:authenticated"},
		}
		return cfg
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
			"allowPrivilegeEscalation: false", "path: /healthz", "path: /readyz",
			"- --metrics-secure\n", "- --metrics-bind-address=:8443", "containerPort: 8443",
			"serviceAccountName: profile-scheduler-controller-manager",
		} {
			Expect(out).To(ContainSubstring(want))
		}
		Expect(out).To(MatchRegexp(`requests:\s+cpu: \S+\s+memory: \S+`))
		Expect(kubectlOK(kubectl, "get", "service", "-n", deployNamespace, "profile-scheduler-metrics",
			"-o", "jsonpath={.spec.ports[*].name}/{.spec.ports[*].port}")).To(Equal("https/8443"))
	})

	It("renders a ServiceMonitor that verifies the metrics certificate, kept out of config/default", func() {
		objects := map[string]*unstructured.Unstructured{}
		for _, doc := range strings.Split(kubectlOK(kubectl, "kustomize", config("prometheus")), "\n---\n") {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			objects[u.GetKind()+"/"+u.GetName()] = u
		}
		monitor := objects["ServiceMonitor/profile-scheduler-metrics"]
		certificate := objects["Certificate/profile-scheduler-metrics-cert"]
		service := objects["Service/profile-scheduler-metrics"]
		deployment := objects["Deployment/profile-scheduler-controller-manager"]
		for _, o := range []*unstructured.Unstructured{monitor, certificate, service, deployment} {
			Expect(o).NotTo(BeNil(), "config/prometheus renders %v", slices.Collect(maps.Keys(objects)))
			Expect(o.GetNamespace()).To(Equal(deployNamespace))
		}

		// Prometheus checks whom it talks to: the CA cert-manager writes
		// beside the certificate, for the metrics Service's DNS name.
		endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		Expect(endpoints).To(HaveLen(1))
		endpoint := endpoints[0].(map[string]any)
		Expect(endpoint).To(HaveKeyWithValue("scheme", "https"))
		Expect(endpoint).To(HaveKeyWithValue("port", "https"))
		skip, _, _ := unstructured.NestedBool(endpoint, "tlsConfig", "insecureSkipVerify")
		Expect(skip).To(BeFalse())
		serverName, _, _ := unstructured.NestedString(endpoint, "tlsConfig", "serverName")
		Expect(serverName).To(Equal(service.GetName() + "." + deployNamespace + ".svc"))
		dnsNames, _, _ := unstructured.NestedStringSlice(certificate.Object, "spec", "dnsNames")
		Expect(dnsNames).To(ContainElement(serverName))
		secretName, _, _ := unstructured.NestedString(certificate.Object, "spec", "secretName")
		caSecret, _, _ := unstructured.NestedStringMap(endpoint, "tlsConfig", "ca", "secret")
		Expect(caSecret).To(Equal(map[string]string{"name": secretName, "key": "ca.crt"}))
		ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
		Expect(ports).To(ContainElement(HaveKeyWithValue("name", "https")))
		selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		Expect(service.GetLabels()).To(Equal(selector))

		// The operator serves that certificate: the Secret mounted where
		// --metrics-cert-dir points.
		d := &appsv1.Deployment{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(deployment.Object, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "metrics-cert"),
			HaveField("Secret.SecretName", secretName),
			HaveField("Secret.Optional", BeNil()))))
		manager := d.Spec.Template.Spec.Containers[0]
		Expect(manager.VolumeMounts).To(ContainElement(And(HaveField("Name", "metrics-cert"), HaveField("ReadOnly", true))))
		for _, m := range manager.VolumeMounts {
			if m.Name == "metrics-cert" {
				Expect(manager.Args).To(ContainElement("--metrics-cert-dir=" + m.MountPath))
			}
		}
		Expect(manager.Args).To(ContainElement("--metrics-secure"))

		Expect(kubectlOK(kubectl, "kustomize", config("default"))).NotTo(ContainSubstring("kind: ServiceMonitor"))
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "deploy.sh"), "render", "example.com/ps:v1").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).NotTo(ContainSubstring("kind: ServiceMonitor"))
		render := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "deploy.sh"), "render", "example.com/ps:v1")
		render.Env = append(os.Environ(), "DEPLOY_CONFIG="+config("prometheus"))
		out, err = render.Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("kind: ServiceMonitor"))
		Expect(string(out)).To(ContainSubstring("image: example.com/ps:v1\n"))
	})

	It("refuses to serve profiles over plain HTTP beyond loopback", func() {
		bin, err := testenv.BuildOperator(ctx, dir)
		Expect(err).NotTo(HaveOccurred())
		// Refused before anything listens or reaches the API server; an
		// operator that started anyway is stopped after a minute.
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		run := exec.CommandContext(runCtx, bin, "--kubeconfig="+filepath.Join(dir, "admin.kubeconfig"),
			"--metrics-secure=false", "--metrics-bind-address=:0", "--health-probe-bind-address=0")
		out, err := run.CombinedOutput()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "the operator started: %v\n%s", err, out)
		Expect(string(out)).To(ContainSubstring(`profiling would serve /debug/pprof/ to anyone who reaches \":0\"`))
	})

	It("runs the operator under the installed ServiceAccount and RBAC: schedules, elects a leader, lets approvers decide, serves metrics to readers only", func() {
		// The operator as the Deployment runs it, with the rights of its
		// ServiceAccount and nothing more, its metrics served securely as
		// there but on loopback.
		metricsAddr, err := testenv.FreeLoopbackAddress()
		Expect(err).NotTo(HaveOccurred())
		metricsOptions, err := operator.MetricsServer(metricsAddr, true, "", true)
		Expect(err).NotTo(HaveOccurred())
		// The API server here reaches no Service, so the installed
		// webhook configuration is pointed at this process; the rest of
		// it (rules, failure policy, timeout) and the certificate the
		// operator keeps, under the installed RBAC, are as deployed.
		webhookAddr, err := testenv.FreeLoopbackAddress()
		Expect(err).NotTo(HaveOccurred())
		_, webhookPort, err := net.SplitHostPort(webhookAddr)
		Expect(err).NotTo(HaveOccurred())
		kubectlOK(kubectl, "patch", "validatingwebhookconfiguration", webhookConfig, "--type=json", "-p",
			`[{"op":"remove","path":"/webhooks/0/clientConfig/service"},{"op":"add","path":"/webhooks/0/clientConfig/url","value":"https://localhost:`+webhookPort+webhookPath+`"}]`)
		certs, err := webhook.NewCertificates(operatorConfig(), webhook.CertificateOptions{
			Secret:               types.NamespacedName{Namespace: deployNamespace, Name: webhookCertSecret},
			WebhookConfiguration: webhookConfig,
			Hosts:                []string{"localhost"},
		})
		Expect(err).NotTo(HaveOccurred())
		port, err := strconv.Atoi(webhookPort)
		Expect(err).NotTo(HaveOccurred())
		running, err := testenv.StartOperator(ctx, operatorConfig(), testenv.OperatorOptions{
			Manager: ctrl.Options{
				Scheme:                        localcluster.Scheme(),
				Metrics:                       metricsOptions,
				WebhookServer:                 ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){certs.TLS}}),
				LeaderElection:                true,
				LeaderElectionID:              leaseName,
				LeaderElectionNamespace:       deployNamespace,
				LeaderElectionReleaseOnCancel: true,
			},
			BeforeSetup: certs.SetupWithManager,
			Operator: operator.Options{
				ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
				Namespace:              deployNamespace,
				AdmissionWebhook:       true,
			},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(running.Stop()).To(Succeed()) })

		By("refusing an invalid profile at apply, once the operator serves a certificate the API server trusts")
		Eventually(func() error { return certs.Ready(nil) }).Should(Succeed())
		Expect(kubectlOK(kubectl, "get", "secret", "-n", deployNamespace, webhookCertSecret, "-o", "go-template={{range $k, $v := .data}}{{$k}} {{end}}")).To(Equal("ca.crt ca.key tls.crt tls.key "))
		invalid := filepath.Join(dir, "invalid-profile.yaml")
		Expect(os.WriteFile(invalid, []byte(`apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: invalid
spec:
  plugins:
    filter:
      enabled:
      - name: NoSuchPlugin
`), 0o644)).To(Succeed())
		for _, args := range [][]string{{"apply", "--dry-run=server", "-f", invalid}, {"apply", "-f", invalid}} {
			r, err := kubectl.Run(args...)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Code).NotTo(BeZero())
			Expect(r.Stderr).To(ContainSubstring(`admission webhook "vschedulingprofile.scheduling.schedprofiles.io" denied the request: SchedulingProfile invalid cannot be built: Filter plugin "NoSuchPlugin": no such plugin is registered`))
		}

		Expect(localcluster.CreateNodes(ctx, cluster.Clientset, localcluster.Nodes("node", 3, localcluster.Standard), 3)).To(Succeed())
		// The deployed operator runs without the workload gates, as
		// kube-scheduler's defaults: the workloads sample is refused at
		// apply, naming the gate, and the others are applied.
		samples, err := kubectl.Run("apply", "-k", config("samples"))
		Expect(err).NotTo(HaveOccurred())
		Expect(samples.Code).NotTo(BeZero(), samples.Stdout)
		Expect(samples.Stdout).To(ContainSubstring("schedulingprofile.scheduling.schedprofiles.io/gpu-gangs created"))
		Expect(strings.TrimSpace(samples.Stderr)).To(MatchRegexp(`^Error from server \(Forbidden\): error when creating .*: admission webhook "vschedulingprofile.scheduling.schedprofiles.io" denied the request: SchedulingProfile workloads cannot be built: MultiPoint plugin "GangScheduling": kube-scheduler 1.37.2 uses this plugin only with the GenericWorkload feature gate, off by default`))
		for _, name := range []string{"profile-scheduler", "bin-packing", "approvals"} {
			Eventually(func(g Gomega) {
				sp := &schedulingv1alpha1.SchedulingProfile{}
				g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, sp)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive)).To(BeTrue(), "%s: %+v", name, sp.Status.Conditions)
			}, "90s").Should(Succeed())
		}
		// Accepted profiles have their specs recorded in ControllerRevisions,
		// and the leader holds its Lease: both through the namespaced Role.
		Eventually(func() string {
			out, _ := kubectl.Run("get", "lease", "-n", deployNamespace, leaseName, "-o", "jsonpath={.spec.holderIdentity}")
			return out.Stdout
		}).ShouldNot(BeEmpty())
		Expect(kubectlOK(kubectl, "get", "controllerrevisions", "-n", deployNamespace, "-o", "name")).To(ContainSubstring("controllerrevision.apps/bin-packing-"))

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
		Expect(kubectlOK(alice, "approve", "waitingpod/train-0", "--reason", "quota checked")).To(MatchRegexp(`^waitingpod/train-0 approved \(pod UID [0-9a-f-]+, profile approvals\)\n$`))
		kubectlOK(kubectl, "wait", "--for=condition=PodScheduled", "pod/train-0", "--timeout=60s")
		Eventually(func() string {
			return kubectlOK(kubectl, "get", "events", "--field-selector", "involvedObject.name=train-0,reason=Approved")
		}).Should(ContainSubstring("Approved by alice"))

		pod := &corev1.Pod{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "train-0"}, pod)).To(Succeed())
		Expect(pod.Spec.NodeName).To(HavePrefix("node-"))

		By("serving metrics only to callers the API server lets read them")
		// Prometheus's ServiceAccount bound to metrics-reader as
		// docs/metrics.md says, and one bound to nothing.
		kubectlOK(kubectl, "create", "namespace", "monitoring")
		kubectlOK(kubectl, "create", "serviceaccount", "prometheus", "-n", "monitoring")
		kubectlOK(kubectl, "create", "serviceaccount", "nobody", "-n", "monitoring")
		kubectlOK(kubectl, "create", "clusterrolebinding", "prometheus-metrics", "--clusterrole="+metricsReaderRole, "--serviceaccount=monitoring:prometheus")
		token := func(sa string) string {
			return strings.TrimSpace(kubectlOK(kubectl, "create", "token", sa, "-n", "monitoring"))
		}
		prometheus, nobody := token("prometheus"), token("nobody")
		Eventually(func(g Gomega) {
			code, _, err := scrape(ctx, metricsAddr, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusUnauthorized))
		}).Should(Succeed())
		// A token the API server does not accept: controller-runtime's
		// filter answers 500 ("Authentication failed") where an API server
		// would answer 401; either way nothing is served.
		code, body, err := scrape(ctx, metricsAddr, "not-a-token")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusInternalServerError))
		Expect(body).NotTo(ContainSubstring("controller_runtime_"))
		code, _, err = scrape(ctx, metricsAddr, nobody)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden))
		code, body, err = scrape(ctx, metricsAddr, prometheus)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`controller_runtime_reconcile_total{controller="schedulingprofile"`))

		By("serving profiles only to callers allowed /debug/pprof/*, not to metrics readers")
		code, _, err = get(ctx, metricsAddr, "/debug/pprof/heap", prometheus)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden))
		// Another caller: the metrics endpoint caches a denial for 30
		// seconds (controller-runtime's authorizer), so prometheus would
		// stay refused that long after a grant. Should the profiler ask
		// before the API server's RBAC sees its binding, the wait outlasts
		// that denial too.
		kubectlOK(kubectl, "create", "serviceaccount", "profiler", "-n", "monitoring")
		kubectlOK(kubectl, "create", "clusterrole", "pprof-reader", "--verb=get", "--non-resource-url=/debug/pprof/*")
		kubectlOK(kubectl, "create", "clusterrolebinding", "profiler-pprof", "--clusterrole=pprof-reader", "--serviceaccount=monitoring:profiler")
		profiler := token("profiler")
		Eventually(func(g Gomega) {
			code, _, err := get(ctx, metricsAddr, "/debug/pprof/heap", profiler)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusOK))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	It("shows no diff for the certificate the operator wrote and the caBundle it set", func() {
		// Back to the Service, as installed; the caBundle stays.
		kubectlOK(kubectl, "patch", "validatingwebhookconfiguration", webhookConfig, "--type=json", "-p",
			`[{"op":"remove","path":"/webhooks/0/clientConfig/url"},{"op":"add","path":"/webhooks/0/clientConfig/service","value":{"name":"profile-scheduler-webhook-service","namespace":"`+deployNamespace+`","path":"`+webhookPath+`","port":443}}]`)
		Expect(kubectlOK(kubectl, "get", "validatingwebhookconfiguration", webhookConfig, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")).NotTo(BeEmpty())
		r, err := kubectl.Run("diff", "--server-side", "-k", config("default"))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), "the installed objects differ from config/default:\n%s%s", r.Stdout, r.Stderr)
	})

	It("keeps the operator's Leases and ControllerRevisions to its own namespace", func() {
		op, err := client.New(operatorConfig(), client.Options{Scheme: localcluster.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		can := func(verb, group, resource, namespace string) bool {
			GinkgoHelper()
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
			}}
			Expect(op.Create(ctx, review)).To(Succeed())
			return review.Status.Allowed
		}
		for _, verb := range []string{"get", "create", "update"} {
			Expect(can(verb, "coordination.k8s.io", "leases", deployNamespace)).To(BeTrue(), "%s leases", verb)
		}
		for _, verb := range []string{"get", "create", "delete"} {
			Expect(can(verb, "apps", "controllerrevisions", deployNamespace)).To(BeTrue(), "%s controllerrevisions", verb)
		}
		for _, ns := range []string{metav1.NamespaceSystem, corev1.NamespaceNodeLease, metav1.NamespaceDefault} {
			for _, verb := range []string{"get", "create", "update", "patch", "delete"} {
				Expect(can(verb, "coordination.k8s.io", "leases", ns)).To(BeFalse(), "%s leases in %s", verb, ns)
				Expect(can(verb, "apps", "controllerrevisions", ns)).To(BeFalse(), "%s controllerrevisions in %s", verb, ns)
			}
		}

		// kube-scheduler's leader Lease, as a real cluster has it: the
		// operator can neither read nor take it.
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kube-scheduler"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kube-scheduler-1")},
		}
		Expect(admin.Create(ctx, lease)).To(Succeed())
		taken := lease.DeepCopy()
		taken.Spec.HolderIdentity = ptr.To("profile-scheduler")
		err = op.Update(ctx, taken)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "updating kube-system/kube-scheduler: %v", err)
		err = op.Get(ctx, client.ObjectKeyFromObject(lease), &coordinationv1.Lease{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading kube-system/kube-scheduler: %v", err)
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(lease), lease)).To(Succeed())
		Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal("kube-scheduler-1")))
	})
})

// scrape GETs /metrics from the secure endpoint at addr, with a bearer
// token unless token is empty, and returns the status code and body.
func scrape(ctx context.Context, addr, token string) (int, string, error) {
	return get(ctx, addr, "/metrics", token)
}

// get GETs path from the secure endpoint at addr, as scrape does.
func get(ctx context.Context, addr, path, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The endpoint's certificate is self-signed, as in the Deployment by
	// default; what is under test is who gets an answer.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), errors.Join(err, resp.Body.Close())
}
