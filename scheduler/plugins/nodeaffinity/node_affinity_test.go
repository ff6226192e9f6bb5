package nodeaffinity_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeaffinity"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func newFramework(tb testing.TB, snapshot *st.Snapshot, args *configv1.NodeAffinityArgs, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(nodeaffinity.Name, 1)), nodeaffinity.Name, args)
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), profile, snapshot, opts...)
}

func TestNodeAffinityFilter(t *testing.T) {
	noMatch := framework.NewStatus(framework.UnschedulableAndUnresolvable, nodeaffinity.ErrReasonPod).WithPlugin(nodeaffinity.Name)
	enforced := framework.NewStatus(framework.UnschedulableAndUnresolvable, nodeaffinity.ErrReasonEnforced).WithPlugin(nodeaffinity.Name)
	notNamed := framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity]")
	conflict := framework.NewStatus(framework.UnschedulableAndUnresolvable, nodeaffinity.ErrReasonConflict).WithPlugin(nodeaffinity.Name)
	nodes := []*v1.Node{
		st.MakeNode().Name("n1").Label("foo", "bar").Label("zone", "a").Label("gpus", "4").Obj(),
		st.MakeNode().Name("n2").Label("foo", "baz").Label("zone", "b").Obj(),
	}
	tests := []struct {
		name        string
		pod         *v1.Pod
		args        *configv1.NodeAffinityArgs
		want        map[string]*framework.Status
		wantMessage string
	}{
		{
			name: "no selector nor affinity",
			pod:  st.MakePod().Name("p").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name: "nodeSelector",
			pod:  st.MakePod().Name("p").NodeSelector(map[string]string{"foo": "bar"}).Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": noMatch},
		},
		{
			name:        "nodeSelector matching no node",
			pod:         st.MakePod().Name("p").NodeSelector(map[string]string{"foo": "qux"}).Obj(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name: "required In",
			pod:  st.MakePod().Name("p").NodeAffinityIn("zone", "b", "c").Obj(),
			want: map[string]*framework.Status{"n1": noMatch, "n2": nil},
		},
		{
			name: "required NotIn",
			pod:  st.MakePod().Name("p").NodeAffinityNotIn("zone", "b").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": noMatch},
		},
		{
			name: "required Exists",
			pod:  st.MakePod().Name("p").RequiredNodeAffinity(st.LabelTerm("gpus", v1.NodeSelectorOpExists)).Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": noMatch},
		},
		{
			name: "required DoesNotExist",
			pod:  st.MakePod().Name("p").RequiredNodeAffinity(st.LabelTerm("gpus", v1.NodeSelectorOpDoesNotExist)).Obj(),
			want: map[string]*framework.Status{"n1": noMatch, "n2": nil},
		},
		{
			name: "required Gt",
			pod:  st.MakePod().Name("p").RequiredNodeAffinity(st.LabelTerm("gpus", v1.NodeSelectorOpGt, "2")).Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": noMatch},
		},
		{
			name:        "required Lt",
			pod:         st.MakePod().Name("p").RequiredNodeAffinity(st.LabelTerm("gpus", v1.NodeSelectorOpLt, "2")).Obj(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name: "terms are ORed",
			pod:  st.MakePod().Name("p").NodeAffinityIn("zone", "a").NodeAffinityIn("foo", "baz").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name: "expressions of a term are ANDed",
			pod: st.MakePod().Name("p").RequiredNodeAffinity(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}},
				{Key: "foo", Operator: v1.NodeSelectorOpIn, Values: []string{"baz"}},
			}}).Obj(),
			want: map[string]*framework.Status{"n1": noMatch, "n2": nil},
		},
		{
			name:        "nodeSelector and affinity must both match",
			pod:         st.MakePod().Name("p").NodeSelector(map[string]string{"foo": "bar"}).NodeAffinityIn("zone", "b").Obj(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name: "an empty term list matches no node",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Obj()
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{}}}
				return p
			}(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name:        "an empty term matches no node",
			pod:         st.MakePod().Name("p").RequiredNodeAffinity(v1.NodeSelectorTerm{}).Obj(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name:        "an invalid term matches no node",
			pod:         st.MakePod().Name("p").RequiredNodeAffinity(st.LabelTerm("gpus", v1.NodeSelectorOpGt, "many")).Obj(),
			want:        map[string]*framework.Status{"n1": noMatch, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{
			name: "metadata.name narrows the nodes in PreFilter",
			pod:  st.MakePod().Name("p").RequiredNodeAffinity(st.NameTerm("n2")).RequiredNodeAffinity(st.NameTerm("n3")).Obj(),
			want: map[string]*framework.Status{"n1": notNamed, "n2": nil},
		},
		{
			name: "metadata.name with a label requirement",
			pod: st.MakePod().Name("p").RequiredNodeAffinity(v1.NodeSelectorTerm{
				MatchExpressions: st.LabelTerm("zone", v1.NodeSelectorOpIn, "a").MatchExpressions,
				MatchFields:      st.NameTerm("n2").MatchFields,
			}).Obj(),
			want:        map[string]*framework.Status{"n1": notNamed, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't satisfy plugin(s) [NodeAffinity].",
		},
		{
			name: "a term without metadata.name admits every node",
			pod:  st.MakePod().Name("p").RequiredNodeAffinity(st.NameTerm("n2")).NodeAffinityIn("zone", "a").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name: "conflicting metadata.name requirements",
			pod: st.MakePod().Name("p").RequiredNodeAffinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
				st.NameTerm("n1").MatchFields[0], st.NameTerm("n2").MatchFields[0],
			}}).Obj(),
			want:        map[string]*framework.Status{"n1": conflict, "n2": conflict},
			wantMessage: "0/2 nodes are available: pod affinity terms conflict.",
		},
		{
			name: "addedAffinity applies to pods without affinity",
			pod:  st.MakePod().Name("p").Obj(),
			args: &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{st.LabelTerm("zone", v1.NodeSelectorOpIn, "b")},
			}}},
			want:        map[string]*framework.Status{"n1": enforced, "n2": nil},
			wantMessage: "",
		},
		{
			name: "addedAffinity and the pod's affinity must both match",
			pod:  st.MakePod().Name("p").NodeAffinityIn("foo", "bar").Obj(),
			args: &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{st.LabelTerm("zone", v1.NodeSelectorOpIn, "b")},
			}}},
			want:        map[string]*framework.Status{"n1": enforced, "n2": noMatch},
			wantMessage: "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match scheduler-enforced node affinity.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot, tt.args), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMessage, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeAffinityScore(t *testing.T) {
	preferred := func(p *st.PodWrapper) *st.PodWrapper {
		return p.PreferredNodeAffinity(2, st.LabelTerm("foo", v1.NodeSelectorOpIn, "bar")).
			PreferredNodeAffinity(4, st.LabelTerm("key", v1.NodeSelectorOpIn, "value")).
			PreferredNodeAffinity(5, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: "foo", Operator: v1.NodeSelectorOpIn, Values: []string{"bar"}},
				{Key: "key", Operator: v1.NodeSelectorOpIn, Values: []string{"value"}},
				{Key: "az", Operator: v1.NodeSelectorOpIn, Values: []string{"az1"}},
			}})
	}
	nodes := []*v1.Node{
		st.MakeNode().Name("n1").Label("foo", "bar").Obj(),
		st.MakeNode().Name("n2").Label("foo", "bar").Label("key", "value").Label("az", "az1").Obj(),
		st.MakeNode().Name("n3").Label("key", "value").Obj(),
		st.MakeNode().Name("n4").Obj(),
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		args *configv1.NodeAffinityArgs
		want map[string]int64
	}{
		{
			name: "no preferences",
			pod:  st.MakePod().Name("p").Obj(),
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name: "weights of matching terms summed and normalized",
			pod:  preferred(st.MakePod().Name("p")).Obj(),
			// Raw sums 2, 11, 4, 0 scaled to the highest: 200/11, 100, 400/11, 0.
			want: map[string]int64{"n1": 18, "n2": 100, "n3": 36, "n4": 0},
		},
		{
			name: "zero-weight terms are ignored",
			pod:  st.MakePod().Name("p").PreferredNodeAffinity(0, st.LabelTerm("foo", v1.NodeSelectorOpIn, "bar")).PreferredNodeAffinity(1, st.LabelTerm("key", v1.NodeSelectorOpExists)).Obj(),
			want: map[string]int64{"n1": 0, "n2": 100, "n3": 100, "n4": 0},
		},
		{
			name: "added preferred affinity",
			pod:  st.MakePod().Name("p").Obj(),
			args: &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
				{Weight: 3, Preference: st.LabelTerm("az", v1.NodeSelectorOpIn, "az1")},
			}}},
			want: map[string]int64{"n1": 0, "n2": 100, "n3": 0, "n4": 0},
		},
		{
			name: "added preferred affinity adds to the pod's",
			pod:  preferred(st.MakePod().Name("p")).Obj(),
			args: &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
				{Weight: 11, Preference: st.LabelTerm("key", v1.NodeSelectorOpDoesNotExist)},
			}}},
			// Raw sums 2+11, 11, 4, 11.
			want: map[string]int64{"n1": 100, "n2": 84, "n3": 30, "n4": 84},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot, tt.args), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeAffinityArgs(t *testing.T) {
	invalid := &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{st.LabelTerm("zone", "Near", "a")},
	}}}
	profile := st.WithPluginArgs(st.PluginProfile(st.Plugin(nodeaffinity.Name, 0)), nodeaffinity.Name, invalid)
	_, err := st.BuildFramework(plugins.NewInTreeRegistry(), profile, nil)
	want := `PluginConfig plugin "NodeAffinity": invalid args: addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestNodeAffinityEvents(t *testing.T) {
	fwk := newFramework(t, nil, &configv1.NodeAffinityArgs{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{st.LabelTerm("pool", v1.NodeSelectorOpIn, "batch")},
	}}})
	pod := st.MakePod().Name("p").NodeSelector(map[string]string{"zone": "a"}).Obj()
	matching := st.MakeNode().Name("n").Label("pool", "batch").Label("zone", "a").Obj()
	other := st.MakeNode().Name("n").Label("pool", "batch").Label("zone", "b").Obj()
	outside := st.MakeNode().Name("n").Label("zone", "a").Obj()
	labels := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"matching node added", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, matching, framework.Queue},
		{"node outside addedAffinity added", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, outside, framework.QueueSkip},
		{"labels now match", labels, other, matching, framework.Queue},
		{"labels matched already", labels, matching, matching, framework.QueueSkip},
		{"labels stop matching", labels, matching, other, framework.QueueSkip},
		{"taints changed", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}, other, matching, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, nodeaffinity.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkNodeAffinity(b *testing.B) {
	zones := []string{"a", "b", "c"}
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).
			Label("topology.kubernetes.io/zone", zones[i%3]).
			Label("node.kubernetes.io/instance-type", fmt.Sprintf("m%d", i%7)).
			Label("kubernetes.io/hostname", fmt.Sprintf("node-%d", i)).Obj()
	})
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(b, snapshot, nil, runtime.WithParallelism(1))
	b.Run("Filter/nodeSelector", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").NodeSelector(map[string]string{"topology.kubernetes.io/zone": "a"}).Obj())
	})
	b.Run("Filter/requiredAffinity", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").NodeAffinityIn("topology.kubernetes.io/zone", "a", "b").Obj())
	})
	b.Run("Score", func(b *testing.B) {
		st.BenchmarkScore(b, fwk, snapshot, st.MakePod().Name("p").
			PreferredNodeAffinity(10, st.LabelTerm("topology.kubernetes.io/zone", v1.NodeSelectorOpIn, "a")).
			PreferredNodeAffinity(5, st.LabelTerm("node.kubernetes.io/instance-type", v1.NodeSelectorOpIn, "m1", "m2")).Obj())
	})
}
