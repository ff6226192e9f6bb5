package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
