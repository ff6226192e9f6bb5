// Package localcluster runs a throw-away Kubernetes control plane on
// loopback (kube-apiserver, etcd and optionally kube-controller-manager
// with the controllers volumes, workloads and DRA need, the binaries the tests
// build) and fills it with
// simulated parts: Nodes that report capacity and Ready, an optional
// simulated kubelet that marks bound pods Running, an optional
// simulated local-volume provisioner, and an optional simulated DRA
// driver that publishes simulated GPUs as ResourceSlices. The local run
// (cmd/profile-scheduler-local), the end-to-end suite and the performance
// harness all start their clusters through it.
//
// On Linux the control plane dies with the process that started it, even
// when that process is killed with SIGKILL. envtest starts etcd and
// kube-apiserver without a way to ask for that, so they are started through
// a launcher that briefly runs the current binary in their place: a binary
// that imports this package serves as that launcher from its init.
package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// KubernetesVersion is the version of the control plane built by
// hack/build-control-plane.sh (its K8S_VERSION default), which the local
// run and the test suites start.
const KubernetesVersion = "1.37.2"

// AdminUser is the user of the kubeconfig handed to people: a member of
// system:masters, so it may do anything, approving pods included.
const AdminUser = "admin"

// Scheme knows the built-in kinds and the project's kinds.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(s))
	utilruntime.Must(podgroupv1alpha1.AddToScheme(s))
	return s
}

// Options configures Start.
type Options struct {
	// AssetsDir holds the kube-apiserver and etcd binaries; empty means
	// KUBEBUILDER_ASSETS.
	AssetsDir string
	// CRDDir holds the CustomResourceDefinitions to install.
	CRDDir string
	// APIServerArgs are extra kube-apiserver flags (name without dashes),
	// after WorkloadAPIServerArgs, which a flag given here replaces.
	APIServerArgs map[string][]string
	// Output, when set, receives the control plane's own logs.
	Output bool
	// ControllerManager starts kube-controller-manager (from the same
	// directory) with Controllers.
	ControllerManager bool
	// Controllers are kube-controller-manager's --controllers; empty
	// means VolumeControllers, so claims get bound.
	Controllers []string
	// ControllerManagerOutput receives kube-controller-manager's logs;
	// nil discards them.
	ControllerManagerOutput io.Writer
	// Webhooks are files of admission webhook configurations to install,
	// rewritten to call a server on loopback with a certificate of a CA
	// generated for the run: serve them with WebhookServer.
	Webhooks []string
	// Dir is where the cluster keeps everything it writes: etcd's data,
	// the serving and client certificates with their private keys, the
	// launchers and process ids. It must not exist; Start creates it and
	// Stop removes it. Empty means a new temporary directory. A caller
	// that may be killed before Stop names it, so it can remove what a
	// killed cluster left.
	Dir string
}

// Cluster is a running control plane. Stop it when done: it runs
// kube-apiserver, etcd and kube-controller-manager as child processes. On
// Linux they are also killed when this process dies without stopping them,
// even by SIGKILL.
type Cluster struct {
	env *envtest.Environment
	// thread started etcd and kube-apiserver, and lives until they have
	// stopped: their parent-death signal is tied to it.
	thread *lockedThread
	// dir is private to the cluster (mode 0700): etcd's data, the
	// certificates, the launchers of etcd and kube-apiserver, their
	// process ids, kube-controller-manager's kubeconfig.
	dir string
	// etcd are the files of etcd's TLS and client certificates.
	etcd *etcdTLS
	// kcm is kube-controller-manager, when started.
	kcm *ControllerManager
	// Config is an administrator's client configuration.
	Config *rest.Config
	// Clientset talks to the API server as Config.
	Clientset kubernetes.Interface
}

// Start starts kube-apiserver and etcd, listening on loopback only, and
// installs the CRDs. etcd answers only clients with a certificate of the
// run's own CA: kube-apiserver.
func Start(o Options) (*Cluster, error) {
	dir := o.AssetsDir
	if dir == "" {
		dir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if dir == "" {
		return nil, errors.New("no control plane binaries: set KUBEBUILDER_ASSETS to the directory that hack/build-control-plane.sh prints (make control-plane builds it)")
	}
	bins := []string{"kube-apiserver", "etcd"}
	if o.ControllerManager {
		bins = append(bins, "kube-controller-manager")
	}
	for _, bin := range bins {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return nil, fmt.Errorf("control plane binary %s not found in %s: run make control-plane", bin, dir)
		}
	}
	privateDir, err := makePrivateDir(o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		env: &envtest.Environment{
			BinaryAssetsDirectory:    dir,
			Scheme:                   Scheme(),
			ControlPlaneStartTimeout: 2 * time.Minute,
			ControlPlaneStopTimeout:  time.Minute,
			AttachControlPlaneOutput: o.Output,
			// Inside the private directory rather than envtest's own
			// temporary ones, so one removal takes all of it.
			ControlPlane: envtest.ControlPlane{
				Etcd:      &envtest.Etcd{DataDir: filepath.Join(privateDir, "etcd-data")},
				APIServer: &envtest.APIServer{CertDir: filepath.Join(privateDir, "certs")},
			},
		},
		thread: startLockedThread(),
		dir:    privateDir,
	}
	if c.etcd, err = newEtcdTLS(filepath.Join(privateDir, "etcd-pki")); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if err := c.startAPIServer(dir, o); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if o.ControllerManager {
		if err := c.startControllerManager(dir, o.Controllers, o.ControllerManagerOutput); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// makePrivateDir creates dir, which must not exist, or a new temporary
// directory when dir is empty, with the directory for the certificates,
// which envtest expects to exist.
func makePrivateDir(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "localcluster-"); err != nil {
			return "", err
		}
	} else if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("the cluster's directory: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// startAPIServer starts etcd and kube-apiserver through envtest, from
// c.thread, and installs the CRDs.
func (c *Cluster) startAPIServer(assetsDir string, o Options) error {
	env := c.env
	for _, p := range []struct {
		name string
		path *string
	}{
		{"etcd", &env.ControlPlane.Etcd.Path},
		{"kube-apiserver", &env.ControlPlane.GetAPIServer().Path},
	} {
		launcher, err := parentDeathLauncher(c.dir, filepath.Join(assetsDir, p.name), c.pidFile(p.name))
		if err != nil {
			return err
		}
		*p.path = launcher
	}
	if o.CRDDir != "" {
		env.CRDDirectoryPaths = []string{o.CRDDir}
		env.ErrorIfCRDPathMissing = true
	}
	env.WebhookInstallOptions.Paths = o.Webhooks
	api := env.ControlPlane.GetAPIServer()
	// envtest binds the secure port to 127.0.0.1 already; say so
	// explicitly, as the address is what keeps the cluster private.
	api.Address = "127.0.0.1"
	if err := c.etcd.configure(env.ControlPlane.Etcd, api); err != nil {
		return err
	}
	for name, values := range WorkloadAPIServerArgs() {
		api.Configure().Set(name, values...)
	}
	for name, values := range o.APIServerArgs {
		api.Configure().Set(name, values...)
	}
	var err error
	c.thread.do(func() { c.Config, err = env.Start() })
	if err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	if err := c.keepWebhookCerts(); err != nil {
		return err
	}
	c.Clientset, err = kubernetes.NewForConfig(c.Config)
	return err
}

// keepWebhookCerts moves the webhook serving certificate and key envtest
// wrote into a temporary directory of its own to the cluster's private
// directory, so that a run killed outright leaves its key there, where the
// next run removes it, rather than in the system's temporary directory.
func (c *Cluster) keepWebhookCerts() error {
	o := &c.env.WebhookInstallOptions
	dir := filepath.Join(c.dir, "webhook-certs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		data, err := os.ReadFile(filepath.Join(o.LocalServingCertDir, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.LocalServingCertDir); err != nil {
		return err
	}
	o.LocalServingCertDir = dir
	return nil
}

// WebhookServer serves the webhooks of Options.Webhooks where the cluster
// calls them; nil when there are none.
func (c *Cluster) WebhookServer() webhook.Server {
	if len(c.env.WebhookInstallOptions.ValidatingWebhooks)+len(c.env.WebhookInstallOptions.MutatingWebhooks) == 0 {
		return nil
	}
	return WebhookServer(&c.env.WebhookInstallOptions)
}

// WebhookServer serves at the loopback address, and with the certificate,
// that envtest installed webhook configurations for.
func WebhookServer(o *envtest.WebhookInstallOptions) webhook.Server {
	return webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
}

func (c *Cluster) pidFile(name string) string { return filepath.Join(c.dir, name+".pid") }

// startControllerManager starts kube-controller-manager as a member of
// system:masters, with a kubeconfig of its own in a private directory.
func (c *Cluster) startControllerManager(assetsDir string, controllers []string, out io.Writer) error {
	_, data, err := c.AddUser("kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.dir, "kube-controller-manager.kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	config, err := EnvironmentControllerManagerConfig(c.env, kubeconfig, controllers, c.dir)
	if err != nil {
		return err
	}
	c.kcm, err = StartControllerManager(assetsDir, config, out)
	return err
}

// Stop stops kube-controller-manager if it runs, then kube-apiserver and
// etcd, and removes their data. It also stops what a failed Start left
// running.
func (c *Cluster) Stop() error {
	var errs []error
	if c.kcm != nil {
		errs = append(errs, c.kcm.Stop())
	}
	// envtest kills what does not stop in time; ending the thread that
	// started etcd and kube-apiserver kills them too, should one remain.
	errs = append(errs, c.env.Stop())
	c.thread.close()
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// Processes are the control plane processes of the cluster: etcd,
// kube-apiserver and, when it runs, kube-controller-manager. Outside Linux
// only kube-controller-manager is known.
func (c *Cluster) Processes() []Process {
	var ps []Process
	for _, name := range []string{"etcd", "kube-apiserver"} {
		data, err := os.ReadFile(c.pidFile(name))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			ps = append(ps, Process{Name: name, PID: pid, Command: filepath.Join(c.env.BinaryAssetsDirectory, name)})
		}
	}
	if c.kcm != nil {
		ps = append(ps, Process{Name: "kube-controller-manager", PID: c.kcm.Pid(), Command: c.kcm.cmd.Args[0]})
	}
	return ps
}

// ControllerManager is kube-controller-manager, or nil when Start was not
// asked to run it.
func (c *Cluster) ControllerManager() *ControllerManager { return c.kcm }

// Host is the API server's URL.
func (c *Cluster) Host() string { return strings.TrimSuffix(c.Config.Host, "/") }

// AddUser returns a user authenticated by a client certificate, with
// groups, and that user's kubeconfig.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, []byte, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, nil, err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	return u.Config(), data, nil
}

// WriteAdminKubeconfig writes the kubeconfig of AdminUser to path (mode
// 0600, directories created) and returns the user's client configuration.
func (c *Cluster) WriteAdminKubeconfig(path string) (*rest.Config, error) {
	cfg, data, err := c.AddUser(AdminUser, "system:masters")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return cfg, os.WriteFile(path, data, 0o600)
}
