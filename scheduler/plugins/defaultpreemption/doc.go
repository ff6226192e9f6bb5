// Package defaultpreemption implements DefaultPreemption, the PostFilter
// plugin of kube-scheduler's default profile: when no node fits a pod, it
// looks for a node where evicting pods of lower priority would make room,
// evicts them and nominates the node for the pod.
//
// The steps follow upstream:
//
//  1. A pod with preemptionPolicy: Never does not preempt; neither does a
//     pod whose nominated node still has a victim of its earlier
//     preemption terminating (unless the filters now call that node
//     unresolvable).
//  2. Only nodes whose Filter failure was Unschedulable are candidates: an
//     UnschedulableAndUnresolvable failure (a missing label, node affinity,
//     ...) cannot be fixed by removing pods.
//  3. On each candidate, evaluated in parallel from a random offset, every
//     lower-priority pod is removed (through the PreFilter extensions, so
//     that spreading and affinity counts follow) and the pod must then pass
//     the filters, nominated pods included. Victims are then reprieved one
//     by one, most important first and those whose PodDisruptionBudget would
//     be violated before the others (a victim is charged to the budgets it
//     matches up to the first one it violates, as upstream since 1.37), as
//     long as the pod still fits. The search stops once
//     max(minCandidateNodesPercentage × candidates, minCandidateNodesAbsolute)
//     candidates are found and at least one of them violates no budget.
//  4. The node is picked by, in order: fewest budget violations, lowest
//     highest victim priority, lowest sum of victim priorities, fewest
//     victims, latest start of the highest-priority victims.
//  5. Victims get the DisruptionTarget condition (reason
//     PreemptionByScheduler) and are deleted, or, if held at Permit,
//     rejected in memory; a Preempted event is recorded on each. Lower
//     priority pods nominated to the node lose their nomination, since they
//     may no longer fit there.
//
// As upstream's default (async preemption, beta in 1.37), step 5 runs in
// the background: PostFilter returns the nominated node at once, with
// upstream 1.37's message naming it and the number of victims, and the
// plugin's PreEnqueue keeps the preemptor out of the active queue until the
// API calls are done, so it is retried only once room is being made (or at
// once if the last victim was rejected in memory and no deletion will
// follow). The scheduling loop records the nomination
// (status.nominatedNodeName and the PodNominator); from then on, filters
// see the preemptor on that node
// whenever they evaluate a pod of lower or equal priority, so lower
// priority pods cannot take the room that was freed.
//
// In a workload-aware profile (upstream's GenericWorkload gate), as
// kube-scheduler 1.37.2 with that gate:
//
//   - a member of a PodGroup weighs with its group's priority, and the
//     scheduled pods of a group whose disruptionMode is All are one victim,
//     on every node they run on: evicted together or not at all, their
//     budget violations counted together. Victims are ordered by priority,
//     then groups (and their lone members) before pods without one, then
//     the larger, then the one that started earlier;
//   - at podGroupPostFilter, for a group the pod-group cycle could not
//     place: every lower-priority victim in the cluster is removed from
//     the cycle's snapshot, the group's algorithm runs again, and victims
//     are added back, most important and budget-violating first, as long
//     as every proposed pod still passes the filters on its node; the rest
//     are evicted (the PodGroup is the preemptor of their condition and
//     event) and each placed pod is nominated to its node. The snapshot is
//     restored afterwards. A group one of whose pods has preemptionPolicy
//     Never does not preempt, and one whose pods are nominated to a node
//     where a victim is still terminating keeps its nominations and waits;
//   - PreEnqueue holds the pods of a group while its victims are evicted.
package defaultpreemption
