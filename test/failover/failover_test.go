package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestFailover runs the failover benchmark briefly, with short lease
// settings, so that it keeps working; the benchmark itself is make
// bench-failover.
func TestFailover(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "failover benchmark smoke suite")
}

var _ = BeforeSuite(func() {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.Level(zapcore.ErrorLevel))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
})

var _ = Describe("The failover benchmark", func() {

	It("kills the leader twice under a stream of pods, measures the takeovers and finds no pod bound twice and no node overcommitted", func() {
		dir := GinkgoT().TempDir()
		var table bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(run(ctx, Options{
			Failovers: 2, Nodes: 3, Rate: 5,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
			Timeout: time.Minute, Grace: 5 * time.Second,
		}, dir, &table, GinkgoWriter)).To(Succeed())
		GinkgoWriter.Println(table.String())
		Expect(table.String()).To(ContainSubstring("death→first bind s"))

		data, err := os.ReadFile(filepath.Join(dir, "results.json"))
		Expect(err).NotTo(HaveOccurred())
		var report Results
		Expect(json.Unmarshal(data, &report)).To(Succeed())
		Expect(report.Machine.CPUs).To(BeNumerically(">", 0))
		Expect(report.LeaseDuration).To(Equal(2.0))
		Expect(report.Failovers).To(HaveLen(2))
		for _, f := range report.Failovers {
			Expect(f.NewLeader).NotTo(Equal(f.OldLeader))
			Expect(f.DeathToAcquired).To(BeNumerically(">", 0))
			Expect(f.AcquiredToFirstBind).To(BeNumerically(">", 0))
			Expect(f.DeathToFirstBind).To(BeNumerically(">=", f.DeathToAcquired))
			Expect(f.DeathToFirstBind).To(BeNumerically("~", f.DeathToAcquired+f.AcquiredToFirstBind, 1e-6))
			Expect(f.PodsBound).To(BeNumerically(">", 0))
		}
		for _, d := range []Distribution{report.DeathToFirstBind, report.DeathToAcquired, report.AcquiredToFirstBind} {
			Expect(d.Samples).To(Equal(2))
			Expect(d.Perc50).To(BeNumerically(">", 0))
			Expect(d.Perc99).To(BeNumerically(">=", d.Perc50))
			Expect(d.Max).To(BeNumerically(">=", d.Perc99))
		}
		Expect(report.DeathToFirstBind.Perc50).To(BeNumerically(">=", report.DeathToAcquired.Perc50))
		Expect(report.PodsBound).To(BeNumerically(">", 0))
		Expect(report.PodsBound).To(BeNumerically("<=", report.PodsCreated))
		// Each replica's log holds its run before and after its restart.
		for _, name := range []string{"a", "b"} {
			Expect(filepath.Join(dir, "replica-"+name+".log")).To(BeAnExistingFile())
		}
	})
})
