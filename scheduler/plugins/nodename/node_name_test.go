package nodename_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeaffinity"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodename"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestNodeName(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj()}
	// What upstream 1.37.2 records for a node PreFilter ruled out.
	ruledOut := func(plugins string) *framework.Status {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) "+plugins)
	}
	tests := []struct {
		name          string
		plugins       []string
		pod           *v1.Pod
		wantPreFilter *framework.Status
		wantFilter    map[string]*framework.Status
		wantMessage   string
	}{
		{
			name:       "no node name fits every node",
			pod:        st.MakePod().Name("p").Obj(),
			wantFilter: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name:       "node name: PreFilter rules out every other node",
			pod:        st.MakePod().Name("p").Node("n2").Obj(),
			wantFilter: map[string]*framework.Status{"n1": ruledOut("[NodeName]"), "n2": nil},
		},
		{
			name:        "unknown node fits none",
			pod:         st.MakePod().Name("p").Node("n3").Obj(),
			wantFilter:  map[string]*framework.Status{"n1": ruledOut("[NodeName]"), "n2": ruledOut("[NodeName]")},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeName].",
		},
		{
			name:          "matchFields naming another node is a PreFilter rejection",
			plugins:       []string{nodeaffinity.Name},
			pod:           st.MakePod().Name("p").Node("n2").RequiredNodeAffinity(st.NameTerm("n1")).Obj(),
			wantPreFilter: framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously"),
			wantFilter: map[string]*framework.Status{
				"n1": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously"),
				"n2": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously"),
			},
			wantMessage: "0/2 nodes are available: node(s) didn't satisfy plugin(s) [NodeAffinity NodeName] simultaneously.",
		},
		{
			name:       "matchFields naming the same node",
			plugins:    []string{nodeaffinity.Name},
			pod:        st.MakePod().Name("p").Node("n2").RequiredNodeAffinity(st.NameTerm("n2")).Obj(),
			wantFilter: map[string]*framework.Status{"n1": ruledOut("[NodeAffinity NodeName]"), "n2": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			profile := []configv1.Plugin{st.Plugin(nodename.Name, 0)}
			for _, name := range tt.plugins {
				profile = append(profile, st.Plugin(name, 0))
			}
			fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(profile...), snapshot)
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.wantPreFilter, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFilter, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMessage, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkNodeName(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node { return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj() })
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := st.NewFramework(b, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodename.Name, 0)), snapshot, runtime.WithParallelism(1))
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").Node("node-42").Obj())
	})
}
