//go:build !linux

package localcluster

import "syscall"

// parentDeathLauncher returns bin itself: only Linux has a parent-death
// signal, so elsewhere the control plane outlives a process that is killed
// outright.
func parentDeathLauncher(_, bin, _ string) (string, error) { return bin, nil }

// childProcAttr puts a child in its own process group, as envtest does,
// so a Ctrl-C reaches this process alone and it stops the child in order.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// commandName is unknown without /proc: no process is recognised as one a
// local run started.
func commandName(int) string { return "" }
