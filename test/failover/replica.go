package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
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

	// proc is the latest process started; nil before the first start.
	proc *testenv.Process
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

// start starts the process, which dies with this harness.
func (r *replica) start() error {
	proc, err := testenv.StartProcess("replica "+r.name, r.bin, r.log, r.args...)
	if err != nil {
		return err
	}
	r.proc = proc
	return nil
}

// running tells whether the process was started and has not exited.
func (r *replica) running() bool { return r.proc != nil && r.proc.Running() }

// exited tells whether the process was started and has exited since.
func (r *replica) exited() bool { return r.proc != nil && !r.proc.Running() }

// kill sends SIGKILL, as a crashed node or an OOM kill would end the
// process: no Lease release, no graceful shutdown. It returns once the
// process is gone.
func (r *replica) kill() error {
	if !r.running() {
		return fmt.Errorf("replica %s is not running", r.name)
	}
	return r.proc.Kill()
}

// stop sends SIGTERM, waits for the process to exit and kills it if it has
// not after replicaStopTimeout. Stopping a stopped replica does nothing.
func (r *replica) stop() error {
	if !r.running() {
		return nil
	}
	return r.proc.Stop(replicaStopTimeout)
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
