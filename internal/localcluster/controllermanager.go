package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ControllerManagerControllers are the kube-controller-manager controllers
// the local cluster runs: the PV binder that binds claims to volumes and
// hands claims to external provisioners, the ephemeral volume controller
// that creates the claims of pods' generic ephemeral volumes, the
// protection controllers that let a claim or volume in use be deleted only
// once nothing uses it (the API server's StorageObjectInUseProtection
// admission adds their finalizers to every claim and volume), and the
// garbage collector that removes dependents of deleted owners. Nothing
// else: no node lifecycle controller, whose heartbeat checks would evict
// the simulated nodes.
func ControllerManagerControllers() []string {
	return []string{
		"persistentvolume-binder-controller",
		"ephemeral-volume-controller",
		"persistentvolume-protection-controller",
		"persistentvolumeclaim-protection-controller",
		"garbage-collector-controller",
	}
}

// controllerManagerStopTimeout is how long Stop waits for
// kube-controller-manager to exit after SIGTERM before killing it.
const controllerManagerStopTimeout = 30 * time.Second

// ControllerManagerArgs are the kube-controller-manager flags for a cluster
// reached with kubeconfig: the controllers above, no serving port (so it
// listens on nothing at all), no leader election and no per-controller
// service accounts, which would need the service account token machinery.
func ControllerManagerArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(ControllerManagerControllers(), ","),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
	}
}

// ControllerManager is a running kube-controller-manager process.
type ControllerManager struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartControllerManager starts the kube-controller-manager binary of
// assetsDir against the cluster of kubeconfig (a kubeconfig of a
// system:masters user), logging to out (nil: discarded). Stop it when done.
func StartControllerManager(assetsDir, kubeconfig string, out io.Writer) (*ControllerManager, error) {
	bin := filepath.Join(assetsDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager not found in %s: run make control-plane (hack/build-control-plane.sh builds it next to kube-apiserver and etcd)", assetsDir)
	}
	if out == nil {
		out = io.Discard
	}
	cmd := exec.Command(bin, ControllerManagerArgs(kubeconfig)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childProcAttr()
	thread := startLockedThread()
	var err error
	thread.do(func() { err = cmd.Start() })
	if err != nil {
		thread.close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &ControllerManager{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(cm.done)
		cm.err = cmd.Wait()
		thread.close()
	}()
	return cm, nil
}

// Pid is the process id of kube-controller-manager.
func (cm *ControllerManager) Pid() int { return cm.cmd.Process.Pid }

// Exited is closed once the process has ended.
func (cm *ControllerManager) Exited() <-chan struct{} { return cm.done }

// Stop sends SIGTERM and waits for the process to exit, killing it if it
// has not after a while. Stopping a stopped manager does nothing.
func (cm *ControllerManager) Stop() error {
	select {
	case <-cm.done:
		return nil
	default:
	}
	if err := cm.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-cm.done:
		return nil
	case <-time.After(controllerManagerStopTimeout):
		_ = cm.cmd.Process.Kill()
		<-cm.done
		return fmt.Errorf("kube-controller-manager (pid %d) did not stop within %s of SIGTERM and was killed", cm.Pid(), controllerManagerStopTimeout)
	}
}
