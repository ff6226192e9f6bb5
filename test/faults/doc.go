// Package faults is the fault suite: two replicas of the real operator
// binary schedule bursts of pods against a real kube-apiserver and etcd
// while the suite crashes and restarts etcd and kube-apiserver, pauses the
// leader past its Lease (SIGSTOP, then SIGCONT) and drops the leader's
// connections (the replicas reach the API server through a loopback proxy
// the suite can cut). After each fault it checks that no pod was bound
// twice, no pod was lost (each ends bound, or pending with a reason), no
// node is overcommitted and every WaitingPod decision made before or
// during the fault was honoured, and it reports how long scheduling took
// to resume. It runs under make test; docs/performance.md has its figures.
package faults
