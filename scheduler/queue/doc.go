// Package queue is the scheduling queue: the pods waiting for a node, and
// the rules that decide when each is tried again.
//
// Every profile (schedulerName) has its own active queue, ordered by that
// profile's QueueSort plugin; Pop serves the profiles round-robin, one
// entity (a pod, or a pod group) at a time, so a backlog in one profile
// never starves another. Pods that
// failed wait in a shared backoff queue (1 s, doubling per attempt up to
// 10 s) or in the unschedulable pool. A cluster event moves out of the pool
// only the pods whose rejecting plugins registered that event (and whose
// queueing hints say it may help); whatever is left is flushed after five
// minutes at the latest. Events seen while a pod is being scheduled are
// replayed against it if it fails, so an event is never lost to a race
// with the cycle that is trying the pod.
//
// A workload-aware profile (WithWorkloadAwareProfiles) queues the pods
// that name a PodGroup (spec.schedulingGroup.podGroupName) as members of
// it, as kube-scheduler does with GenericWorkload on: Pop returns the group
// with its queued pods as one entity, sorted against single pods by the
// profile's QueueSort, and the group backs off, is gated and is moved by
// events as a unit until the pod-group cycle hands it back
// (AddAttemptedPodGroupIfNeeded). Members wait while their PodGroup is not
// observed, or while their group is being scheduled.
//
// Only pods of a profile the queue knows enter it; PreEnqueue plugins
// (scheduling gates) hold pods back before they reach the active queue.
// The queue also tracks pods nominated to nodes by preemption
// (framework.PodNominator) and lets plugins activate pods
// (framework.PodActivator).
package queue
