package interpodaffinity

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// Name is the plugin's name in profiles and the registry.
const Name = "InterPodAffinity"

const (
	minHardPodAffinityWeight = 0
	maxHardPodAffinityWeight = 100
)

// interPodAffinity is the plugin. Its fields are set in New and read-only
// afterwards, so concurrent cycles share it without locks.
type interPodAffinity struct {
	parallelizer framework.Parallelizer
	sharedLister framework.SharedLister
	nsLister     listersv1.NamespaceLister
	// hardPodAffinityWeight scores the symmetric side of existing pods'
	// required affinity terms; 0 disables it.
	hardPodAffinityWeight int32
	// ignorePreferredTermsOfExistingPods skips scoring entirely for pods
	// without preferred terms of their own.
	ignorePreferredTermsOfExistingPods bool
}

var (
	_ framework.PreFilterPlugin     = (*interPodAffinity)(nil)
	_ framework.PreFilterExtensions = (*interPodAffinity)(nil)
	_ framework.FilterPlugin        = (*interPodAffinity)(nil)
	_ framework.PreScorePlugin      = (*interPodAffinity)(nil)
	_ framework.ScorePlugin         = (*interPodAffinity)(nil)
	_ framework.ScoreExtensions     = (*interPodAffinity)(nil)
	_ framework.EnqueueExtensions   = (*interPodAffinity)(nil)
)

// New builds the plugin from *configv1.InterPodAffinityArgs (nil means the
// upstream defaults). The handle must provide a snapshot lister and an
// informer factory: namespace selectors are resolved through the namespace
// informer, which New registers with the factory.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	if h.SharedInformerFactory() == nil {
		return nil, errors.New("SharedInformerFactory is nil")
	}
	args, err := getArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	return &interPodAffinity{
		parallelizer:                       h.Parallelizer(),
		sharedLister:                       h.SnapshotSharedLister(),
		nsLister:                           h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		hardPodAffinityWeight:              *args.HardPodAffinityWeight,
		ignorePreferredTermsOfExistingPods: args.IgnorePreferredTermsOfExistingPods,
	}, nil
}

// ValidateArgs checks *configv1.InterPodAffinityArgs as upstream does. It is
// meant for the registry's ArgsSpec so that a bad profile is refused with a
// field path before the plugin is built.
func ValidateArgs(args *configv1.InterPodAffinityArgs) error {
	if args.HardPodAffinityWeight == nil {
		return nil
	}
	if w := *args.HardPodAffinityWeight; w < minHardPodAffinityWeight || w > maxHardPodAffinityWeight {
		return field.Invalid(field.NewPath("hardPodAffinityWeight"), w,
			fmt.Sprintf("not in valid range [%d, %d]", minHardPodAffinityWeight, maxHardPodAffinityWeight))
	}
	return nil
}

// getArgs returns a defaulted copy of obj so the caller's object is never mutated.
func getArgs(obj runtime.Object) (*configv1.InterPodAffinityArgs, error) {
	var args configv1.InterPodAffinityArgs
	if obj != nil {
		in, ok := obj.(*configv1.InterPodAffinityArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type InterPodAffinityArgs, got %T", obj)
		}
		args = *in.DeepCopy()
	}
	if args.HardPodAffinityWeight == nil {
		w := int32(1)
		args.HardPodAffinityWeight = &w
	}
	return &args, nil
}

// Name returns the plugin's name.
func (pl *interPodAffinity) Name() string { return Name }

// EventsToRegister lists the events that can make a pod this plugin
// rejected schedulable, with hints that drop the irrelevant ones; as
// upstream 1.37, bound pods' changes and the pod's own label change are
// separate registrations.
func (pl *interPodAffinity) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		// Add: a pod matching the incoming pod's affinity may appear.
		// UpdatePodLabel: a label change may start or stop a match.
		// Delete: a pod the incoming pod (or whose anti-affinity) rejected may go.
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodChange},
		// The pod's own labels may take it out of an existing pod's anti-affinity.
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel}, QueueingHintFn: pl.isSchedulableAfterTargetPodUpdateLabel},
		// A node joining a domain, or changing domain, may satisfy affinity
		// or leave an anti-affinity domain. Taints never matter to this plugin.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

// mergeNamespaceSelector resolves at's namespace selector into at.Namespaces
// and then makes the selector match nothing, so matching the incoming pod's
// terms against other pods never needs those pods' namespace labels. An
// empty selector (all namespaces) is kept as is. at belongs to a PodInfo
// built for this cycle only, so it may be modified.
func (pl *interPodAffinity) mergeNamespaceSelector(at *framework.AffinityTerm) error {
	if at.NamespaceSelector.Empty() {
		return nil
	}
	nss, err := pl.nsLister.List(at.NamespaceSelector)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		at.Namespaces.Insert(ns.Name)
	}
	at.NamespaceSelector = labels.Nothing()
	return nil
}

// mergeNamespaceSelectors resolves the namespace selectors of the required
// or preferred terms of pi, a PodInfo built for this cycle only: the
// queue's and the cache's PodInfos are shared and must not be modified.
func (pl *interPodAffinity) mergeNamespaceSelectors(pi *framework.PodInfo, required, preferred bool) error {
	if required {
		for i := range pi.RequiredAffinityTerms {
			if err := pl.mergeNamespaceSelector(&pi.RequiredAffinityTerms[i]); err != nil {
				return err
			}
		}
		for i := range pi.RequiredAntiAffinityTerms {
			if err := pl.mergeNamespaceSelector(&pi.RequiredAntiAffinityTerms[i]); err != nil {
				return err
			}
		}
	}
	if preferred {
		for i := range pi.PreferredAffinityTerms {
			if err := pl.mergeNamespaceSelector(&pi.PreferredAffinityTerms[i].AffinityTerm); err != nil {
				return err
			}
		}
		for i := range pi.PreferredAntiAffinityTerms {
			if err := pl.mergeNamespaceSelector(&pi.PreferredAntiAffinityTerms[i].AffinityTerm); err != nil {
				return err
			}
		}
	}
	return nil
}

// namespaceLabels returns a copy of the labels of namespace ns; existing
// pods' namespace selectors are matched against it. A namespace missing
// from the informer has no labels.
func (pl *interPodAffinity) namespaceLabels(logger klog.Logger, ns string) labels.Set {
	n, err := pl.nsLister.Get(ns)
	if err != nil {
		logger.V(3).Info("Getting namespace, assuming empty set of namespace labels", "namespace", ns, "err", err)
		return nil
	}
	return labels.Merge(n.Labels, nil)
}

// isSchedulableAfterTargetPodUpdateLabel always queues, as upstream 1.37:
// some existing pod's anti-affinity may have matched the old labels only.
func (*interPodAffinity) isSchedulableAfterTargetPodUpdateLabel(logger klog.Logger, pod *v1.Pod, _, _ any) (framework.QueueingHint, error) {
	logger.V(5).Info("the target pod labels have changed and it may be schedulable now", "pod", klog.KObj(pod))
	return framework.Queue, nil
}

func (pl *interPodAffinity) isSchedulableAfterAssignedPodChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	// Pods that are neither bound nor nominated take no part in the
	// filter; binding or nominating them arrives as a separate event.
	if (modified != nil && modified.Spec.NodeName == "" && modified.Status.NominatedNodeName == "") ||
		(original != nil && original.Spec.NodeName == "" && original.Status.NominatedNodeName == "") {
		logger.V(5).Info("The changed pod is not placed, it cannot make the pod schedulable", "pod", klog.KObj(pod))
		return framework.QueueSkip, nil
	}

	terms, err := framework.GetAffinityTerms(pod, framework.GetPodAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		return framework.Queue, err
	}
	antiTerms, err := framework.GetAffinityTerms(pod, framework.GetPodAntiAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		return framework.Queue, err
	}

	switch {
	case modified != nil && original != nil:
		// A single existing pod must match all affinity terms, so a pod
		// that starts matching all of them may help; any one anti-affinity
		// term it matched rejected its domain, so it helps once it matches
		// none (upstream 1.37; 1.36 asked for all of them).
		if !podMatchesAllAffinityTerms(terms, original) && podMatchesAllAffinityTerms(terms, modified) {
			logger.V(5).Info("A placed pod now matches the pod's affinity", "pod", klog.KObj(pod), "modifiedPod", klog.KObj(modified))
			return framework.Queue, nil
		}
		if podMatchesAnyAffinityTerms(antiTerms, original) && !podMatchesAnyAffinityTerms(antiTerms, modified) {
			logger.V(5).Info("A placed pod no longer matches the pod's anti-affinity", "pod", klog.KObj(pod), "modifiedPod", klog.KObj(modified))
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	case modified != nil:
		if podMatchesAllAffinityTerms(terms, modified) {
			logger.V(5).Info("A placed pod matching the pod's affinity was added", "pod", klog.KObj(pod), "addedPod", klog.KObj(modified))
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	}

	// Deleted: it may have been the pod the anti-affinity avoided, or the
	// pod whose anti-affinity rejected this one; one matching term is
	// enough either way.
	if podMatchesAnyAffinityTerms(antiTerms, original) {
		logger.V(5).Info("A placed pod matching the pod's anti-affinity was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(original))
		return framework.Queue, nil
	}
	originalAntiTerms, err := framework.GetAffinityTerms(original, framework.GetPodAntiAffinityTerms(original.Spec.Affinity))
	if err != nil {
		return framework.Queue, err
	}
	if podMatchesAnyAffinityTerms(originalAntiTerms, pod) {
		logger.V(5).Info("A placed pod whose anti-affinity matched the pod was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(original))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

func (pl *interPodAffinity) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if modified == nil {
		// Only Add and label updates are registered.
		return framework.QueueSkip, nil
	}
	terms, err := framework.GetAffinityTerms(pod, framework.GetPodAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		return framework.Queue, err
	}
	for _, t := range terms {
		newValue, newHas := modified.Labels[t.TopologyKey]
		if original == nil {
			if newHas {
				logger.V(5).Info("A node with the pod affinity's topology key was added", "pod", klog.KObj(pod), "node", klog.KObj(modified))
				return framework.Queue, nil
			}
			continue
		}
		oldValue, oldHas := original.Labels[t.TopologyKey]
		if newHas && (!oldHas || oldValue != newValue) {
			logger.V(5).Info("A node joined or changed a pod affinity domain", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
	}

	antiTerms, err := framework.GetAffinityTerms(pod, framework.GetPodAntiAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		return framework.Queue, err
	}
	for _, t := range antiTerms {
		if original == nil {
			// A new node may sit in a domain without the pods this one
			// avoids (or have no topology label at all); finding out
			// needs the pods of the domain, which a hint does not see.
			logger.V(5).Info("A node was added, it may be outside the pod's anti-affinity domains", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
		oldValue, oldHas := original.Labels[t.TopologyKey]
		newValue, newHas := modified.Labels[t.TopologyKey]
		// Gaining the key never helps: a node without it accepts anything.
		if oldHas && (!newHas || oldValue != newValue) {
			logger.V(5).Info("A node left or changed a pod anti-affinity domain", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
	}
	return framework.QueueSkip, nil
}
