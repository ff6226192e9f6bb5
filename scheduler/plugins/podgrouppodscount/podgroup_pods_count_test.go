package podgrouppodscount

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// proposedAssignment is a pod with the node a placement proposes for it.
type proposedAssignment struct {
	nodeName string
	podInfo  *framework.PodInfo
}

var _ framework.ProposedAssignment = (*proposedAssignment)(nil)

func (pa *proposedAssignment) GetNodeName() string                  { return pa.nodeName }
func (pa *proposedAssignment) GetPod() *v1.Pod                      { return pa.podInfo.Pod }
func (pa *proposedAssignment) GetPodInfo() *framework.PodInfo       { return pa.podInfo }
func (pa *proposedAssignment) GetCycleState() *framework.CycleState { return nil }

// newPlugin builds the plugin with the Handle of a framework instance
// whose snapshot holds podGroups.
func newPlugin(t *testing.T, podGroups *st.PodGroups) *podGroupPodsCount {
	t.Helper()
	r := registry.New(map[string]runtime.Factory{Name: New})
	fwk := st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0)), st.NewSnapshot(nil, nil).WithPodGroups(podGroups),
		runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}))
	p, err := New(t.Context(), nil, fwk)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*podGroupPodsCount)
}

func TestScorePlacement(t *testing.T) {
	member := func(name, node string) *v1.Pod {
		return st.MakePod().Name(name).UID(name).Node(node).PodGroupName("root").Obj()
	}
	proposed := func(name, node string) framework.ProposedAssignment {
		pi, err := framework.NewPodInfo(member(name, ""))
		if err != nil {
			t.Fatal(err)
		}
		return &proposedAssignment{nodeName: node, podInfo: pi}
	}
	placement := &framework.PodGroupAssignments{
		ProposedAssignments: []framework.ProposedAssignment{proposed("proposed-pod-1", "node1"), proposed("proposed-pod-2", "node2")},
	}
	tests := []struct {
		name string
		// assignedNodes are the nodes of the group's bound pods, assumedNodes
		// those of its assumed pods.
		assignedNodes, assumedNodes []string
		want                        int64
	}{
		{name: "existing assigned and assumed pods", assignedNodes: []string{"node2", "node3"}, assumedNodes: []string{"node1"}, want: 5}, // 1 assumed + 2 assigned + 2 proposed
		{name: "no assumed pods", assignedNodes: []string{"node1"}, want: 3},                                                              // 1 assigned + 2 proposed
		{name: "no assigned pods", assumedNodes: []string{"node1"}, want: 3},                                                              // 1 assumed + 2 proposed
		{name: "no assigned pods, no assumed pods", want: 2},                                                                              // 2 proposed
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := st.MakePodGroup().Name("root").Obj()
			var pods []*v1.Pod
			for i, node := range tt.assignedNodes {
				pods = append(pods, member(fmt.Sprintf("assigned-pod%d", i), node))
			}
			var assumed []*v1.Pod
			for i := range tt.assumedNodes {
				assumed = append(assumed, member(fmt.Sprintf("assumed-pod%d", i), ""))
			}
			// An unscheduled member does not count.
			podGroups := st.NewPodGroups([]*schedulingv1beta1.PodGroup{root}, append(append(pods, assumed...), member("pending", "")))
			for i, pod := range assumed {
				podGroups.Assume(pod, tt.assumedNodes[i])
			}
			pl := newPlugin(t, podGroups)
			got, status := pl.ScorePlacement(t.Context(), framework.NewCycleState(), podGroupInfo(root), placement)
			if !status.IsSuccess() {
				t.Fatalf("ScorePlacement: %v", status)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("score (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScorePlacementUnknownGroup(t *testing.T) {
	pl := newPlugin(t, st.NewPodGroups(nil, nil))
	_, got := pl.ScorePlacement(t.Context(), framework.NewCycleState(), podGroupInfo(st.MakePodGroup().Name("root").Obj()), &framework.PodGroupAssignments{})
	if want := "pod group state not found for pod group default/root"; got.Code() != framework.Error || got.Message() != want {
		t.Errorf("ScorePlacement: %v, want Error %q", got, want)
	}
}

func TestNormalizePlacementScore(t *testing.T) {
	tests := []struct {
		name    string
		scores  []int64
		want    []int64
		wantErr string
	}{
		// score * (MaxScore - MinScore) / maxCount, with integer division:
		// 10*100/110 = 9, 50*100/110 = 45, 110*100/110 = 100.
		{name: "distinct scores", scores: []int64{10, 50, 110}, want: []int64{9, 45, 100}},
		{name: "equal scores", scores: []int64{50, 50}, want: []int64{100, 100}},
		{name: "single score", scores: []int64{50}, want: []int64{100}},
		// A score far from the others is not spread evenly.
		{name: "some minimal score that is far from a group of scores located closely", scores: []int64{11, 100, 101, 102}, want: []int64{10, 98, 99, 100}},
		{name: "zero scores", scores: []int64{0, 0}, wantErr: "no pods from pod group are assigned to any of the candidate placements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, st.NewPodGroups(nil, nil))
			ext := pl.PlacementScoreExtensions()
			if ext == nil {
				t.Fatal("no PlacementScoreExtensions")
			}
			scores := make([]framework.PlacementScore, len(tt.scores))
			for i, s := range tt.scores {
				scores[i].Score = s
			}
			status := ext.NormalizePlacementScore(t.Context(), framework.NewCycleState(), podGroupInfo(st.MakePodGroup().Name("pg1").Obj()), scores)
			if tt.wantErr != "" {
				if status.Code() != framework.Error || status.Message() != tt.wantErr {
					t.Fatalf("NormalizePlacementScore: %v, want Error %q", status, tt.wantErr)
				}
				return
			}
			if !status.IsSuccess() {
				t.Fatalf("NormalizePlacementScore: %v", status)
			}
			got := make([]int64, len(scores))
			for i, s := range scores {
				got[i] = s.Score
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func podGroupInfo(pg *schedulingv1beta1.PodGroup) *framework.PodGroupInfo {
	return &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: framework.PodGroupKeyType, PodGroup: pg}
}
