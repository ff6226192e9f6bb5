package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// parentDeathEnv marks this binary, started through a launcher that
// parentDeathLauncher wrote, as a stand-in that must arm the parent-death
// signal and then become the control plane binary named by its first
// argument. Its value is the process id of the expected parent.
const parentDeathEnv = "PROFILE_SCHEDULER_LOCALCLUSTER_PARENT"

// init turns this process into the control plane binary it stands in for,
// before anything else runs, when it was started as such a stand-in. envtest
// starts etcd and kube-apiserver itself and offers no way to set
// SysProcAttr.Pdeathsig, so Start points it at a launcher script that
// re-executes the current binary here, where the signal is armed and the
// real binary executed in the same process: Pdeathsig survives execve.
func init() {
	if parent := os.Getenv(parentDeathEnv); parent != "" {
		os.Exit(execWithParentDeath(parent, os.Args[1:]))
	}
}

// execWithParentDeath arms SIGKILL on the death of the parent and executes
// args. It returns only on failure, with an exit code.
func execWithParentDeath(parent string, args []string) int {
	// The parent-death signal belongs to the calling thread, and execve keeps
	// the calling thread's: both must happen on the same one.
	runtime.LockOSThread()
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "%s is set but no binary to execute was given\n", parentDeathEnv)
		return 2
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "arming the parent-death signal for %s: %v\n", args[0], errno)
		return 1
	}
	// The parent may have died between fork and prctl; then nothing would
	// ever signal this process.
	if strconv.Itoa(os.Getppid()) != parent {
		return 1
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, parentDeathEnv+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(args[0], args, env)
	fmt.Fprintf(os.Stderr, "executing %s: %v\n", args[0], err)
	return 127
}

// parentDeathLauncher writes into dir an executable script that starts bin
// with its arguments such that bin is killed when this process dies, even
// by SIGKILL, and records bin's process id in pidFile. It returns the
// script's path, to be started in place of bin from a thread that stays
// alive as long as bin runs (see lockedThread).
func parentDeathLauncher(dir, bin, pidFile string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this binary to start %s through it: %w", filepath.Base(bin), err)
	}
	// exec keeps the shell's process id, so $$ is the id bin will run as.
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s\n%s=%d exec %s %s \"$@\"\n",
		shellQuote(pidFile), parentDeathEnv, os.Getpid(), shellQuote(self), shellQuote(bin))
	path := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", err
	}
	return path, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// childProcAttr puts a child in its own process group, as envtest does for
// kube-apiserver and etcd, so a Ctrl-C reaches this process alone and it
// stops the child in order; and it makes the child die with the thread that
// starts it, which lockedThread keeps alive as long as this process.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// commandName is the first word of the command line of a running process,
// or "" for a process that has ended (zombies included) or cannot be read.
func commandName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	name, _, _ := bytes.Cut(data, []byte{0})
	return string(name)
}
