package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// replicaStopTimeout is how long stop waits for a replica to exit after
// SIGTERM before it kills it.
const replicaStopTimeout = 15 * time.Second

// replica is one operator process: the real binary, with its own loopback
// metrics and probe ports, logging to a file that its restarts append to.
type replica struct {
	name                   string
	bin, log               string
	args                   []string
	metricsAddr, probeAddr string
	http                   *http.Client

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func newReplica(name, bin, log string, args []string) (*replica, error) {
	metricsAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	probeAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	return &replica{
		name: name, bin: bin, log: log, metricsAddr: metricsAddr, probeAddr: probeAddr,
		args: append(args, "--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--health-probe-bind-address="+probeAddr),
		http: &http.Client{Timeout: time.Second},
	}, nil
}

// start starts the process. It is started from a goroutine locked to its
// OS thread that lives as long as the process: Linux sends the
// parent-death signal when the thread that forked the child ends, and the
// Go runtime may end any thread, so only a thread held for the child's
// whole life makes "dies with this harness, even on SIGKILL" hold.
func (r *replica) start() error {
	log, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a Ctrl-C reaches the harness alone, which
	// then stops the replicas itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		defer close(done)
		defer func() { _ = log.Close() }()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		r.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-done
		return fmt.Errorf("starting replica %s: %w", r.name, err)
	}
	r.cmd, r.done = cmd, done
	return nil
}

// running tells whether the process was started and has not exited.
func (r *replica) running() bool {
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL, as a crashed node or an OOM kill would end the
// process: no Lease release, no graceful shutdown. It returns once the
// process is gone.
func (r *replica) kill() error {
	if !r.running() {
		return fmt.Errorf("replica %s is not running", r.name)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-r.done
	return nil
}

// stop sends SIGTERM, waits for the process to exit and kills it if it has
// not after replicaStopTimeout. Stopping a stopped replica does nothing.
func (r *replica) stop() error {
	if !r.running() {
		return nil
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(replicaStopTimeout):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		return fmt.Errorf("replica %s did not stop within %v of SIGTERM; killed it", r.name, replicaStopTimeout)
	}
}

// ready tells whether the replica answers 200 on /readyz.
func (r *replica) ready(ctx context.Context) bool {
	resp, err := r.get(ctx, "http://"+r.probeAddr+"/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// leads tells whether the replica's /metrics shows it leading the Lease
// named lease (controller-runtime's leader_election_master_status).
func (r *replica) leads(ctx context.Context, lease string) bool {
	resp, err := r.get(ctx, "http://"+r.metricsAddr+"/metrics")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	series := `leader_election_master_status{name="` + lease + `"}`
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		if value, ok := strings.CutPrefix(scanner.Text(), series); ok {
			return strings.TrimSpace(value) == "1"
		}
	}
	return false
}

func (r *replica) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return r.http.Do(req)
}
