// Package testenv starts the real control plane (kube-apiserver and etcd, built
// by hack/build-control-plane.sh) with the project's CRDs installed, for the
// integration suites under test/, and, for the suites that need claims
// bound or ResourceClaims made from templates, kube-controller-manager's
// volume or DRA controllers beside it. The fault
// suite also crashes kube-apiserver and etcd and starts them again as they
// were (ControlPlaneProcess). StartOperator starts the operator in the
// suite's process as main.go wires it, so that every suite starts it the
// same way. test/README.md says which tier each suite under test/ is.
package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// RepoRoot is the root of the checkout, found from this file's location so
// suites work from any package directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme knows the built-in kinds and the project's kinds.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(s))
	utilruntime.Must(podgroupv1alpha1.AddToScheme(s))
	return s
}

// AssetsDir is where the control plane binaries are: KUBEBUILDER_ASSETS when
// set, else the cache that hack/build-control-plane.sh fills.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cache := os.Getenv("PROFILE_SCHEDULER_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "profile-scheduler")
	}
	dir := filepath.Join(cache, "control-plane", "v"+localcluster.KubernetesVersion)
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("control plane binaries not found in %s: run 'make control-plane' (or 'make test') first, or set KUBEBUILDER_ASSETS", dir)
		}
	}
	return dir, nil
}

// New returns an environment with the project's CRDs that Start brings up on
// loopback, serving scheduling.k8s.io/v1beta1's Workload and PodGroup as
// the local run does (localcluster.WorkloadAPIServerArgs); the caller
// stops it.
func New() (*envtest.Environment, error) {
	env, err := NewWithoutWorkloadAPI()
	if err != nil {
		return nil, err
	}
	api := env.ControlPlane.GetAPIServer()
	for name, values := range localcluster.WorkloadAPIServerArgs() {
		api.Configure().Set(name, values...)
	}
	return env, nil
}

// NewWithoutWorkloadAPI is New with kube-apiserver's defaults, which do
// not serve scheduling.k8s.io/v1beta1: a cluster whose API server was not
// given the workload gates.
func NewWithoutWorkloadAPI() (*envtest.Environment, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
		Scheme:                Scheme(),
	}, nil
}

// FreeLoopbackAddress is a loopback address with a port nothing listens on
// now, for a server a test starts in another process.
func FreeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
