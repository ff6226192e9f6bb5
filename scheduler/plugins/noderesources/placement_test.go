package noderesources_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/noderesources"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// proposed is a pod of a group with the node a placement proposes for it.
type proposed struct {
	node    string
	podInfo *framework.PodInfo
}

func (p proposed) GetNodeName() string                  { return p.node }
func (p proposed) GetPod() *v1.Pod                      { return p.podInfo.Pod }
func (p proposed) GetPodInfo() *framework.PodInfo       { return p.podInfo }
func (p proposed) GetCycleState() *framework.CycleState { return nil }

// TestFitScorePlacement checks upstream's placement score: MostAllocated
// over the placement's nodes taken together, whatever the plugin's own
// strategy, the proposed pods' requests (with the scheduler's defaults for
// containers without any) added to what the nodes have allocated.
func TestFitScorePlacement(t *testing.T) {
	used := st.MakeNode().Name("used").Capacity(res{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi"}).Obj()
	empty := st.MakeNode().Name("empty").Capacity(res{v1.ResourceCPU: "8", v1.ResourceMemory: "8Gi"}).Obj()
	running := st.MakePod().Name("running").Node("used").Req(res{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Obj()
	usedInfo, emptyInfo := framework.NewNodeInfo(running), framework.NewNodeInfo()
	usedInfo.SetNode(used)
	emptyInfo.SetNode(empty)
	member := func(name, node string, req res) framework.ProposedAssignment {
		pi, err := framework.NewPodInfo(st.MakePod().Name(name).Req(req).Obj())
		if err != nil {
			t.Fatal(err)
		}
		return proposed{node: node, podInfo: pi}
	}
	two := []framework.ProposedAssignment{
		member("a", "used", res{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}),
		member("b", "empty", res{v1.ResourceCPU: "1", v1.ResourceMemory: "2Gi"}),
	}
	tests := []struct {
		name     string
		strategy *configv1.ScoringStrategy
		nodes    []*framework.NodeInfo
		members  []framework.ProposedAssignment
		want     int64
	}{
		{
			// cpu (2+1)/12 = 25, memory (4+1)/16 Gi = 31.
			name:    "two nodes, default LeastAllocated strategy",
			nodes:   []*framework.NodeInfo{usedInfo, emptyInfo},
			members: two,
			want:    28,
		},
		{
			name:     "resource weights apply",
			strategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated, Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory", Weight: 1}}},
			nodes:    []*framework.NodeInfo{usedInfo, emptyInfo},
			members:  two,
			want:     26,
		},
		{
			// 100m of 8 cpus = 1, 200Mi of 8Gi = 2.
			name:    "a container without requests counts the defaults",
			nodes:   []*framework.NodeInfo{emptyInfo},
			members: []framework.ProposedAssignment{member("c", "empty", nil)},
			want:    1,
		},
		{
			name:  "no pods on empty nodes",
			nodes: []*framework.NodeInfo{emptyInfo},
			want:  0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := &configv1.NodeResourcesFitArgs{ScoringStrategy: tt.strategy}
			noderesources.SetDefaultFitArgs(args)
			fwk := newFramework(t, st.NewSnapshot(nil, nil), args)
			pl, err := noderesources.New(context.Background(), args, fwk)
			if err != nil {
				t.Fatal(err)
			}
			scorer, ok := pl.(framework.PlacementScorePlugin)
			if !ok {
				t.Fatal("NodeResourcesFit does not score placements")
			}
			got, status := scorer.ScorePlacement(context.Background(), nil, nil, &framework.PodGroupAssignments{
				Placement:           &framework.Placement{Name: "p", Nodes: tt.nodes},
				ProposedAssignments: tt.members,
			})
			if !status.IsSuccess() {
				t.Fatal(status.AsError())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("score (-want +got):\n%s", diff)
			}
			if scorer.PlacementScoreExtensions() != nil {
				t.Error("PlacementScoreExtensions is not nil: upstream does not normalize these scores")
			}
		})
	}
}
