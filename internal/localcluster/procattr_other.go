//go:build !linux

package localcluster

import "syscall"

// childProcAttr puts a child in its own process group, as envtest does,
// so a Ctrl-C reaches this process alone and it stops the child in order.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
