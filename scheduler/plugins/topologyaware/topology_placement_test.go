package topologyaware

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestGeneratePlacements(t *testing.T) {
	const initialPlacementName = "test-placement"
	tests := []struct {
		name     string
		podGroup *schedulingv1beta1.PodGroup
		// scheduledPodNodes are the nodes of the group's scheduled pods.
		scheduledPodNodes  []string
		placementNodes     []*v1.Node
		otherNodes         []*v1.Node
		wantPlacementNodes map[string][]string
		wantErr            string
	}{
		{
			name:     "without constraint returns placement matching all nodes",
			podGroup: st.MakePodGroup().Name("root").Obj(),
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node1").Obj(),
				st.MakeNode().Name("node2").Label("foo", "bar").Obj(),
			},
			otherNodes:         []*v1.Node{st.MakeNode().Name("node3").Obj()},
			wantPlacementNodes: map[string][]string{initialPlacementName: {"node1", "node2"}},
		},
		{
			name:     "with topology key constraint, returns placement for each topology domain",
			podGroup: st.MakePodGroup().Name("root").TopologyKey("topology1").Obj(),
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node0").Label("topology2", "d1").Obj(),
				st.MakeNode().Name("node1").Label("topology2", "d4").Obj(),
				st.MakeNode().Name("node2").Label("topology1", "d1").Obj(),
				st.MakeNode().Name("node3").Label("topology1", "d2").Obj(),
				st.MakeNode().Name("node4").Label("topology1", "d1").Obj(),
				st.MakeNode().Name("node5").Label("topology1", "d3").Obj(),
			},
			wantPlacementNodes: map[string][]string{"d1": {"node2", "node4"}, "d2": {"node3"}, "d3": {"node5"}},
		},
		{
			name:     "without matching topology label, returns empty",
			podGroup: st.MakePodGroup().Name("root").TopologyKey("topology3").Obj(),
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node0").Label("topology2", "d1").Obj(),
				st.MakeNode().Name("node2").Label("topology1", "d1").Obj(),
			},
			wantPlacementNodes: map[string][]string{},
		},
		{
			name:              "with pods already scheduled in a single domain, returns that domain",
			podGroup:          st.MakePodGroup().Name("root").TopologyKey("topology").Obj(),
			scheduledPodNodes: []string{"node2", "node3"},
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node0").Label("topology", "d2").Obj(),
				st.MakeNode().Name("node1").Label("topology", "d1").Obj(),
			},
			otherNodes: []*v1.Node{
				st.MakeNode().Name("node2").Label("topology", "d1").Obj(),
				st.MakeNode().Name("node3").Label("topology", "d1").Obj(),
			},
			wantPlacementNodes: map[string][]string{"d1": {"node1"}},
		},
		{
			name:              "with pods already scheduled in a single domain not present in current placement, returns empty",
			podGroup:          st.MakePodGroup().Name("root").TopologyKey("topology").Obj(),
			scheduledPodNodes: []string{"node2", "node3"},
			placementNodes:    []*v1.Node{st.MakeNode().Name("node0").Label("topology", "d2").Obj()},
			otherNodes: []*v1.Node{
				st.MakeNode().Name("node2").Label("topology", "d1").Obj(),
				st.MakeNode().Name("node3").Label("topology", "d1").Obj(),
			},
			wantPlacementNodes: map[string][]string{},
		},
		{
			name:              "with pods already scheduled in conflicting domains, returns error",
			podGroup:          st.MakePodGroup().Name("root").TopologyKey("topology").Obj(),
			scheduledPodNodes: []string{"node2", "node3"},
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node0").Label("topology", "d2").Obj(),
				st.MakeNode().Name("node1").Label("topology", "d1").Obj(),
			},
			otherNodes: []*v1.Node{
				st.MakeNode().Name("node2").Label("topology", "d0").Obj(),
				st.MakeNode().Name("node3").Label("topology", "d1").Obj(),
			},
			wantErr: "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: d0, d1",
		},
		{
			name:              "with already scheduled pod on node outside of snapshot, returns error",
			podGroup:          st.MakePodGroup().Name("root").TopologyKey("topology").Obj(),
			scheduledPodNodes: []string{"node2", "node4"},
			placementNodes: []*v1.Node{
				st.MakeNode().Name("node0").Label("topology", "d2").Obj(),
				st.MakeNode().Name("node1").Label("topology", "d1").Obj(),
			},
			otherNodes: []*v1.Node{
				st.MakeNode().Name("node2").Label("topology", "d1").Obj(),
				st.MakeNode().Name("node3").Label("topology", "d1").Obj(),
			},
			wantErr: `cannot determine domain for already scheduled pods: getting node for pod default/pod1: nodeinfo not found for node name "node4"`,
		},
		{
			name:              "with already scheduled pod on node without topology label, returns error",
			podGroup:          st.MakePodGroup().Name("root").TopologyKey("topology").Obj(),
			scheduledPodNodes: []string{"node2"},
			placementNodes:    []*v1.Node{st.MakeNode().Name("node1").Label("topology", "d2").Obj()},
			otherNodes:        []*v1.Node{st.MakeNode().Name("node2").Label("foo", "bar").Obj()},
			wantErr:           "cannot determine domain for already scheduled pods: no topology domain found for pod default/pod0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*v1.Pod
			for i, node := range tt.scheduledPodNodes {
				name := fmt.Sprintf("pod%d", i)
				pods = append(pods, st.MakePod().Name(name).UID(name).Node(node).PodGroupName(tt.podGroup.Name).Obj())
			}
			// An unscheduled member has no domain yet.
			pods = append(pods, st.MakePod().Name("pending").PodGroupName(tt.podGroup.Name).Obj())
			podGroups := st.NewPodGroups([]*schedulingv1beta1.PodGroup{tt.podGroup}, pods)
			snapshot := st.NewSnapshot(pods, append(append([]*v1.Node{}, tt.placementNodes...), tt.otherNodes...)).WithPodGroups(podGroups)
			r := registry.New(map[string]runtime.Factory{Name: New})
			fwk := st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot,
				runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}))
			p, err := New(t.Context(), nil, fwk)
			if err != nil {
				t.Fatal(err)
			}
			pl := p.(framework.PlacementGeneratePlugin)

			placement := &framework.Placement{Name: initialPlacementName}
			for _, node := range tt.placementNodes {
				ni := framework.NewNodeInfo()
				ni.SetNode(node)
				placement.Nodes = append(placement.Nodes, ni)
			}
			podGroupInfo := &framework.PodGroupInfo{Namespace: tt.podGroup.Namespace, Name: tt.podGroup.Name, Type: framework.PodGroupKeyType, PodGroup: tt.podGroup}
			result, status := pl.GeneratePlacements(t.Context(), framework.NewCycleState(), podGroupInfo, placement)
			if tt.wantErr != "" {
				if status.Code() != framework.Error || status.Message() != tt.wantErr {
					t.Fatalf("GeneratePlacements: %v, want Error %q", status, tt.wantErr)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("GeneratePlacements: %v", status)
			}
			got := make(map[string][]string)
			for _, placement := range result.Placements {
				for _, node := range placement.Nodes {
					got[placement.Name] = append(got[placement.Name], node.Node().Name)
				}
			}
			if diff := cmp.Diff(tt.wantPlacementNodes, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}
