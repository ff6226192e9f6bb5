package localcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// VolumeControllers are the kube-controller-manager controllers that
// volumes need: the PV binder that binds claims to volumes and hands
// claims to external provisioners, the ephemeral volume controller that
// creates the claims of pods' generic ephemeral volumes, the protection
// controllers that let a claim or volume in use be deleted only once
// nothing uses it (the API server's StorageObjectInUseProtection admission
// adds their finalizers to every claim and volume), and the garbage
// collector that removes dependents of deleted owners.
func VolumeControllers() []string {
	return []string{
		"persistentvolume-binder-controller",
		"ephemeral-volume-controller",
		"persistentvolume-protection-controller",
		"persistentvolumeclaim-protection-controller",
		"garbage-collector-controller",
	}
}

// WorkloadControllers are the kube-controller-manager controllers that
// users' workloads need on top of VolumeControllers: the ones that turn
// Deployments, ReplicaSets, StatefulSets (and their volumeClaimTemplates),
// Jobs, CronJobs and DaemonSets into pods, PodDisruptionBudgets' status,
// the removal of finished Jobs and of pods bound to deleted nodes, and
// namespaces with their service accounts and tokens. Not the node
// lifecycle or taint eviction controllers: the simulated nodes send no
// heartbeats, so those would mark them unreachable and evict their pods.
func WorkloadControllers() []string {
	return []string{
		"deployment-controller",
		"replicaset-controller",
		"statefulset-controller",
		"job-controller",
		"cronjob-controller",
		"daemonset-controller",
		"disruption-controller",
		"pod-garbage-collector-controller",
		"ttl-after-finished-controller",
		"namespace-controller",
		"serviceaccount-controller",
		"serviceaccount-token-controller",
	}
}

// DRAControllers are the kube-controller-manager controllers that Dynamic
// Resource Allocation needs, under their 1.37.2 names: the resource claim
// controller, which creates the ResourceClaims of a pod's
// ResourceClaimTemplates, records their names in the pod's status, drops
// pods that are done or gone from a claim's reservedFor and deletes the
// claims generated for them; and the device taint eviction controller,
// which evicts pods whose allocated devices gained a NoExecute taint they
// do not tolerate, from a ResourceSlice or a DeviceTaintRule. Their gates
// (DynamicResourceAllocation, DRADeviceTaints) are on by default in 1.37.2,
// and kube-apiserver serves resource.k8s.io/v1 by default. The claims made
// for a pod that is deleted are left to the garbage collector (in
// VolumeControllers), which deletes them with their owner.
func DRAControllers() []string {
	return []string{
		"resourceclaim-controller",
		"device-taint-eviction-controller",
	}
}

// AllControllers are VolumeControllers, WorkloadControllers,
// DRAControllers and PodGroupControllers: what the local run starts.
func AllControllers() []string {
	return slices.Concat(VolumeControllers(), WorkloadControllers(), DRAControllers(), PodGroupControllers())
}

// controllerManagerStopTimeout is how long Stop waits for
// kube-controller-manager to exit after SIGTERM before killing it.
const controllerManagerStopTimeout = 30 * time.Second

// ControllerManagerConfig says how to run kube-controller-manager.
type ControllerManagerConfig struct {
	// Kubeconfig reaches the cluster as a member of system:masters.
	Kubeconfig string
	// Controllers is the value of --controllers, in kube-controller-
	// manager's syntax ('*' for its defaults, 'name', '-name'); empty
	// means VolumeControllers.
	Controllers []string
	// ServiceAccountKeyFile is the private key that signs service account
	// tokens, the one kube-apiserver's --service-account-signing-key-file
	// names; RootCAFile is the CA bundle put into token Secrets. The token
	// controller needs both and is off without them.
	ServiceAccountKeyFile string
	RootCAFile            string
}

// EnvironmentControllerManagerConfig is the configuration of a
// kube-controller-manager for env, which must be started: controllers,
// the kubeconfig at kubeconfig, the key env's kube-apiserver signs service
// account tokens with (envtest writes it into the API server's certificate
// directory unless --service-account-signing-key-file names another) and
// env's CA, written into dir.
func EnvironmentControllerManagerConfig(env *envtest.Environment, kubeconfig string, controllers []string, dir string) (ControllerManagerConfig, error) {
	if env.Config == nil {
		return ControllerManagerConfig{}, errors.New("start the environment before kube-controller-manager")
	}
	api := env.ControlPlane.GetAPIServer()
	key := filepath.Join(api.CertDir, "sa-signer.key")
	if set := api.Configure().Get("service-account-signing-key-file").Get(nil); len(set) > 0 {
		key = set[0]
	}
	if _, err := os.Stat(key); err != nil {
		return ControllerManagerConfig{}, fmt.Errorf("the API server's service account signing key: %w", err)
	}
	rootCA := filepath.Join(dir, "root-ca.crt")
	if err := os.WriteFile(rootCA, env.Config.CAData, 0o600); err != nil {
		return ControllerManagerConfig{}, err
	}
	return ControllerManagerConfig{
		Kubeconfig:            kubeconfig,
		Controllers:           controllers,
		ServiceAccountKeyFile: key,
		RootCAFile:            rootCA,
	}, nil
}

// ControllerManagerArgs are the kube-controller-manager flags of config: no
// serving port (so it listens on nothing at all), no leader election, no
// per-controller service accounts (every controller acts as the user of
// the kubeconfig), and the workload gates of the API server.
func ControllerManagerArgs(config ControllerManagerConfig) []string {
	controllers := config.Controllers
	if len(controllers) == 0 {
		controllers = VolumeControllers()
	}
	args := []string{
		"--kubeconfig=" + config.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		// The controllers of PodGroupControllers run only with their
		// gate; the others are the same with or without it.
		"--feature-gates=" + WorkloadFeatureGates,
	}
	if config.ServiceAccountKeyFile != "" {
		args = append(args, "--service-account-private-key-file="+config.ServiceAccountKeyFile)
	}
	if config.RootCAFile != "" {
		args = append(args, "--root-ca-file="+config.RootCAFile)
	}
	return args
}

// ControllerManager is a running kube-controller-manager process.
type ControllerManager struct {
	cmd *exec.Cmd
	// tail keeps the end of the process's output, to say why it exited.
	tail *tailBuffer
	done chan struct{}
	err  error
}

// controllerManagerTail is how much of kube-controller-manager's last
// output Err quotes.
const controllerManagerTail = 2048

// StartControllerManager starts the kube-controller-manager binary of
// assetsDir as config says, logging to out (nil: discarded). Stop it when
// done.
func StartControllerManager(assetsDir string, config ControllerManagerConfig, out io.Writer) (*ControllerManager, error) {
	bin := filepath.Join(assetsDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager not found in %s: run make control-plane (hack/build-control-plane.sh builds it next to kube-apiserver and etcd)", assetsDir)
	}
	if out == nil {
		out = io.Discard
	}
	cmd := exec.Command(bin, ControllerManagerArgs(config)...)
	tail := &tailBuffer{max: controllerManagerTail}
	out = io.MultiWriter(out, tail)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childProcAttr()
	thread := startLockedThread()
	var err error
	thread.do(func() { err = cmd.Start() })
	if err != nil {
		thread.close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &ControllerManager{cmd: cmd, tail: tail, done: make(chan struct{})}
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

// Err says why the process ended, quoting the end of its output; nil
// while it runs.
func (cm *ControllerManager) Err() error {
	select {
	case <-cm.done:
	default:
		return nil
	}
	return fmt.Errorf("kube-controller-manager exited (%v); its last output:\n%s", cm.err, cm.tail.String())
}

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

// tailBuffer keeps the last max bytes written to it. The process's output
// is copied by os/exec from one goroutine, while String may be called from
// another once the process has exited: mu guards buf.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
