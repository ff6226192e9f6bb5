// Package coscheduling is the Coscheduling plugin of
// kubernetes-sigs/scheduler-plugins: gang scheduling of the pods that carry
// the label scheduling.x-k8s.io/pod-group, against the PodGroup API
// (scheduling.x-k8s.io/v1alpha1). A group's members wait at Permit, with
// their nodes reserved, until minMember of them have a node; then they all
// proceed. Its args, queue order, PreFilter checks and messages, PostFilter
// rejection with podGroupRejectPercentage and backoff, and Unreserve cascade
// are upstream's; a profile written for scheduler-plugins works unchanged.
//
// It differs from upstream where upstream can misbehave:
//
//   - No partial gang. Upstream counts a group's quorum from a set of pod
//     names that a rejected or timed-out member leaves only when its
//     Unreserve runs, and then allows the members still waiting one by one,
//     so the last member can pass Permit while a sibling is already
//     rejected. Here Permit counts, by UID and under one lock, the members
//     bound (per the pod informer), those this plugin let through and that
//     were not unreserved since, and those waiting; on quorum it allows
//     every waiting member in one step that fails if any of them was
//     resolved meanwhile, and the last member then waits instead of passing.
//   - Siblings are activated on every Wait, not only the first member's, so
//     a lost activation cannot stall a gang (scheduler-plugins #1001).
//   - Progress is visible: the Wait status says "N/M members assigned", and
//     every Wait updates that message on the waiting siblings, which their
//     WaitingPods show.
//
// The plugin's own state (group backoff, groups whose resources were
// checked, last failure times, members let through) lives in the instance,
// timed by an injectable clock, and is lost with it, as upstream's is with
// the scheduler process.
package coscheduling
