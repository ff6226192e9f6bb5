package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// TestRunRefusesBesideAnEarlierRun expects run to stop before starting
// anything when the state file of an earlier run names a live process, and
// to say which one and how to stop it.
func TestRunRefusesBesideAnEarlierRun(t *testing.T) {
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = live.Process.Kill()
		_ = live.Wait()
	})
	// Start returns once the child is in execve; until the kernel has set
	// up sleep's arguments /proc shows an empty command line, which a busy
	// machine makes last long enough for run's check to see it.
	cmdline := fmt.Sprintf("/proc/%d/cmdline", live.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if data, _ := os.ReadFile(cmdline); bytes.HasPrefix(data, []byte("sleep\x00")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed sleep's command line", cmdline)
		}
	}
	dir := t.TempDir()
	if err := localcluster.WriteStateFile(filepath.Join(dir, "processes.json"), []localcluster.Process{
		{Name: "kube-apiserver", PID: live.Process.Pid, Command: live.Args[0]},
	}); err != nil {
		t.Fatal(err)
	}
	// No control plane binaries: were run to go on, it would fail for that.
	err := run(context.Background(), options{dir: dir, assets: t.TempDir(), metricsAddr: "0", probeAddr: "0"}, nil)
	var leftover *localcluster.LeftoverError
	if !errors.As(err, &leftover) {
		t.Fatalf("run = %v, want a refusal naming the earlier run's processes", err)
	}
	pid := strconv.Itoa(live.Process.Pid)
	for _, want := range []string{"kube-apiserver (pid " + pid + ")", "kill " + pid} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
}
