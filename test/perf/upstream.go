package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// runUpstream measures kube-scheduler on the same API server: the same
// number of pods, created first, for a kube-scheduler profile with the
// workload's spec. It serves nothing (--secure-port=0) and stops with the
// measurement. Its start-up (informers listing the cluster) is left out:
// the clock starts at its first binding.
func (h *harness) runUpstream(ctx context.Context) (*Summary, error) {
	dir, err := os.MkdirTemp("", "perf-kube-scheduler-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, h.cfg.Host, h.cfg.CAData, h.cfg.CertData, h.cfg.KeyData); err != nil {
		return nil, err
	}
	profile := map[string]any{}
	if err := yaml.Unmarshal([]byte(h.w.Profile), &profile); err != nil {
		return nil, err
	}
	profile["schedulerName"] = upstreamProfile
	config, err := yaml.Marshal(map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{
			"kubeconfig": kubeconfig, "qps": h.o.QPS, "burst": h.o.Burst,
		},
		"leaderElection": map[string]any{"leaderElect": false},
		"profiles":       []any{profile},
	})
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return nil, err
	}

	bound := &boundCounter{done: make(chan struct{}), total: int64(h.w.Pods)}
	stopWatch, err := h.watchBound(ctx, upstreamNamespace, bound)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	if _, err := h.createPods(ctx, upstreamNamespace, h.w.Pods, true); err != nil {
		return nil, err
	}

	log, err := os.Create(filepath.Join(dir, "kube-scheduler.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(runCtx, h.o.Upstream, "--config="+configPath, "--secure-port=0", "--bind-address=127.0.0.1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var exitErr error
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		exitErr = cmd.Wait()
	}()
	defer func() { cancel(); <-exited }()

	samples := sampleEverySecond(bound.done, bound.count)
	select {
	case <-bound.done:
	case <-exited:
		out, _ := os.ReadFile(log.Name())
		return nil, fmt.Errorf("kube-scheduler exited: %v\n%s", exitErr, out)
	case <-time.After(h.o.Timeout):
		return nil, fmt.Errorf("kube-scheduler: %d of %d pods bound after %v", bound.count(), h.w.Pods, h.o.Timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := bound.last().Sub(bound.first()).Seconds()
	avg := 0.0
	if elapsed > 0 {
		avg = float64(h.w.Pods-1) / elapsed
	}
	s := summarize(perSecond(<-samples), avg)
	return &s, nil
}

func writeKubeconfig(path, host string, ca, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["perf"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["perf"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["perf"] = &clientcmdapi.Context{Cluster: "perf", AuthInfo: "perf"}
	cfg.CurrentContext = "perf"
	return clientcmd.WriteToFile(*cfg, path)
}
