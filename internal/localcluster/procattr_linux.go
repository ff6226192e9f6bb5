package localcluster

import "syscall"

// childProcAttr puts a child in its own process group, as envtest does for
// kube-apiserver and etcd, so a Ctrl-C reaches this process alone and it
// stops the child in order; and it makes the child die with this process,
// so a test or run killed outright does not leave it running.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
