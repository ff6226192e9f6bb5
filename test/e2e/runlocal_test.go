package e2e_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// recordedProcesses reads the processes a run lists in its state file, by
// name, once all four are there: the run itself (the operator runs in it),
// etcd, kube-apiserver and kube-controller-manager.
func recordedProcesses(dir string) map[string]int {
	GinkgoHelper()
	pids := map[string]int{}
	Eventually(func(g Gomega) {
		data, err := os.ReadFile(filepath.Join(dir, "processes.json"))
		g.Expect(err).NotTo(HaveOccurred())
		var ps []localcluster.Process
		g.Expect(json.Unmarshal(data, &ps)).To(Succeed())
		for _, p := range ps {
			pids[p.Name] = p.PID
		}
		g.Expect(pids).To(HaveLen(4))
	}).Should(Succeed())
	Expect(pids).To(HaveKey("profile-scheduler-local"))
	return pids
}

// killLeftovers kills, should a spec fail half-way, the processes of the
// run in dir that still run: the state file names them, and only
// processes whose command line is the recorded one count.
func killLeftovers(dir string) {
	var leftover *localcluster.LeftoverError
	if errors.As(localcluster.CheckStateFile(filepath.Join(dir, "processes.json")), &leftover) {
		for _, p := range leftover.Processes {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}

// expectAllEnded expects every process of pids to end within bound.
func expectAllEnded(pids map[string]int, bound time.Duration) {
	GinkgoHelper()
	for name, pid := range pids {
		Eventually(func() bool { return running(pid) }, bound, 50*time.Millisecond).Should(BeFalse(), "%s (pid %d) still runs", name, pid)
	}
}

var _ = Describe("make run-local killed outright", Ordered, func() {
	var dir string

	BeforeAll(func() {
		var err error
		dir, err = os.MkdirTemp("", "run-local-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		DeferCleanup(killLeftovers, dir)
	})

	It("refuses a second run beside a live one with one line, and leaves nothing running when profile-scheduler-local is killed with SIGKILL", func() {
		run := startLocalRunIn(dir)
		pids := recordedProcesses(dir)

		By("starting a second run in the same directory")
		second := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "profile-scheduler-local"), "--dir="+dir,
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		second.Dir = testenv.RepoRoot()
		var stdout, stderr syncBuffer
		second.Stdout, second.Stderr = &stdout, &stderr
		err := second.Run()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "second run: %v", err)
		Expect(exit.ExitCode()).NotTo(BeZero())
		Expect(stdout.String()).To(BeEmpty())
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		Expect(lines).To(HaveLen(1), "stderr: %s", stderr.String())
		Expect(lines[0]).To(HavePrefix("profile-scheduler-local: an earlier local run is still running"))
		for _, pid := range pids {
			Expect(running(pid)).To(BeTrue(), "the refused run stopped pid %d", pid)
		}
		Expect(filepath.Join(dir, "kubeconfig")).To(BeAnExistingFile())

		By("killing profile-scheduler-local with SIGKILL")
		Expect(syscall.Kill(pids["profile-scheduler-local"], syscall.SIGKILL)).To(Succeed())
		Eventually(run.done, 10*time.Second).Should(BeClosed())
		// Linux kills the control plane with its parent at once.
		expectAllEnded(pids, 10*time.Second)
		// What the killed run could not remove; the next run removes it.
		for _, name := range []string{"processes.json", "kubeconfig", "cluster/etcd-data", "cluster/certs/apiserver.key"} {
			Expect(filepath.Join(dir, name)).To(BeAnExistingFile())
		}
	})

	It("removes what the killed run left, and stops everything when make is killed with SIGKILL", func() {
		// A file of the killed run's that no run writes.
		marker := filepath.Join(dir, "cluster", "certs", "left-by-the-killed-run")
		Expect(os.WriteFile(marker, nil, 0o600)).To(Succeed())

		run := startLocalRunIn(dir)
		pids := recordedProcesses(dir)
		Expect(marker).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dir, "cluster", "certs", "apiserver.key")).To(BeAnExistingFile())

		By("killing make with SIGKILL")
		Expect(syscall.Kill(run.cmd.Process.Pid, syscall.SIGKILL)).To(Succeed())
		// The run notices, stops the operator and the control plane in
		// order, and removes its files.
		expectAllEnded(pids, time.Minute)
		for _, name := range []string{"processes.json", "kubeconfig", "cluster"} {
			Expect(filepath.Join(dir, name)).NotTo(BeAnExistingFile())
		}
	})
})
