// Package nodeaffinity provides NodeAffinity, kube-scheduler's plugin for
// spec.nodeSelector and spec.affinity.nodeAffinity: Filter enforces the
// selector and the required terms, Score sums the weights of the matching
// preferred terms (normalized to 0..100), and NodeAffinityArgs.addedAffinity
// applies scheduler-enforced affinity to every pod of the profile. PreFilter
// narrows the candidate nodes when every required term pins metadata.name.
package nodeaffinity

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodeAffinity"
	// ErrReasonPod is upstream's reason for a node that does not match the
	// pod's node selector or required node affinity.
	ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"
	// ErrReasonEnforced is upstream's reason for a node that does not
	// match addedAffinity.
	ErrReasonEnforced = "node(s) didn't match scheduler-enforced node affinity"
	// ErrReasonConflict is upstream's reason for required terms whose
	// metadata.name requirements select no node at all.
	ErrReasonConflict = "pod affinity terms conflict"

	preFilterStateKey framework.StateKey = "PreFilter" + Name
	preScoreStateKey  framework.StateKey = "PreScore" + Name
)

// Reasons are shared by every rejection to save an allocation per rejected
// node; a Status never writes into its reasons in place.
var (
	errReasonsPod      = []string{ErrReasonPod}
	errReasonsEnforced = []string{ErrReasonEnforced}
)

type nodeAffinityPlugin struct {
	addedNodeSelector   *nodeaffinity.NodeSelector
	addedPrefSchedTerms *nodeaffinity.PreferredSchedulingTerms
}

var (
	_ framework.PreFilterPlugin   = (*nodeAffinityPlugin)(nil)
	_ framework.FilterPlugin      = (*nodeAffinityPlugin)(nil)
	_ framework.PreScorePlugin    = (*nodeAffinityPlugin)(nil)
	_ framework.ScorePlugin       = (*nodeAffinityPlugin)(nil)
	_ framework.ScoreExtensions   = (*nodeAffinityPlugin)(nil)
	_ framework.EnqueueExtensions = (*nodeAffinityPlugin)(nil)
)

// New returns the plugin for *configv1.NodeAffinityArgs (nil means none).
func New(_ context.Context, obj runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	args := &configv1.NodeAffinityArgs{}
	if obj != nil {
		var ok bool
		if args, ok = obj.(*configv1.NodeAffinityArgs); !ok {
			return nil, fmt.Errorf("args are not of type NodeAffinityArgs, got %T", obj)
		}
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	pl := &nodeAffinityPlugin{}
	if added := args.AddedAffinity; added != nil {
		var err error
		if ns := added.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil {
			if pl.addedNodeSelector, err = nodeaffinity.NewNodeSelector(ns); err != nil {
				return nil, fmt.Errorf("parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: %w", err)
			}
		}
		if terms := added.PreferredDuringSchedulingIgnoredDuringExecution; len(terms) != 0 {
			if pl.addedPrefSchedTerms, err = nodeaffinity.NewPreferredSchedulingTerms(terms); err != nil {
				return nil, fmt.Errorf("parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
			}
		}
	}
	return pl, nil
}

// ValidateArgs is upstream's validation: addedAffinity's selectors must parse.
func ValidateArgs(args *configv1.NodeAffinityArgs) error {
	if args.AddedAffinity == nil {
		return nil
	}
	path := field.NewPath("addedAffinity")
	var errs []error
	if ns := args.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution; ns != nil {
		if _, err := nodeaffinity.NewNodeSelector(ns, field.WithPath(path.Child("requiredDuringSchedulingIgnoredDuringExecution"))); err != nil {
			errs = append(errs, err)
		}
	}
	if terms := args.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(terms) != 0 {
		if _, err := nodeaffinity.NewPreferredSchedulingTerms(terms, field.WithPath(path.Child("preferredDuringSchedulingIgnoredDuringExecution"))); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.Flatten(utilerrors.NewAggregate(errs))
}

func (*nodeAffinityPlugin) Name() string { return Name }

// preFilterState is the pod's parsed node selector and required affinity.
type preFilterState struct {
	required nodeaffinity.RequiredNodeAffinity
}

// Clone shares the state: it does not depend on other pods.
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter parses the pod's requirements once per cycle; a pod without
// any (and a profile without addedAffinity) skips Filter. When every
// required term names nodes through metadata.name "In", only those nodes
// are worth filtering; terms that together name no node are a conflict.
func (pl *nodeAffinityPlugin) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	affinity := pod.Spec.Affinity
	noNodeAffinity := affinity == nil || affinity.NodeAffinity == nil ||
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil
	if noNodeAffinity && pl.addedNodeSelector == nil && pod.Spec.NodeSelector == nil {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod)})
	if noNodeAffinity {
		return nil, nil
	}
	terms := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil, nil
	}
	var nodeNames sets.Set[string]
	for _, t := range terms {
		var termNodeNames sets.Set[string]
		for _, r := range t.MatchFields {
			if r.Key == metav1.ObjectNameField && r.Operator == v1.NodeSelectorOpIn {
				// Requirements of a term are ANDed.
				s := sets.New(r.Values...)
				if termNodeNames == nil {
					termNodeNames = s
				} else {
					termNodeNames = termNodeNames.Intersection(s)
				}
			}
		}
		if termNodeNames == nil {
			// Terms are ORed: one term not pinning names admits every node.
			return nil, nil
		}
		nodeNames = nodeNames.Union(termNodeNames)
	}
	if len(nodeNames) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
	}
	return &framework.PreFilterResult{NodeNames: nodeNames}, nil
}

// PreFilterExtensions returns nil: the state does not depend on other pods.
func (*nodeAffinityPlugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter checks addedAffinity, then the pod's node selector and required
// node affinity. Preemption cannot change node labels, hence
// UnschedulableAndUnresolvable.
func (pl *nodeAffinityPlugin) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if pl.addedNodeSelector != nil && !pl.addedNodeSelector.Match(node) {
		logRejection(ctx, pod, node, ErrReasonEnforced)
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, errReasonsEnforced...)
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		// PreFilter was disabled in the profile: parse here, as upstream does.
		s = &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod)}
	}
	// Parse errors are ignored, as upstream does: such a term matches no node.
	if match, _ := s.required.Match(node); !match {
		logRejection(ctx, pod, node, ErrReasonPod)
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, errReasonsPod...)
	}
	return nil
}

func logRejection(ctx context.Context, pod *v1.Pod, node *v1.Node, reason string) {
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Node does not match node affinity", "pod", klog.KObj(pod), "node", klog.KObj(node), "reason", reason)
	}
}

// preScoreState is the pod's parsed preferred terms.
type preScoreState struct {
	preferred *nodeaffinity.PreferredSchedulingTerms
}

// Clone shares the state: it does not depend on other pods.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore parses the pod's preferred terms once per cycle; with neither
// those nor preferred addedAffinity there is nothing to score.
func (pl *nodeAffinityPlugin) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	preferred, err := podPreferredTerms(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	if preferred == nil && pl.addedPrefSchedTerms == nil {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreStateKey, &preScoreState{preferred: preferred})
	return nil
}

// Score sums the weights of the preferred terms (the pod's and
// addedAffinity's) that the node matches.
func (pl *nodeAffinityPlugin) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	var count int64
	if pl.addedPrefSchedTerms != nil {
		count += pl.addedPrefSchedTerms.Score(node)
	}
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		// PreScore was disabled in the profile: parse here, as upstream does.
		preferred, err := podPreferredTerms(pod)
		if err != nil {
			return 0, framework.AsStatus(err)
		}
		s = &preScoreState{preferred: preferred}
	}
	if s.preferred != nil {
		count += s.preferred.Score(node)
	}
	return count, nil
}

// ScoreExtensions returns the plugin itself for NormalizeScore.
func (pl *nodeAffinityPlugin) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps sums of weights to 0..100 relative to the highest.
func (*nodeAffinityPlugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	return helper.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
}

func podPreferredTerms(pod *v1.Pod) (*nodeaffinity.PreferredSchedulingTerms, error) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, nil
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return nil, fmt.Errorf("parsing preferred node affinity of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return terms, nil
}

// EventsToRegister: only a node that is added or whose labels change can
// start matching.
func (pl *nodeAffinityPlugin) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

func (pl *nodeAffinityPlugin) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if pl.addedNodeSelector != nil && !pl.addedNodeSelector.Match(modified) {
		return framework.QueueSkip, nil
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	isMatched, err := required.Match(modified)
	if err != nil {
		return framework.Queue, err
	}
	if !isMatched {
		return framework.QueueSkip, nil
	}
	if original == nil {
		logger.V(5).Info("Node was created and matches the pod's node affinity", "pod", klog.KObj(pod), "node", klog.KObj(modified))
		return framework.Queue, nil
	}
	// An update only helps if the node did not match before.
	wasMatched, err := required.Match(original)
	if err != nil {
		return framework.Queue, err
	}
	if wasMatched {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}
