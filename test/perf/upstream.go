package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// runUpstream measures kube-scheduler on the same API server: the same
// number of pods, created first (and their claims made, for a DRA
// workload), for a kube-scheduler profile with the workload's spec. It
// serves its metrics on loopback, with /metrics open to anonymous callers
// so that the harness can read its heap, and stops with the measurement. Its start-up (informers listing the cluster) is
// left out of throughput and CPU: the clock starts at its first binding.
// It fills res's Upstream fields.
func (h *harness) runUpstream(ctx context.Context, res *Result) error {
	profile := map[string]any{}
	if err := yaml.Unmarshal([]byte(h.w.Profile), &profile); err != nil {
		return err
	}
	profile["schedulerName"] = upstreamProfile
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{
			"kubeconfig": h.kubeconfig, "qps": h.o.QPS, "burst": h.o.Burst,
		},
		"leaderElection": map[string]any{"leaderElect": false},
		"profiles":       []any{profile},
	}
	if h.extender != nil {
		// Upstream's extenders apply to every profile; there is one.
		cfg["extenders"] = []any{h.extender.extenderBlock()}
	}
	config, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	configPath := filepath.Join(h.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return err
	}
	addr, err := testenv.FreeLoopbackAddress()
	if err != nil {
		return err
	}
	host, port, _ := strings.Cut(addr, ":")

	bound := &boundCounter{done: make(chan struct{}), total: int64(h.w.Pods)}
	stopWatch, err := h.watchBound(ctx, upstreamNamespace, bound)
	if err != nil {
		return err
	}
	defer stopWatch()
	if err := h.createWorkloadPodGroups(ctx, upstreamNamespace); err != nil {
		return err
	}
	if _, err := h.createPods(ctx, upstreamNamespace, h.w.Pods, true); err != nil {
		return err
	}
	if h.w.DRA {
		if err := h.awaitClaims(ctx, upstreamNamespace, h.w.Pods); err != nil {
			return err
		}
	}

	// Its writes count from here, the API server's CPU from its first
	// binding, as its own.
	serverMark := h.server.mark(ctx)
	args := append([]string{
		"--config=" + configPath,
		"--bind-address=" + host, "--secure-port=" + port,
		// Without an authentication kubeconfig every caller is anonymous;
		// these paths need no authorization.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
	}, h.w.schedulerArgs()...)
	ks, err := startScheduler("kube-scheduler", h.o.Upstream, h.outFile("kube-scheduler", "log"), "https://"+addr+"/metrics", args...)
	if err != nil {
		return err
	}
	defer func() { _ = ks.stop() }()

	cost := &Cost{}
	cpu := &cpuMeter{s: ks, ticks: h.ticks}
	profiled := make(chan (<-chan error), 1)
	bound.mu.Lock()
	bound.onFirst = func() {
		cpu.begin()
		serverMark.cpu, serverMark.err = h.server.cpuTime()
		profiled <- h.startCPUProfile(ctx, ks)
	}
	bound.mu.Unlock()
	samples := sampleEverySecond(bound.done, bound.count)
	if err := h.waitBound(ctx, bound, ks); err != nil {
		return err
	}
	// The first binding opened the phase: the others are in it.
	if cost.CPUSecondsPer1000Pods, err = cpu.end(h.w.Pods - 1); err != nil {
		return err
	}
	bound.mu.Lock()
	mark := serverMark
	bound.mu.Unlock()
	server, err := h.server.since(ctx, mark, h.w.Pods-1, h.w.Pods)
	if err != nil {
		return err
	}
	if err := <-<-profiled; err != nil {
		return err
	}
	// Its counters start at zero with it, and its profile scheduled the
	// measured pods only.
	after, err := ks.scrape(ctx)
	if err != nil {
		return err
	}
	elapsed := bound.last().Sub(bound.first()).Seconds()
	avg := 0.0
	if elapsed > 0 {
		avg = float64(h.w.Pods-1) / elapsed
	}
	s := summarize(perSecond(<-samples), avg)
	if err := h.readMemory(ctx, ks, cost); err != nil {
		return err
	}
	res.Upstream, res.UpstreamCost, res.UpstreamServerCost = &s, cost, server
	res.UpstreamBatchAttempts = counterDelta(nil, after, "scheduler_batch_attempts_total", map[string]string{"profile": upstreamProfile}, "result")
	if res.BindingCeiling.Average > 0 {
		res.UpstreamRatio = s.Average / res.BindingCeiling.Average
	}
	return ks.stop()
}
