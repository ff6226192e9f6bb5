// Package nodedeclaredfeatures provides NodeDeclaredFeatures, the PreFilter
// and Filter plugin that keeps a pod off nodes whose kubelet does not declare
// (in node.status.declaredFeatures) a feature the pod needs, as
// kube-scheduler 1.37 does with its NodeDeclaredFeatures gate (GA, locked on).
//
// What a pod needs is inferred by k8s.io/component-helpers/nodedeclaredfeatures,
// the library kube-scheduler and the kubelet share, over its registry of
// features (ndf.DefaultFramework, as upstream): the release we build with,
// v0.37.2, is the one kube-scheduler 1.37.2 is built with. Of its features,
// three can be needed to schedule a pod: RestartAllContainersOnContainerExits
// (a container restart rule with action RestartAllContainers),
// UserNamespacesHostNetworkSupport (hostNetwork with hostUsers false) and
// VolumeBindMountOptions (a volume mount with bindMountOptions); the
// in-place resize features are checked by the kubelet when a pod is updated,
// and the others concern no pod at this point.
//
// Upstream 1.37 also lets a pod whose in-place resize was deferred pass,
// behind InPlacePodVerticalScalingSchedulerPreemption, an alpha gate off by
// default; with the default gates it never applies, and it is not built.
package nodedeclaredfeatures

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

const (
	// Name is the plugin's name in profiles, as upstream.
	Name = "NodeDeclaredFeatures"
	// ErrReason is upstream's reason for a node that lacks a feature the pod needs.
	ErrReason = "node(s) didn't match Pod's required features"

	preFilterStateKey framework.StateKey = "PreFilter" + Name

	// targetVersion is the kube-scheduler release whose inference the
	// plugin follows (upstream passes its own binary's version); the
	// library leaves out a feature for releases past the feature's
	// MaxVersion (none of 1.37.2's features has one).
	targetVersion = "1.37.2"
)

type nodeDeclaredFeatures struct {
	// rejected is the reasons of every rejection, shared to save an
	// allocation per rejected node; a Status never writes into its
	// reasons in place.
	rejected []string
	// features infers what a pod needs; the library's registry, never
	// written after its package is initialised.
	features *ndf.Framework
	version  *version.Version
}

var (
	_ framework.PreFilterPlugin   = (*nodeDeclaredFeatures)(nil)
	_ framework.FilterPlugin      = (*nodeDeclaredFeatures)(nil)
	_ framework.EnqueueExtensions = (*nodeDeclaredFeatures)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &nodeDeclaredFeatures{rejected: []string{ErrReason}, features: ndf.DefaultFramework, version: version.MustParse(targetVersion)}, nil
}

func (*nodeDeclaredFeatures) Name() string { return Name }

// preFilterState is the names of the features the pod needs, sorted.
type preFilterState []string

// Clone shares the names: other pods never change what this one needs.
func (s preFilterState) Clone() framework.StateData { return s }

// required infers the features spec needs a node to declare. Upstream
// hands the library the spec alone: the pod's status plays no part.
func (pl *nodeDeclaredFeatures) required(spec *v1.PodSpec) (ndf.FeatureSet, error) {
	return pl.features.InferForPodScheduling(&ndf.PodInfo{Spec: spec}, pl.version)
}

// PreFilter infers the features the pod needs; a pod that needs none (the
// usual case) skips Filter.
func (pl *nodeDeclaredFeatures) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	reqs, err := pl.required(&pod.Spec)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if reqs.IsEmpty() {
		return nil, framework.NewStatus(framework.Skip)
	}
	names, err := pl.features.Unmap(reqs)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	state.Write(preFilterStateKey, preFilterState(names))
	return nil, nil
}

// PreFilterExtensions returns nil: the state does not depend on other pods.
func (*nodeDeclaredFeatures) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter rejects a node that does not declare every feature the pod needs.
// Names the node declares that 1.37.2 does not know are ignored, as
// upstream's mapping of them does. Evicting pods never adds a feature,
// hence UnschedulableAndUnresolvable.
func (pl *nodeDeclaredFeatures) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	required, err := framework.ReadAs[preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	declared := nodeInfo.Node().Status.DeclaredFeatures
	for _, name := range required {
		if slices.Contains(declared, name) {
			continue
		}
		if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
			logger.Info("Node does not declare a feature the pod needs", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "feature", name)
		}
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, pl.rejected...)
	}
	return nil
}

// EventsToRegister: a node added, or one whose declared features change (a
// kubelet upgraded or reconfigured), may now declare what the pod needs; an
// update of the pod itself (a TargetPod event, as upstream 1.37) may change
// what it needs.
func (pl *nodeDeclaredFeatures) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeDeclaredFeature}, QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.Update}, QueueingHintFn: pl.isSchedulableAfterTargetPodUpdate},
	}, nil
}

// isSchedulableAfterNodeChange queues the pod for every new node and for a
// node whose declared features changed, without looking at what the pod
// needs, as upstream.
func (*nodeDeclaredFeatures) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if original != nil && slices.Equal(original.Status.DeclaredFeatures, modified.Status.DeclaredFeatures) {
		logger.V(5).Info("Node's declared features did not change", "pod", klog.KObj(pod), "node", klog.KObj(modified))
		return framework.QueueSkip, nil
	}
	logger.V(4).Info("Node was added or its declared features changed", "pod", klog.KObj(pod), "node", klog.KObj(modified))
	return framework.Queue, nil
}

// isSchedulableAfterTargetPodUpdate queues the pod when its update changes
// the features it needs. As upstream 1.37 it does not check whose update it
// was: the queue offers TargetPod events to the updated pod only (except
// when it replays them to every pod in flight, where upstream does not
// check either).
func (pl *nodeDeclaredFeatures) isSchedulableAfterTargetPodUpdate(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	original, modified, err := helper.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	before, err := pl.required(&original.Spec)
	if err != nil {
		return framework.Queue, err
	}
	after, err := pl.required(&modified.Spec)
	if err != nil {
		return framework.Queue, err
	}
	if after.Equal(before) {
		logger.V(5).Info("Pod's required features did not change", "pod", klog.KObj(pod))
		return framework.QueueSkip, nil
	}
	logger.V(4).Info("Pod's required features changed", "pod", klog.KObj(pod))
	return framework.Queue, nil
}
