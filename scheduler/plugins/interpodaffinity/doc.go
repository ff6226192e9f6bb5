// Package interpodaffinity implements the InterPodAffinity plugin of
// kube-scheduler's default profile: required and preferred pod affinity and
// anti-affinity between the pod being scheduled and the pods already placed.
//
// Filter enforces three rules, each evaluated per topology domain (the set of
// nodes sharing a value of the term's topologyKey):
//
//   - the incoming pod's required affinity: every term must be satisfied by
//     one existing pod in the node's domain. A pod whose terms match itself
//     may start a group when no pod in the cluster matches yet;
//   - the incoming pod's required anti-affinity: no existing pod matching a
//     term may be in the node's domain;
//   - symmetry: no existing pod whose required anti-affinity matches the
//     incoming pod may be in the node's domain.
//
// Score adds, per domain, the weights of the incoming pod's preferred terms
// matched by existing pods, the weights of existing pods' preferred terms
// matched by the incoming pod and hardPodAffinityWeight for each existing
// pod's required affinity term the incoming pod matches; anti-affinity
// weights are subtracted. Scores are then min-max normalized to 0..100.
//
// The cluster-wide work (walking every pod once) happens in PreFilter and
// PreScore and is kept in CycleState as counts per topology pair, so Filter
// and Score only look up the node's labels. The PreFilter state follows the
// AddPod/RemovePod extensions, which preemption and nominated pods use to
// evaluate hypothetical nodes.
//
// Namespace selectors of the incoming pod's terms are resolved against the
// namespace informer once per cycle. matchLabelKeys and mismatchLabelKeys of
// pod (anti-)affinity are merged into the label selector by the API server
// when the pod is created, as upstream relies on; the scheduler reads the
// merged selector.
package interpodaffinity
