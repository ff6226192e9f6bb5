package localcluster_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// parentStateEnv makes this test binary the parent that runs a cluster and
// records its processes in the state file the variable names.
const parentStateEnv = "LOCALCLUSTER_TEST_PARENT_STATE_FILE"

// TestControlPlaneDiesWithItsParent starts a cluster in a child process,
// kills that process with SIGKILL, which it cannot catch, and expects etcd,
// kube-apiserver and kube-controller-manager to be gone within seconds.
func TestControlPlaneDiesWithItsParent(t *testing.T) {
	if path := os.Getenv(parentStateEnv); path != "" {
		runParent(t, path)
		return
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "processes.json")
	parent := exec.Command(os.Args[0], "-test.run=^TestControlPlaneDiesWithItsParent$")
	parent.Env = append(os.Environ(), parentStateEnv+"="+state, "KUBEBUILDER_ASSETS="+assets)
	// A file, not a buffer: the parent's output is read while it runs.
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stderr.Close() }()
	parent.Stderr = stderr
	output := func() string {
		data, _ := os.ReadFile(stderr.Name())
		return string(data)
	}
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		// Whatever outlived the parent was started by this test: stop it.
		var leftover *localcluster.LeftoverError
		if errors.As(localcluster.CheckStateFile(state), &leftover) {
			for _, p := range leftover.Processes {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})

	ready := make(chan bool, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if lines.Text() == "ready" {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = parent.Wait()
			t.Fatalf("the parent ended before its cluster was ready:\n%s", output())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the parent's cluster is not ready after 2 minutes:\n%s", output())
	}

	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []localcluster.Process
	if err := json.Unmarshal(data, &recorded); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range recorded {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"etcd", "kube-apiserver", "kube-controller-manager"}, names); diff != "" {
		t.Fatalf("processes of the cluster (-want +got):\n%s", diff)
	}
	// A process is recognised by its command line, which is readable only
	// once its execve has completed: kube-controller-manager was started
	// just now.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var leftover *localcluster.LeftoverError
		err := localcluster.CheckStateFile(state)
		if errors.As(err, &leftover) && len(leftover.Processes) == len(recorded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CheckStateFile while the cluster runs = %v, want all %d processes named; the parent's output:\n%s", err, len(recorded), output())
		}
	}

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := localcluster.CheckStateFile(state)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the parent was killed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runParent runs a cluster with kube-controller-manager, records its
// processes, says "ready" on stdout and waits to be killed.
func runParent(t *testing.T, state string) {
	cluster, err := localcluster.Start(localcluster.Options{ControllerManager: true, ControllerManagerOutput: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Stop() }()
	if err := localcluster.WriteStateFile(state, cluster.Processes()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	time.Sleep(2 * time.Minute)
	t.Error("not killed within 2 minutes")
}
