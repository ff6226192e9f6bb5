// Package queue is the scheduling queue: the pods waiting for a node, and
// the rules that decide when each is tried again.
//
// Every profile (schedulerName) has its own active queue, ordered by that
// profile's QueueSort plugin; Pop serves the profiles round-robin, one pod
// at a time, so a backlog in one profile never starves another. Pods that
// failed wait in a shared backoff queue (1 s, doubling per attempt up to
// 10 s) or in the unschedulable pool. A cluster event moves out of the pool
// only the pods whose rejecting plugins registered that event (and whose
// queueing hints say it may help); whatever is left is flushed after five
// minutes at the latest. Events seen while a pod is being scheduled are
// replayed against it if it fails, so an event is never lost to a race
// with the cycle that is trying the pod.
//
// Only pods of a profile the queue knows enter it; PreEnqueue plugins
// (scheduling gates) hold pods back before they reach the active queue.
// The queue also tracks pods nominated to nodes by preemption
// (framework.PodNominator) and lets plugins activate pods
// (framework.PodActivator).
package queue
