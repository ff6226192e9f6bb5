package outage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// replicaStopTimeout is how long Stop waits for a replica to exit after
// SIGTERM before it kills it.
const replicaStopTimeout = 15 * time.Second

// Replica is one operator process: the real binary, with its own loopback
// metrics and probe ports, logging to a file that its restarts append to.
type Replica struct {
	// Name names the replica in messages.
	Name                   string
	bin, log               string
	args                   []string
	metricsAddr, probeAddr string
	http                   *http.Client

	// proc is the latest process started; nil before the first start.
	proc *testenv.Process
}

// NewReplica prepares a replica of the operator binary bin, run with args
// and logging to log; it adds the flags of its metrics and probe ports.
func NewReplica(name, bin, log string, args []string) (*Replica, error) {
	metricsAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	probeAddr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	return &Replica{
		Name: name, bin: bin, log: log, metricsAddr: metricsAddr, probeAddr: probeAddr,
		// No admission webhook: nothing here installs its configuration,
		// and replicas on one host would share its port.
		args: append(append([]string(nil), args...), "--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--health-probe-bind-address="+probeAddr, "--webhook-port=0"),
		http: &http.Client{Timeout: time.Second},
	}, nil
}

// Start starts the process, which dies with the caller.
func (r *Replica) Start() error {
	proc, err := testenv.StartProcess("replica "+r.Name, r.bin, r.log, r.args...)
	if err != nil {
		return err
	}
	r.proc = proc
	return nil
}

// Running tells whether the process was started and has not exited.
func (r *Replica) Running() bool { return r.proc != nil && r.proc.Running() }

// Exited tells whether the process was started and has exited since.
func (r *Replica) Exited() bool { return r.proc != nil && !r.proc.Running() }

// Err is how the latest process exited, once it has.
func (r *Replica) Err() error { return r.proc.Err() }

// ExitedAt is when the latest process exited, once it has.
func (r *Replica) ExitedAt() time.Time { return r.proc.ExitedAt() }

// Kill sends SIGKILL, as a crashed node or an OOM kill would end the
// process: no Lease release, no graceful shutdown. It returns once the
// process is gone.
func (r *Replica) Kill() error {
	if !r.Running() {
		return fmt.Errorf("replica %s is not running", r.Name)
	}
	return r.proc.Kill()
}

// Pause sends SIGSTOP: the process keeps its connections and its state but
// runs no code, as a process stalled by its node (swapping, a frozen VM)
// would, until Resume.
func (r *Replica) Pause() error {
	if !r.Running() {
		return fmt.Errorf("replica %s is not running", r.Name)
	}
	return r.proc.Signal(syscall.SIGSTOP)
}

// Resume sends SIGCONT to a paused replica.
func (r *Replica) Resume() error {
	if !r.Running() {
		return fmt.Errorf("replica %s is not running", r.Name)
	}
	return r.proc.Signal(syscall.SIGCONT)
}

// Stop sends SIGTERM, waits for the process to exit and kills it if it has
// not after replicaStopTimeout. Stopping a stopped replica does nothing.
func (r *Replica) Stop() error {
	if !r.Running() {
		return nil
	}
	return r.proc.Stop(replicaStopTimeout)
}

// Ready tells whether the replica answers 200 on /readyz.
func (r *Replica) Ready(ctx context.Context) bool {
	resp, err := r.get(ctx, "http://"+r.probeAddr+"/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Leads tells whether the replica's /metrics shows it leading the Lease
// named lease (controller-runtime's leader_election_master_status).
func (r *Replica) Leads(ctx context.Context, lease string) bool {
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

func (r *Replica) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return r.http.Do(req)
}

// LogLines counts the lines of the replica's log (every process it
// started) stamped at since or later whose text contains substr. The
// replica logs JSON with RFC 3339 timestamps (--zap-time-encoding=
// rfc3339nano); lines without one are not counted.
func (r *Replica) LogLines(since time.Time, substr string) (int, error) {
	f, err := os.Open(r.log)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	n := 0
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		line := scanner.Bytes()
		if !bytes.Contains(line, []byte(substr)) {
			continue
		}
		var entry struct {
			TS time.Time `json:"ts"`
		}
		if json.Unmarshal(line, &entry) == nil && !entry.TS.Before(since) {
			n++
		}
	}
	return n, scanner.Err()
}
