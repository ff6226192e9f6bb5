package localcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// startSleep starts a process that runs until the test ends.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitForCommand(t, cmd)
	return cmd
}

// waitForCommand waits until cmd's process shows its command line: Start
// returns once the child is in execve, and until the kernel has set up the
// new program's arguments /proc shows an empty command line, which a busy
// machine makes last long enough for a check to see it.
func waitForCommand(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); commandName(cmd.Process.Pid) != cmd.Args[0]; {
		if time.Now().After(deadline) {
			t.Fatalf("process %d never showed the command line of %s", cmd.Process.Pid, cmd.Args[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// endedPID is the id of a process that has ended.
func endedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestCheckStateFileRefusesWhileAProcessRuns(t *testing.T) {
	live := startSleep(t)
	liveEtcd := Process{Name: "etcd", PID: live.Process.Pid, Command: live.Args[0]}
	path := filepath.Join(t.TempDir(), "processes.json")
	if err := WriteStateFile(path, []Process{
		liveEtcd,
		{Name: "kube-apiserver", PID: endedPID(t), Command: "true"},
		// A live process that is not the one recorded: its id was reused.
		{Name: "kube-controller-manager", PID: startSleep(t).Process.Pid, Command: "/nowhere/kube-controller-manager"},
		// This process, given the id of the run it replaces.
		{Name: "profile-scheduler-local", PID: os.Getpid(), Command: os.Args[0]},
	}); err != nil {
		t.Fatal(err)
	}

	err := CheckStateFile(path)
	var leftover *LeftoverError
	if !errors.As(err, &leftover) {
		t.Fatalf("CheckStateFile = %v, want a *LeftoverError", err)
	}
	if diff := cmp.Diff([]Process{liveEtcd}, leftover.Processes); diff != "" {
		t.Errorf("processes still running (-want +got):\n%s", diff)
	}
	pid := strconv.Itoa(live.Process.Pid)
	for _, want := range []string{"etcd (pid " + pid + ")", "`kill " + pid + "`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("state file gone after a refusal: %v", err)
	}

	_ = live.Process.Kill()
	_ = live.Wait()
	if err := CheckStateFile(path); err != nil {
		t.Fatalf("CheckStateFile after the process ended: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file of processes that all ended not removed: %v", err)
	}
}

func TestCheckStateFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "no file"},
		{name: "nothing recorded", content: "[]"},
		{name: "all ended", content: `[{"name":"etcd","pid":` + strconv.Itoa(endedPID(t)) + `,"command":"true"}]`},
		{name: "not a state file", content: "etcd 123", wantErr: "remove the file if no such run is left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "processes.json")
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckStateFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("CheckStateFile = %v, want an error naming %s and saying %q", err, path, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckStateFile: %v", err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left in place: %v", err)
			}
		})
	}
}
