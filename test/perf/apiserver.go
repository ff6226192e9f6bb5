package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// apiServer is the workload's kube-apiserver and etcd, measured from
// outside as the schedulers are: CPU time from /proc, requests from the
// API server's own metrics, CPU profiles from its /debug/pprof. On this
// machine they share the cores with the scheduler, so what a scheduler
// makes them spend per pod bounds its throughput as much as its own CPU.
type apiServer struct {
	pids  []int
	rest  rest.Interface
	ticks int
}

func newAPIServer(cluster *localcluster.Cluster, r rest.Interface, ticks int) (*apiServer, error) {
	a := &apiServer{rest: r, ticks: ticks}
	for _, p := range cluster.Processes() {
		if p.Name == "etcd" || p.Name == "kube-apiserver" {
			a.pids = append(a.pids, p.PID)
		}
	}
	if len(a.pids) != 2 {
		return nil, fmt.Errorf("the process ids of kube-apiserver and etcd are not known (%v)", cluster.Processes())
	}
	return a, nil
}

// ServerCost is what the API server and etcd spent on one phase of a
// workload.
type ServerCost struct {
	// CPUSecondsPer1000Pods is kube-apiserver's and etcd's CPU time
	// together over the phase, per 1000 pods bound in it.
	CPUSecondsPer1000Pods float64 `json:"cpuSecondsPer1000Pods"`
	// WritesPerPod counts the API server's mutating requests over the
	// phase (apiserver_request_total) by verb and resource, per pod:
	// "POST pods/binding" is 1 when every pod was bound once.
	WritesPerPod map[string]float64 `json:"writesPerPod"`
}

// serverMark is the API server's and etcd's counters at the start of a
// phase; cpu and writes may be read at different moments (see
// runUpstream).
type serverMark struct {
	cpu    time.Duration
	writes map[string]float64
	err    error
}

// mark reads both counters now.
func (a *apiServer) mark(ctx context.Context) serverMark {
	var m serverMark
	if m.writes, m.err = a.writes(ctx); m.err == nil {
		m.cpu, m.err = a.cpuTime()
	}
	return m
}

// since is the cost of the phase that began at m: its CPU time spent on
// cpuPods pods, its writes on writePods (runUpstream reads them from
// different moments).
func (a *apiServer) since(ctx context.Context, m serverMark, cpuPods, writePods int) (*ServerCost, error) {
	if m.err != nil {
		return nil, m.err
	}
	cpu, err := a.cpuTime()
	if err != nil {
		return nil, err
	}
	writes, err := a.writes(ctx)
	if err != nil {
		return nil, err
	}
	if cpuPods <= 0 || writePods <= 0 {
		return &ServerCost{}, nil
	}
	c := &ServerCost{
		CPUSecondsPer1000Pods: (cpu - m.cpu).Seconds() * 1000 / float64(cpuPods),
		WritesPerPod:          map[string]float64{},
	}
	for k, v := range writes {
		if d := v - m.writes[k]; d > 0 {
			c.WritesPerPod[k] = d / float64(writePods)
		}
	}
	return c, nil
}

// String is the cost on one line, for progress.
func (c *ServerCost) String() string {
	keys := slices.Sorted(maps.Keys(c.WritesPerPod))
	writes := make([]string, len(keys))
	for i, k := range keys {
		writes[i] = fmt.Sprintf("%s %.2f", k, c.WritesPerPod[k])
	}
	return fmt.Sprintf("kube-apiserver and etcd %.2f CPU-s/1000 pods, writes per pod: %s",
		c.CPUSecondsPer1000Pods, strings.Join(writes, ", "))
}

// cpuTime is kube-apiserver's and etcd's CPU time together.
func (a *apiServer) cpuTime() (time.Duration, error) {
	var total time.Duration
	for _, pid := range a.pids {
		t, err := processCPUTime(pid, a.ticks)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total, nil
}

// mutating is whether a verb of apiserver_request_total writes.
func mutating(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// writes is apiserver_request_total of the mutating verbs, summed over
// codes and scopes, by "VERB resource[/subresource]".
func (a *apiServer) writes(ctx context.Context) (map[string]float64, error) {
	data, err := a.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	families, err := parseMetrics(data)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range series(families, "apiserver_request_total", nil) {
		verb := labelValue(m, "verb")
		if !mutating(verb) {
			continue
		}
		key := verb + " " + labelValue(m, "resource")
		if sub := labelValue(m, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// cpuProfile profiles kube-apiserver for d into path.
func (a *apiServer) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	data, err := a.rest.Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(max(1, int(d.Seconds())))).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	return os.WriteFile(path, data, 0o644)
}
