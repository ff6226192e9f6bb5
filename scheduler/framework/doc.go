// Package framework is the plugin contract of the scheduler: the extension-point
// interfaces a plugin implements, the values that flow between the framework and
// plugins (Status, CycleState, NodeInfo, PodInfo, scores, cluster events) and the
// Handle through which a plugin reaches the rest of the scheduler.
//
// Names, shapes and semantics mirror kube-scheduler's framework so that upstream
// plugin code can be ported line by line. Two deliberate differences:
//   - CycleState, NodeInfo and PodInfo are concrete structs rather than
//     interfaces; plugins receive *CycleState, *NodeInfo and *PodInfo.
//   - The package has no dependency on controller-runtime; it only depends on
//     client-go, apimachinery and component-helpers, so it can be vendored by
//     plugin authors without pulling in an operator stack.
//
// A framework instance (the thing that runs plugins for one profile) lives in
// the sibling runtime package.
package framework
