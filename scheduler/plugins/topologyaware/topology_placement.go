// Package topologyaware provides TopologyPlacementGenerator, kube-scheduler
// 1.37's PlacementGenerate plugin: for a pod group whose PodGroup has a
// topology constraint, it proposes one placement per value of the
// constraint's node label (a rack, a zone), so that the group lands in one
// domain, the one its already scheduled pods are in if any. Upstream adds
// it to the default profile only with the TopologyAwareWorkloadScheduling
// gate (alpha, off by default).
package topologyaware

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "TopologyPlacementGenerator"

type topologyPlacement struct {
	handle framework.Handle
}

var _ framework.PlacementGeneratePlugin = (*topologyPlacement)(nil)

// New returns the plugin; it takes no args. It reads the group's pods and
// their nodes from the cycle's snapshot.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	if h.SnapshotSharedLister() == nil {
		return nil, errors.New("SnapshotSharedLister is nil")
	}
	return &topologyPlacement{handle: h}, nil
}

func (*topologyPlacement) Name() string { return Name }

// GeneratePlacements splits parentPlacement's nodes by the value of the
// group's topology key, leaving out nodes without the label. A group
// without a topology constraint gets parentPlacement itself. Once some of
// the group's pods are scheduled, only their domain is proposed; pods in
// different domains, on a node not in the snapshot or without the label,
// are an error.
func (pl *topologyPlacement) GeneratePlacements(_ context.Context, _ framework.PodGroupCycleState, podGroup *framework.PodGroupInfo, parentPlacement *framework.Placement) (*framework.GeneratePlacementsResult, *framework.Status) {
	topologyKey, ok := getTopologyKey(podGroup)
	if !ok {
		return &framework.GeneratePlacementsResult{Placements: []*framework.Placement{parentPlacement}}, nil
	}

	var requiredDomain *string
	scheduledPods, err := pl.getScheduledPods(podGroup)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(scheduledPods) > 0 {
		scheduledDomain, err := pl.getScheduledPodsTopologyDomain(topologyKey, scheduledPods)
		if err != nil {
			return nil, framework.AsStatus(fmt.Errorf("cannot determine domain for already scheduled pods: %w", err))
		}
		requiredDomain = &scheduledDomain
	}

	nodesPerTopologyDomain := make(map[string][]*framework.NodeInfo)
	for _, node := range parentPlacement.Nodes {
		if domain, ok := node.Node().Labels[topologyKey]; ok {
			if requiredDomain == nil || *requiredDomain == domain {
				nodesPerTopologyDomain[domain] = append(nodesPerTopologyDomain[domain], node)
			}
		}
	}
	// The order of the placements does not matter: the pod-group cycle
	// breaks ties between their scores at random.
	placements := make([]*framework.Placement, 0, len(nodesPerTopologyDomain))
	for topologyDomain, nodes := range nodesPerTopologyDomain {
		placements = append(placements, &framework.Placement{Name: topologyDomain, Nodes: nodes})
	}
	return &framework.GeneratePlacementsResult{Placements: placements}, nil
}

func (pl *topologyPlacement) getScheduledPodsTopologyDomain(topologyKey string, scheduledPods []*v1.Pod) (string, error) {
	topologyDomain := ""
	for _, pod := range scheduledPods {
		node, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(pod.Spec.NodeName)
		if err != nil {
			return "", fmt.Errorf("getting node for pod %v: %w", klog.KObj(pod), err)
		}
		domain, ok := node.Node().Labels[topologyKey]
		if !ok {
			return "", fmt.Errorf("no topology domain found for pod %v", klog.KObj(pod))
		}
		if topologyDomain != "" && topologyDomain != domain {
			return "", fmt.Errorf("more than 1 domain found for pod group: %v, %v", topologyDomain, domain)
		}
		topologyDomain = domain
	}
	return topologyDomain, nil
}

// getTopologyKey returns the key of the group's topology constraint. The
// API allows a single one. A composite group's would come from its
// CompositePodGroup.
func getTopologyKey(pgi *framework.PodGroupInfo) (string, bool) {
	if pg := pgi.GetPodGroup(); pg != nil {
		if constraints := pg.Spec.SchedulingConstraints; constraints != nil && len(constraints.Topology) > 0 {
			return constraints.Topology[0].Key, true
		}
	}
	return "", false
}

// getScheduledPods returns the group's assumed and bound pods. A composite
// group's would be gathered from its leaf groups (upstream's
// helper.GetPodGroupStates).
func (pl *topologyPlacement) getScheduledPods(podGroup *framework.PodGroupInfo) ([]*v1.Pod, error) {
	podGroupState, err := pl.handle.SnapshotSharedLister().PodGroupStates().Get(podGroup.GetNamespace(), podGroup.GetName())
	if err != nil {
		return nil, err
	}
	return podGroupState.ScheduledPods(), nil
}
