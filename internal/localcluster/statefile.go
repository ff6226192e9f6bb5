package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is a process a local run started, as recorded in its state file.
type Process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Command is the first word of the process's command line. It tells the
	// process from an unrelated one that got the same id after it ended.
	Command string `json:"command"`
}

func (p Process) String() string { return fmt.Sprintf("%s (pid %d)", p.Name, p.PID) }

// running reports whether p still runs: a live process other than this one
// with p's id whose command line starts with p's command. Only Linux can
// tell. This process may have been given the id of one it replaces.
func (p Process) running() bool {
	return p.PID > 0 && p.PID != os.Getpid() && commandName(p.PID) == p.Command
}

// WriteStateFile records the processes of a run in path (directories
// created), for CheckStateFile to find them should the run end without
// stopping them.
func WriteStateFile(path string, ps []Process) error {
	data, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// CheckStateFile reads the state file an earlier run wrote to path. If a
// process it lists still runs, it returns a *LeftoverError naming the
// processes that do; it never stops them. Otherwise it removes the file,
// as nothing of that run is left, and returns nil; so does a missing file.
func CheckStateFile(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var recorded []Process
	if err := json.Unmarshal(data, &recorded); err != nil {
		return fmt.Errorf("reading the processes of an earlier run from %s: %w (remove the file if no such run is left)", path, err)
	}
	var running []Process
	for _, p := range recorded {
		if p.running() {
			running = append(running, p)
		}
	}
	if len(running) > 0 {
		return &LeftoverError{Processes: running}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// LeftoverError says that processes of an earlier run still run.
type LeftoverError struct {
	Processes []Process
}

func (e *LeftoverError) Error() string {
	names := make([]string, len(e.Processes))
	pids := make([]string, len(e.Processes))
	for i, p := range e.Processes {
		names[i], pids[i] = p.String(), strconv.Itoa(p.PID)
	}
	return fmt.Sprintf("an earlier local run is still running or left processes behind: %s; stop them with `kill %s` and start again",
		strings.Join(names, ", "), strings.Join(pids, " "))
}
