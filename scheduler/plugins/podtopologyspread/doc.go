// Package podtopologyspread implements the PodTopologySpread plugin of
// kube-scheduler's default profile: it spreads matching pods across
// topology domains (nodes sharing a value of a constraint's topologyKey).
//
// A constraint with whenUnsatisfiable: DoNotSchedule is a filter: a node
// fails when placing the pod there would make
//
//	(matching pods in the node's domain) + (1 if the pod matches itself) - (global minimum)
//
// exceed maxSkew. The global minimum is the lowest count over the eligible
// domains, or 0 while there are fewer eligible domains than minDomains.
// A node without the topology key fails as UnschedulableAndUnresolvable.
// A constraint with ScheduleAnyway is a score: nodes in domains with fewer
// matching pods score higher.
//
// Which nodes count as domains follows nodeAffinityPolicy (Honor by
// default: only nodes matching the pod's nodeSelector and required node
// affinity) and nodeTaintsPolicy (Ignore by default; Honor leaves out
// nodes with NoSchedule/NoExecute taints the pod does not tolerate).
// matchLabelKeys add the pod's own values of those labels to the selector.
// Only pods in the incoming pod's namespace are counted, terminating pods
// are not.
//
// Pods without constraints of their own get the cluster default
// constraints: with defaultingType System, hostname (maxSkew 3) and zone
// (maxSkew 5) spreading, both ScheduleAnyway; with List, the profile's
// defaultConstraints. Default constraints select the pods of the same
// Services, ReplicationControllers, ReplicaSets and StatefulSets, read
// from informers.
//
// Counting walks every node once per pod in PreFilter and PreScore, in
// parallel; Filter and Score are map lookups. The PreFilter counts follow
// the AddPod/RemovePod extensions used by preemption and nominated pods.
package podtopologyspread
