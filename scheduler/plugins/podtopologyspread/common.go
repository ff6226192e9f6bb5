package podtopologyspread

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// topologySpreadConstraint is a v1.TopologySpreadConstraint with its
// selector parsed and its optional fields resolved.
type topologySpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	Selector           labels.Selector
	MinDomains         int32
	NodeAffinityPolicy v1.NodeInclusionPolicy
	NodeTaintsPolicy   v1.NodeInclusionPolicy
}

// nodeEligibility caches, for one node, the checks the inclusion policies
// need, so that several constraints on one node pay for them once.
type nodeEligibility struct {
	affinityChecked, affinityOK bool
	taintsChecked, taintsOK     bool
}

// includes reports whether node counts as a domain for c.
func (c *topologySpreadConstraint) includes(logger klog.Logger, pod *v1.Pod, node *v1.Node, affinity nodeaffinity.RequiredNodeAffinity, e *nodeEligibility) bool {
	if c.NodeAffinityPolicy == v1.NodeInclusionPolicyHonor {
		if !e.affinityChecked {
			// Parse errors are ignored, as upstream does, for compatibility.
			e.affinityOK, _ = affinity.Match(node)
			e.affinityChecked = true
		}
		if !e.affinityOK {
			return false
		}
	}
	if c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
		if !e.taintsChecked {
			// Only NoSchedule and NoExecute taints exclude a node;
			// PreferNoSchedule ones do not. Comparison operators in
			// tolerations are an alpha feature upstream, off by default.
			_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, helper.DoNotScheduleTaint, false)
			e.taintsOK = !untolerated
			e.taintsChecked = true
		}
		if !e.taintsOK {
			return false
		}
	}
	return true
}

// filterConstraints parses those of constraints that have the given
// whenUnsatisfiable action.
func filterConstraints(constraints []v1.TopologySpreadConstraint, podLabels map[string]string, action v1.UnsatisfiableConstraintAction) ([]topologySpreadConstraint, error) {
	var out []topologySpreadConstraint
	for i := range constraints {
		c := &constraints[i]
		if c.WhenUnsatisfiable != action {
			continue
		}
		selector, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, err
		}
		// The API server merges matchLabelKeys into the selector too;
		// merging again is harmless and covers pods created without it.
		if len(c.MatchLabelKeys) > 0 {
			matchLabels := make(labels.Set)
			for _, k := range c.MatchLabelKeys {
				if v, ok := podLabels[k]; ok {
					matchLabels[k] = v
				}
			}
			if len(matchLabels) > 0 {
				selector = mergeLabelSetWithSelector(matchLabels, selector)
			}
		}
		tsc := topologySpreadConstraint{
			MaxSkew:            c.MaxSkew,
			TopologyKey:        c.TopologyKey,
			Selector:           selector,
			MinDomains:         1,
			NodeAffinityPolicy: v1.NodeInclusionPolicyHonor,
			NodeTaintsPolicy:   v1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			tsc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			tsc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			tsc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		out = append(out, tsc)
	}
	return out, nil
}

// mergeLabelSetWithSelector ANDs matchLabels with s. A selector that
// matches nothing (nil labelSelector) has no requirements and stays as is.
func mergeLabelSetWithSelector(matchLabels labels.Set, s labels.Selector) labels.Selector {
	requirements, ok := s.Requirements()
	if !ok {
		return s
	}
	merged := labels.SelectorFromSet(matchLabels)
	for _, r := range requirements {
		merged = merged.Add(r)
	}
	return merged
}

// nodeLabelsMatchSpreadConstraints reports whether the node has every
// constraint's topology key.
func nodeLabelsMatchSpreadConstraints(nodeLabels map[string]string, constraints []topologySpreadConstraint) bool {
	for i := range constraints {
		if _, ok := nodeLabels[constraints[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// countPodsMatchSelector counts the pods of namespace ns matching selector,
// skipping terminating pods: they are leaving and would otherwise block
// their own replacements.
func countPodsMatchSelector(pods []*framework.PodInfo, selector labels.Selector, ns string) int {
	if selector.Empty() {
		return 0
	}
	n := 0
	for _, pi := range pods {
		p := pi.Pod
		if p.DeletionTimestamp != nil || p.Namespace != ns {
			continue
		}
		if selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// podLabelsMatchSpreadConstraints reports whether podLabels match any constraint's selector.
func podLabelsMatchSpreadConstraints(constraints []topologySpreadConstraint, podLabels labels.Set) bool {
	for i := range constraints {
		if constraints[i].Selector.Matches(podLabels) {
			return true
		}
	}
	return false
}

var (
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	ssKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// defaultSelector is the selector default constraints use for pod: the
// union of the selectors of the Services selecting it and of its
// controlling ReplicationController, ReplicaSet or StatefulSet. An empty
// result means the pod belongs to no group and is not spread.
func (pl *podTopologySpread) defaultSelector(pod *v1.Pod) labels.Selector {
	set := make(labels.Set)
	// Services, RCs, RSs and StatefulSets selecting the same pod cannot
	// hold conflicting values for a key, so merging is safe.
	if services, err := pl.services.Services(pod.Namespace).List(labels.Everything()); err == nil {
		for _, svc := range services {
			if svc.Spec.Selector == nil {
				// A nil service selector selects nothing, not everything.
				continue
			}
			if labels.Set(svc.Spec.Selector).AsSelectorPreValidated().Matches(labels.Set(pod.Labels)) {
				set = labels.Merge(set, svc.Spec.Selector)
			}
		}
	}
	selector := set.AsSelector()

	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return selector
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return selector
	}
	switch gv.WithKind(owner.Kind) {
	case rcKind:
		if rc, err := pl.replicationCtrls.ReplicationControllers(pod.Namespace).Get(owner.Name); err == nil {
			selector = labels.Merge(set, rc.Spec.Selector).AsSelector()
		}
	case rsKind:
		if rs, err := pl.replicaSets.ReplicaSets(pod.Namespace).Get(owner.Name); err == nil {
			selector = addSelector(selector, rs.Spec.Selector)
		}
	case ssKind:
		if ss, err := pl.statefulSets.StatefulSets(pod.Namespace).Get(owner.Name); err == nil {
			selector = addSelector(selector, ss.Spec.Selector)
		}
	}
	return selector
}

func addSelector(s labels.Selector, ls *metav1.LabelSelector) labels.Selector {
	other, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return s
	}
	if r, ok := other.Requirements(); ok {
		return s.Add(r...)
	}
	return s
}

// buildDefaultConstraints returns the default constraints with the given
// action, all using pod's default selector; none if the pod belongs to no
// group.
func (pl *podTopologySpread) buildDefaultConstraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]topologySpreadConstraint, error) {
	constraints, err := filterConstraints(pl.defaultConstraints, pod.Labels, action)
	if err != nil || len(constraints) == 0 {
		return nil, err
	}
	selector := pl.defaultSelector(pod)
	if selector.Empty() {
		return nil, nil
	}
	for i := range constraints {
		constraints[i].Selector = selector
	}
	return constraints, nil
}

// getConstraints returns the pod's constraints with action, or the default
// ones if the pod has none of its own (of any action).
func (pl *podTopologySpread) getConstraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]topologySpreadConstraint, error) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return filterConstraints(pod.Spec.TopologySpreadConstraints, pod.Labels, action)
	}
	return pl.buildDefaultConstraints(pod, action)
}
