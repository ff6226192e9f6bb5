package testenv

import (
	"os"
	"runtime"
	"strings"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// Machine says where a benchmark's figures come from.
type Machine struct {
	CPUs              int    `json:"cpus"`
	CPUModel          string `json:"cpuModel,omitempty"`
	GOOS              string `json:"goos"`
	GOARCH            string `json:"goarch"`
	GoVersion         string `json:"goVersion"`
	KubernetesVersion string `json:"kubeAPIServer"`
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	m := Machine{
		CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		GoVersion: runtime.Version(), KubernetesVersion: localcluster.KubernetesVersion,
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPUModel = strings.TrimSpace(value)
				break
			}
		}
	}
	return m
}

// LoadAverage is the first three fields of /proc/loadavg (1, 5 and 15
// minutes), if there is one: on a shared machine, other work shows here.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
