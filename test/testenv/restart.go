package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ControlPlaneProcess is kube-apiserver or etcd as envtest started it,
// found among this process's children, so that a suite can crash it and
// start it again exactly as it was: the same binary and flags, hence the
// same ports, certificates and data directory. Clients keep their
// configuration across the restart, as they would across a real one.
//
// envtest keeps waiting for the process it started; once that one is
// killed, the environment's Stop does nothing for it, so stop the
// restarted processes yourself, in the order the environment would:
// kube-apiserver (before the environment, which removes its directories)
// while etcd still runs, and a restarted etcd after the environment.
type ControlPlaneProcess struct {
	// Name is the process's command name (kube-apiserver, etcd).
	Name string
	log  string
	exe  string
	args []string
	// pid is the process envtest started, until Kill; 0 after.
	pid int
	// proc is the process Start started, if any.
	proc *Process
}

// FindControlPlaneProcess finds the one child of this process whose
// command is name, as envtest started it; a restart logs to log.
func FindControlPlaneProcess(name, log string) (*ControlPlaneProcess, error) {
	return FindControlPlaneProcessWith(name, log, "")
}

// FindControlPlaneProcessWith is FindControlPlaneProcess among the
// children whose command line has the argument arg (any when empty), for
// a suite that runs more than one control plane: the kube-apiserver with
// --secure-port=N.
func FindControlPlaneProcessWith(name, log, arg string) (*ControlPlaneProcess, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, _, err := procStat(pid)
		if err != nil || comm != name || ppid != self {
			continue
		}
		if arg != "" {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
				continue
			}
		}
		found = append(found, pid)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("want one child process %s of this process, found %d", name, len(found))
	}
	pid := found[0]
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		return nil, err
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	return &ControlPlaneProcess{Name: name, log: log, exe: exe, args: args[1:], pid: pid}, nil
}

// procStat reads the command name, parent and state of process pid.
func procStat(pid int) (comm string, ppid int, state string, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, "", err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so it ends at the last ')'.
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, "", fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 2 {
		return "", 0, "", fmt.Errorf("unexpected /proc/%d/stat: %q", pid, s)
	}
	ppid, err = strconv.Atoi(fields[1])
	return s[open+1 : closing], ppid, fields[0], err
}

// Kill sends SIGKILL, as a crash or an OOM kill would end the process, and
// returns once it has exited, its ports free.
func (p *ControlPlaneProcess) Kill() error {
	if p.proc != nil {
		if !p.proc.Running() {
			return fmt.Errorf("%s is not running", p.Name)
		}
		return p.proc.Kill()
	}
	if p.pid == 0 {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s: %w", p.Name, err)
	}
	// envtest reaps it; until then it is a zombie, which holds no port.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, state, err := procStat(p.pid)
		if errors.Is(err, os.ErrNotExist) || state == "Z" {
			p.pid = 0
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) did not exit within 30s of SIGKILL", p.Name, p.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AddArgs adds flags to the command line the process starts with next,
// after envtest's: kube-apiserver started again with more of its API
// served.
func (p *ControlPlaneProcess) AddArgs(args ...string) {
	p.args = append(p.args, args...)
}

// Start starts the process again with the command line envtest gave it;
// it dies with this process. It does not wait for it to serve.
func (p *ControlPlaneProcess) Start() error {
	if p.pid != 0 || (p.proc != nil && p.proc.Running()) {
		return fmt.Errorf("%s is already running", p.Name)
	}
	proc, err := StartProcess(p.Name, p.exe, p.log, p.args...)
	if err != nil {
		return err
	}
	p.proc = proc
	return nil
}

// Stop stops the process Start started, if any, SIGTERM first.
func (p *ControlPlaneProcess) Stop() error {
	if p.proc == nil {
		return nil
	}
	return p.proc.Stop(30 * time.Second)
}
