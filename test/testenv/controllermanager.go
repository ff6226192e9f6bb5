package testenv

import (
	"errors"
	"io"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// ControllerManager is kube-controller-manager running against a suite's
// environment: by default the volume controllers (localcluster.
// VolumeControllers), so the real PV binder binds claims to volumes and
// hands claims to external provisioners.
type ControllerManager struct {
	*localcluster.ControllerManager
	dir string
}

// StartControllerManager starts kube-controller-manager against env, which
// must be started, as an administrator of env, logging to out (for
// example GinkgoWriter). The binary is taken from the directory env runs
// kube-apiserver from (AssetsDir, so KUBEBUILDER_ASSETS when set); the
// error names make control-plane when it is not there. controllers are its
// --controllers (none: localcluster.VolumeControllers); a suite that needs
// real workloads adds localcluster.WorkloadControllers, or only the few it
// needs, as each one costs start-up time and CPU, and a suite of pods with
// ResourceClaims runs localcluster.DRAControllers. Stop it before stopping
// env.
func StartControllerManager(env *envtest.Environment, out io.Writer, controllers ...string) (*ControllerManager, error) {
	if env.Config == nil {
		return nil, errors.New("start the environment before kube-controller-manager")
	}
	dir := env.BinaryAssetsDirectory
	if dir == "" {
		var err error
		if dir, err = AssetsDir(); err != nil {
			return nil, err
		}
	}
	user, err := env.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "kube-controller-manager-")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := WriteKubeconfig(tmp, "kube-controller-manager", data)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	config, err := localcluster.EnvironmentControllerManagerConfig(env, kubeconfig, controllers, tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	cm, err := localcluster.StartControllerManager(dir, config, out)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	return &ControllerManager{ControllerManager: cm, dir: tmp}, nil
}

// Stop sends SIGTERM to kube-controller-manager, waits for it to exit and
// removes its kubeconfig.
func (cm *ControllerManager) Stop() error {
	return errors.Join(cm.ControllerManager.Stop(), os.RemoveAll(cm.dir))
}
