package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// stopTimeout is how long a scheduler may take to exit after SIGTERM.
const stopTimeout = 15 * time.Second

// schedulerProcess is a scheduler the harness runs as its own process
// (the operator or kube-scheduler) and measures from outside: CPU and
// memory from /proc, the rest from its /metrics.
type schedulerProcess struct {
	*testenv.Process
	metricsURL string
	http       *http.Client
}

// startScheduler starts bin with args; metricsURL is where it serves its
// metrics.
func startScheduler(name, bin, log, metricsURL string, args ...string) (*schedulerProcess, error) {
	p, err := testenv.StartProcess(name, bin, log, args...)
	if err != nil {
		return nil, err
	}
	return &schedulerProcess{
		Process:    p,
		metricsURL: metricsURL,
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			// kube-scheduler serves /metrics with a certificate it made
			// itself at start, on loopback.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
		}},
	}, nil
}

// stop stops the process; an error names its log.
func (s *schedulerProcess) stop() error {
	if err := s.Stop(stopTimeout); err != nil {
		return fmt.Errorf("%w (log: %s)", err, s.Log)
	}
	return nil
}

// exitError describes an unexpected exit, with the log to read.
func (s *schedulerProcess) exitError() error {
	return fmt.Errorf("%s exited: %v; its log is %s", s.Name, s.Err(), s.Log)
}

// scrape reads the process's metrics in the text format.
func (s *schedulerProcess) scrape(ctx context.Context) ([]*dto.MetricFamily, error) {
	data, err := s.get(ctx, s.http, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", s.Name, err)
	}
	families, err := parseMetrics(data)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", s.Name, err)
	}
	return families, nil
}

// parseMetrics reads metrics in Prometheus' text format.
func parseMetrics(data []byte) ([]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return slices.Collect(maps.Values(families)), nil
}

// get reads path from the process's metrics endpoint with c, failing on
// any status but 200.
func (s *schedulerProcess) get(ctx context.Context, c *http.Client, path string) ([]byte, error) {
	url := strings.TrimSuffix(s.metricsURL, "/metrics") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return data, nil
}

// cpuProfile has the process profile its CPU for d (Go's
// /debug/pprof/profile, served beside its metrics) and writes the profile
// to path.
func (s *schedulerProcess) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	// The profile takes d; the client's own timeout is for scrapes.
	data, err := s.get(ctx, &http.Client{Transport: s.http.Transport},
		fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds()))))
	if err != nil {
		return fmt.Errorf("profiling %s: %w", s.Name, err)
	}
	return os.WriteFile(path, data, 0o644)
}

// heapInuse is go_memstats_heap_inuse_bytes from /metrics right after a
// garbage collection, or nil when either cannot be had: not available is
// reported as such. Without the collection it would count whatever garbage
// the last cycle left, which moves by a third between runs at rest. The
// heap profile that collection answers with is written to profilePath, to
// show where that heap goes.
func (s *schedulerProcess) heapInuse(ctx context.Context, profilePath string) *int64 {
	// Go's /debug/pprof/heap collects first when asked with gc=1.
	profile, err := s.get(ctx, s.http, "/debug/pprof/heap?gc=1")
	if err != nil || os.WriteFile(profilePath, profile, 0o644) != nil {
		return nil
	}
	families, err := s.scrape(ctx)
	if err != nil {
		return nil
	}
	for _, m := range series(families, "go_memstats_heap_inuse_bytes", nil) {
		v := int64(m.GetGauge().GetValue())
		return &v
	}
	return nil
}

// cpuTime is the user and system CPU time the process has used.
func (s *schedulerProcess) cpuTime(ticksPerSecond int) (time.Duration, error) {
	return processCPUTime(s.Pid(), ticksPerSecond)
}

// processCPUTime is the user and system CPU time process pid has used,
// from /proc/<pid>/stat, in clock ticks of ticksPerSecond.
func processCPUTime(pid, ticksPerSecond int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'. utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, field := range f[11:13] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / time.Duration(ticksPerSecond), nil
}

// memory is the process's resident set now (VmRSS), at its peak (VmHWM)
// and its file-backed part now (RssFile), in bytes, from
// /proc/<pid>/status.
func (s *schedulerProcess) memory() (rss, peak, file int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
	if err != nil {
		return 0, 0, 0, err
	}
	fields := map[string]*int64{"VmRSS": &rss, "VmHWM": &peak, "RssFile": &file}
	for line := range strings.SplitSeq(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		target := fields[name]
		if !ok || target == nil {
			continue
		}
		kB, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", s.Pid(), name, err)
		}
		*target = kB << 10
	}
	if rss == 0 || peak == 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS or VmHWM", s.Pid())
	}
	return rss, peak, file, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times; Go has no sysconf without cgo, so getconf answers.
func clockTicks() (int, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK (the unit of /proc CPU times): %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n <= 0 {
		return 0, errors.New("getconf CLK_TCK: not a positive number: " + strings.TrimSpace(string(out)))
	}
	return n, nil
}

// cpuMeter measures a scheduler's CPU time over a phase.
type cpuMeter struct {
	s     *schedulerProcess
	ticks int
	begun bool
	start time.Duration
	err   error
}

func (m *cpuMeter) begin() {
	m.begun = true
	m.start, m.err = m.s.cpuTime(m.ticks)
}

// end returns the CPU-seconds since begin, per 1000 pods.
func (m *cpuMeter) end(pods int) (float64, error) {
	if !m.begun {
		return 0, fmt.Errorf("%s: the CPU time at the start of the phase was not read", m.s.Name)
	}
	if m.err != nil {
		return 0, m.err
	}
	now, err := m.s.cpuTime(m.ticks)
	if err != nil {
		return 0, err
	}
	if pods <= 0 {
		return 0, nil
	}
	return (now - m.start).Seconds() * 1000 / float64(pods), nil
}
