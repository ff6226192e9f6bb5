package podtopologyspread

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// Name is the plugin's name in profiles and the registry.
const Name = "PodTopologySpread"

// Filter reasons, as upstream words them.
const (
	// ErrReasonConstraintsNotMatch: placing the pod on the node would exceed maxSkew.
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	// ErrReasonNodeLabelNotMatch: the node lacks a constraint's topology key.
	ErrReasonNodeLabelNotMatch = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// systemDefaultConstraints are upstream's cluster defaults for
// defaultingType System: spread over hosts and, more loosely, zones.
var systemDefaultConstraints = []v1.TopologySpreadConstraint{
	{TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 5},
}

// podTopologySpread is the plugin. Its fields are set in New and read-only
// afterwards.
type podTopologySpread struct {
	parallelizer framework.Parallelizer
	sharedLister framework.SharedLister
	// defaultConstraints apply to pods without constraints of their own.
	defaultConstraints []v1.TopologySpreadConstraint
	// systemDefaulted: the defaults are the system ones, which also score
	// nodes lacking some of their topology keys (e.g. zoneless clusters).
	systemDefaulted bool

	// Listers deduce default selectors; nil without default constraints.
	services         corelisters.ServiceLister
	replicationCtrls corelisters.ReplicationControllerLister
	replicaSets      appslisters.ReplicaSetLister
	statefulSets     appslisters.StatefulSetLister
}

var (
	_ framework.PreFilterPlugin     = (*podTopologySpread)(nil)
	_ framework.PreFilterExtensions = (*podTopologySpread)(nil)
	_ framework.FilterPlugin        = (*podTopologySpread)(nil)
	_ framework.PreScorePlugin      = (*podTopologySpread)(nil)
	_ framework.ScorePlugin         = (*podTopologySpread)(nil)
	_ framework.ScoreExtensions     = (*podTopologySpread)(nil)
	_ framework.EnqueueExtensions   = (*podTopologySpread)(nil)
)

// New builds the plugin from *configv1.PodTopologySpreadArgs (nil means the
// upstream defaults: System defaulting). With default constraints, the
// handle's informer factory must be set: New registers the Service,
// ReplicationController, ReplicaSet and StatefulSet informers with it.
func New(_ context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	args, err := getArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := ValidateArgs(args); err != nil {
		return nil, err
	}
	pl := &podTopologySpread{
		parallelizer:       h.Parallelizer(),
		sharedLister:       h.SnapshotSharedLister(),
		defaultConstraints: args.DefaultConstraints,
	}
	if args.DefaultingType == configv1.SystemDefaulting {
		pl.defaultConstraints = systemDefaultConstraints
		pl.systemDefaulted = true
	}
	if len(pl.defaultConstraints) > 0 {
		f := h.SharedInformerFactory()
		if f == nil {
			return nil, errors.New("SharedInformerFactory is nil")
		}
		pl.services = f.Core().V1().Services().Lister()
		pl.replicationCtrls = f.Core().V1().ReplicationControllers().Lister()
		pl.replicaSets = f.Apps().V1().ReplicaSets().Lister()
		pl.statefulSets = f.Apps().V1().StatefulSets().Lister()
	}
	return pl, nil
}

// getArgs returns a defaulted copy of obj.
func getArgs(obj runtime.Object) (*configv1.PodTopologySpreadArgs, error) {
	var args configv1.PodTopologySpreadArgs
	if obj != nil {
		in, ok := obj.(*configv1.PodTopologySpreadArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type PodTopologySpreadArgs, got %T", obj)
		}
		args = *in.DeepCopy()
	}
	if args.DefaultingType == "" {
		args.DefaultingType = configv1.SystemDefaulting
	}
	return &args, nil
}

// ValidateArgs checks *configv1.PodTopologySpreadArgs as upstream does:
// the defaulting type, and default constraints that are valid, not
// repeated and without a label selector (it is deduced per pod).
func ValidateArgs(args *configv1.PodTopologySpreadArgs) error {
	var errs field.ErrorList
	typePath := field.NewPath("defaultingType")
	switch args.DefaultingType {
	case configv1.SystemDefaulting:
		if len(args.DefaultConstraints) > 0 {
			errs = append(errs, field.Invalid(typePath, args.DefaultingType, "when .defaultConstraints are not empty"))
		}
	case configv1.ListDefaulting:
	default:
		errs = append(errs, field.NotSupported(typePath, args.DefaultingType, []string{string(configv1.SystemDefaulting), string(configv1.ListDefaulting)}))
	}
	listPath := field.NewPath("defaultConstraints")
	for i, c := range args.DefaultConstraints {
		p := listPath.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "not in valid range (0, inf)"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, metav1validation.ValidateLabelName(c.TopologyKey, p.Child("topologyKey"))...)
		}
		supported := sets.New(string(v1.DoNotSchedule), string(v1.ScheduleAnyway))
		switch {
		case c.WhenUnsatisfiable == "":
			errs = append(errs, field.Required(p.Child("whenUnsatisfiable"), "can not be empty"))
		case !supported.Has(string(c.WhenUnsatisfiable)):
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, sets.List(supported)))
		}
		if c.LabelSelector != nil {
			errs = append(errs, field.Forbidden(p.Child("labelSelector"), "constraint must not define a selector, as they deduced for each pod"))
		}
		for j := range args.DefaultConstraints[:i] {
			o := &args.DefaultConstraints[j]
			if c.TopologyKey == o.TopologyKey && c.WhenUnsatisfiable == o.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(p, fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
	}
	return errs.ToAggregate()
}

// Name returns the plugin's name.
func (pl *podTopologySpread) Name() string { return Name }

// EventsToRegister lists the events that can make a pod this plugin
// rejected schedulable, with hints that drop the irrelevant ones; as
// upstream 1.37, bound pods' changes and the pod's own changes are
// separate registrations.
func (pl *podTopologySpread) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		// Add, UpdatePodLabel and Delete of a placed pod change the counts of a domain.
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete}, QueueingHintFn: pl.isSchedulableAfterAssignedPodChange},
		// The pod's own new toleration can widen the eligible domains under
		// nodeTaintsPolicy: Honor; its own labels decide whether it counts
		// itself in its constraints.
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration | framework.UpdatePodLabel}, QueueingHintFn: pl.isSchedulableAfterTargetPodChange},
		// Nodes appearing, going or changing labels or taints change the domains.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.Delete | framework.UpdateNodeLabel | framework.UpdateNodeTaint}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
	}, nil
}

// involvedInTopologySpreading reports whether changes to other can alter
// the counts of pod's constraints: other is a placed (or nominated) pod of
// the same namespace.
func involvedInTopologySpreading(other, pod *v1.Pod) bool {
	if other.Spec.NodeName == "" && other.Status.NominatedNodeName == "" {
		return false
	}
	return other.Namespace == pod.Namespace
}

func hasConstraintWithNodeTaintsPolicyHonor(constraints []topologySpreadConstraint) bool {
	for i := range constraints {
		if constraints[i].NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
			return true
		}
	}
	return false
}

// isSchedulableAfterTargetPodChange handles the pod's own update. It does
// not compare UIDs, as upstream 1.37: the queue offers TargetPod events to
// the updated pod only, except when it replays them to every pod in flight.
func (pl *podTopologySpread) isSchedulableAfterTargetPodChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	// Only the hard constraints can have rejected the pod.
	constraints, err := pl.getConstraints(pod, v1.DoNotSchedule)
	if err != nil {
		return framework.Queue, err
	}
	if !equality.Semantic.DeepEqual(modified.Spec.Tolerations, original.Spec.Tolerations) && hasConstraintWithNodeTaintsPolicyHonor(constraints) {
		logger.V(5).Info("The pod got a new toleration, which can widen its eligible domains", "pod", klog.KObj(pod))
		return framework.Queue, nil
	}
	return labelChangeHint(logger, original, modified, constraints), nil
}

func (pl *podTopologySpread) isSchedulableAfterAssignedPodChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if (modified != nil && !involvedInTopologySpreading(modified, pod)) || (original != nil && !involvedInTopologySpreading(original, pod)) {
		logger.V(5).Info("The changed pod is not placed or in another namespace, it cannot make the pod schedulable", "pod", klog.KObj(pod))
		return framework.QueueSkip, nil
	}
	// Only the hard constraints can have rejected the pod.
	constraints, err := pl.getConstraints(pod, v1.DoNotSchedule)
	if err != nil {
		return framework.Queue, err
	}

	switch {
	case modified != nil && original != nil:
		return labelChangeHint(logger, original, modified, constraints), nil
	case modified != nil:
		if podLabelsMatchSpreadConstraints(constraints, modified.Labels) {
			logger.V(5).Info("A placed pod matching the pod's spread constraints was added", "pod", klog.KObj(pod), "addedPod", klog.KObj(modified))
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	}
	if podLabelsMatchSpreadConstraints(constraints, original.Labels) {
		logger.V(5).Info("A placed pod matching the pod's spread constraints was deleted", "pod", klog.KObj(pod), "deletedPod", klog.KObj(original))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

// labelChangeHint queues when the update made the changed pod start or
// stop matching the selector of one of constraints.
func labelChangeHint(logger klog.Logger, original, modified *v1.Pod, constraints []topologySpreadConstraint) framework.QueueingHint {
	if equality.Semantic.DeepEqual(modified.Labels, original.Labels) {
		return framework.QueueSkip
	}
	for i := range constraints {
		if constraints[i].Selector.Matches(labels.Set(original.Labels)) != constraints[i].Selector.Matches(labels.Set(modified.Labels)) {
			logger.V(5).Info("A placed or the target pod started or stopped matching the pod's spread constraints", "modifiedPod", klog.KObj(modified))
			return framework.Queue
		}
	}
	return framework.QueueSkip
}

func (pl *podTopologySpread) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	constraints, err := pl.getConstraints(pod, v1.DoNotSchedule)
	if err != nil {
		return framework.Queue, err
	}
	var originalMatching, modifiedMatching bool
	if original != nil {
		originalMatching = nodeLabelsMatchSpreadConstraints(original.Labels, constraints)
	}
	if modified != nil {
		modifiedMatching = nodeLabelsMatchSpreadConstraints(modified.Labels, constraints)
	}
	switch {
	case original != nil && modified != nil:
		if originalMatching != modifiedMatching {
			logger.V(5).Info("A node gained or lost the pod's topology keys", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
		if modifiedMatching && (topologyKeyLabelsChanged(original.Labels, modified.Labels, constraints) || !equality.Semantic.DeepEqual(original.Spec.Taints, modified.Spec.Taints)) {
			logger.V(5).Info("A node changed domain or taints", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	case modified != nil:
		if modifiedMatching {
			logger.V(5).Info("A node with the pod's topology keys was added", "pod", klog.KObj(pod), "node", klog.KObj(modified))
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	case original != nil && originalMatching:
		// Deleting a node can remove the domain holding the global minimum.
		logger.V(5).Info("A node with the pod's topology keys was deleted", "pod", klog.KObj(pod), "node", klog.KObj(original))
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

func topologyKeyLabelsChanged(original, modified map[string]string, constraints []topologySpreadConstraint) bool {
	for i := range constraints {
		k := constraints[i].TopologyKey
		if original[k] != modified[k] {
			return true
		}
	}
	return false
}
