// Package cache is the scheduler's view of the cluster: nodes and the pods on
// them as the informers report them, plus the pods the scheduler has assumed
// onto a node but whose binding the informers have not confirmed yet.
//
// An assumed pod counts on its node from the moment it is assumed, so the
// next scheduling cycle already sees the room it takes. It is confirmed when
// the bound pod arrives from the informer, forgotten when its binding fails,
// and expired if the binding finished but the bound pod never showed up.
//
// Every scheduling cycle starts with UpdateSnapshot, which brings a Snapshot
// up to date by copying only the nodes that changed since the previous
// cycle: nodes live in a list ordered by the generation of their last change
// (most recent first), so the walk stops at the first node the snapshot
// already has. The snapshot's node order spreads consecutive nodes across
// zones, as upstream kube-scheduler's node tree does.
package cache
