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
//     rejected; and it counts members that another Permit plugin still
//     holds, so that plugin can later reject one whose siblings were bound.
//     Here every member waits at Permit, and the plugin is a
//     framework.GangPermitPlugin: whenever a member starts waiting or
//     another plugin allows it, HoldChanged counts, by UID and under one
//     lock, the members bound by this profile (per the pod informer),
//     those this plugin let through and that were not unreserved since, and
//     those waiting that no other plugin holds; on quorum it lets every such
//     member go in one step that fails if any of them was resolved
//     meanwhile, and the gang then waits instead of passing. A member that
//     completes a gang at once passes Permit, as upstream's last member
//     does, without being seen waiting, whatever the timeout: the
//     framework starts a member's Permit timers only after HoldChanged.
//   - Only members whose schedulerName is this profile's count as bound: a
//     pod that carries the label and a node but was bound by another
//     scheduler or profile (or created bound under another schedulerName)
//     does not complete a gang.
//   - Siblings are activated by every member that reaches Permit while too
//     few of the group's members have a node (bound, let through or
//     waiting) for it to complete the gang, not only by the first as
//     upstream, so a lost activation cannot stall a gang
//     (scheduler-plugins #1001). A member that may complete the gang
//     activates none, as upstream's last member.
//   - Progress is visible: every waiting member says "N/M members
//     assigned" (and how many more other Permit plugins hold), updated
//     whenever a member's hold changes, which their WaitingPods show.
//
// The plugin's own state (group backoff, groups whose resources were
// checked, last failure times, members let through) lives in the instance,
// timed by an injectable clock, and is lost with it, as upstream's is with
// the scheduler process.
package coscheduling
