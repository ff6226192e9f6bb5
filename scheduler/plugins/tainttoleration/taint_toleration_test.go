package tainttoleration_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/tainttoleration"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func newFramework(tb testing.TB, snapshot *st.Snapshot, opts ...runtime.Option) framework.Framework {
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(tainttoleration.Name, 1)), snapshot, opts...)
}

func TestTaintTolerationFilter(t *testing.T) {
	untolerated := framework.NewStatus(framework.UnschedulableAndUnresolvable, tainttoleration.ErrReasonUntolerated).WithPlugin(tainttoleration.Name)
	tests := []struct {
		name string
		pod  *v1.Pod
		node *v1.Node
		want *framework.Status
	}{
		{
			name: "no taints",
			pod:  st.MakePod().Name("p").Obj(),
			node: st.MakeNode().Name("n").Obj(),
		},
		{
			name: "untolerated NoSchedule taint",
			pod:  st.MakePod().Name("p").Obj(),
			node: st.MakeNode().Name("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(),
			want: untolerated,
		},
		{
			name: "untolerated NoExecute taint",
			pod:  st.MakePod().Name("p").Obj(),
			node: st.MakeNode().Name("n").Taint("dedicated", "user1", v1.TaintEffectNoExecute).Obj(),
			want: untolerated,
		},
		{
			name: "PreferNoSchedule taints do not filter",
			pod:  st.MakePod().Name("p").Obj(),
			node: st.MakeNode().Name("n").Taint("dedicated", "user1", v1.TaintEffectPreferNoSchedule).Obj(),
		},
		{
			name: "toleration with equal value",
			pod:  st.MakePod().Name("p").Toleration("dedicated", v1.TolerationOpEqual, "user1", v1.TaintEffectNoSchedule).Obj(),
			node: st.MakeNode().Name("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(),
		},
		{
			name: "toleration with another value",
			pod:  st.MakePod().Name("p").Toleration("dedicated", v1.TolerationOpEqual, "user2", v1.TaintEffectNoSchedule).Obj(),
			node: st.MakeNode().Name("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(),
			want: untolerated,
		},
		{
			name: "Exists ignores the value",
			pod:  st.MakePod().Name("p").Toleration("foo", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
			node: st.MakeNode().Name("n").Taint("foo", "bar", v1.TaintEffectNoSchedule).Obj(),
		},
		{
			name: "toleration for another effect",
			pod:  st.MakePod().Name("p").Toleration("foo", v1.TolerationOpEqual, "bar", v1.TaintEffectPreferNoSchedule).Obj(),
			node: st.MakeNode().Name("n").Taint("foo", "bar", v1.TaintEffectNoSchedule).Obj(),
			want: untolerated,
		},
		{
			name: "empty effect tolerates every effect",
			pod:  st.MakePod().Name("p").Toleration("foo", v1.TolerationOpEqual, "bar", "").Obj(),
			node: st.MakeNode().Name("n").Taint("foo", "bar", v1.TaintEffectNoSchedule).Taint("foo", "bar", v1.TaintEffectNoExecute).Obj(),
		},
		{
			name: "one of several taints untolerated",
			pod:  st.MakePod().Name("p").Toleration("a", v1.TolerationOpExists, "", "").Obj(),
			node: st.MakeNode().Name("n").Taint("a", "1", v1.TaintEffectNoSchedule).Taint("b", "2", v1.TaintEffectNoSchedule).Obj(),
			want: untolerated,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, []*v1.Node{tt.node})
			got := st.RunCycle(t.Context(), newFramework(t, snapshot), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(map[string]*framework.Status{"n": tt.want}, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaintTolerationMessage(t *testing.T) {
	snapshot := st.NewSnapshot(nil, []*v1.Node{
		st.MakeNode().Name("n1").Taint("a", "1", v1.TaintEffectNoSchedule).Obj(),
		st.MakeNode().Name("n2").Taint("b", "2", v1.TaintEffectNoExecute).Obj(),
	})
	got := st.RunCycle(t.Context(), newFramework(t, snapshot), snapshot, st.MakePod().Name("p").Obj())
	if diff := cmp.Diff("0/2 nodes are available: 2 node(s) had untolerated taint(s).", got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestTaintTolerationScore(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		nodes []*v1.Node
		want  map[string]int64
	}{
		{
			name:  "no taints anywhere scores every node 100",
			pod:   st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{st.MakeNode().Name("a").Obj(), st.MakeNode().Name("b").Obj()},
			want:  map[string]int64{"a": 100, "b": 100},
		},
		{
			name: "fewer untolerated PreferNoSchedule taints score higher",
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("none").Obj(),
				st.MakeNode().Name("one").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
				st.MakeNode().Name("two").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Taint("b", "2", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			want: map[string]int64{"none": 100, "one": 50, "two": 0},
		},
		{
			name: "tolerated taints do not count",
			pod:  st.MakePod().Name("p").Toleration("a", v1.TolerationOpEqual, "1", v1.TaintEffectPreferNoSchedule).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("tolerated").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
				st.MakeNode().Name("untolerated").Taint("b", "2", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			want: map[string]int64{"tolerated": 100, "untolerated": 0},
		},
		{
			name: "a NoSchedule toleration does not tolerate a PreferNoSchedule taint",
			pod:  st.MakePod().Name("p").Toleration("a", v1.TolerationOpEqual, "1", v1.TaintEffectNoSchedule).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("clean").Obj(),
				st.MakeNode().Name("tainted").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			want: map[string]int64{"clean": 100, "tainted": 0},
		},
		{
			name: "only PreferNoSchedule taints are scored",
			pod:  st.MakePod().Name("p").Toleration("", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("noschedule").Taint("a", "1", v1.TaintEffectNoSchedule).Obj(),
				st.MakeNode().Name("prefer").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			want: map[string]int64{"noschedule": 100, "prefer": 0},
		},
		{
			name: "normalization truncates like upstream",
			pod:  st.MakePod().Name("p").Obj(),
			nodes: []*v1.Node{
				st.MakeNode().Name("one").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
				st.MakeNode().Name("three").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Taint("b", "1", v1.TaintEffectPreferNoSchedule).Taint("c", "1", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			want: map[string]int64{"one": 67, "three": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, tt.nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaintTolerationEvents(t *testing.T) {
	fwk := newFramework(t, nil)
	pod := st.MakePod().Name("p").Toleration("a", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj()
	tainted := st.MakeNode().Name("n").Taint("b", "1", v1.TaintEffectNoSchedule).Obj()
	tolerated := st.MakeNode().Name("n").Taint("a", "1", v1.TaintEffectNoSchedule).Obj()
	nodeTaint := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"node added with tolerated taints", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, tolerated, framework.Queue},
		{"node added with untolerated taints", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, tainted, framework.QueueSkip},
		{"taints became tolerated", nodeTaint, tainted, tolerated, framework.Queue},
		{"taints became untolerated", nodeTaint, tolerated, tainted, framework.QueueSkip},
		{"labels changed", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}, tainted, tolerated, framework.QueueSkip},
		{"the pod gained a toleration", framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration}, pod, pod, framework.Queue},
		// Upstream 1.37 registers TargetPod only: other pending pods' updates are not its events.
		{"another pending pod gained a toleration", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodToleration}, st.MakePod().Name("q").Obj(), st.MakePod().Name("q").Obj(), framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, tainttoleration.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkTaintToleration(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		n := st.MakeNode().Name(fmt.Sprintf("node-%d", i))
		switch i % 4 {
		case 0:
			n.Taint("dedicated", "gpu", v1.TaintEffectNoSchedule)
		case 1:
			n.Taint("spot", "true", v1.TaintEffectPreferNoSchedule)
		case 2:
			n.Taint("dedicated", "infra", v1.TaintEffectNoSchedule).Taint("spot", "true", v1.TaintEffectPreferNoSchedule)
		}
		return n.Obj()
	})
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(b, snapshot, runtime.WithParallelism(1))
	pod := st.MakePod().Name("p").
		Toleration("dedicated", v1.TolerationOpEqual, "infra", v1.TaintEffectNoSchedule).
		Toleration(v1.TaintNodeNotReady, v1.TolerationOpExists, "", v1.TaintEffectNoExecute).Obj()
	b.Run("Filter", func(b *testing.B) { st.BenchmarkFilter(b, fwk, snapshot, pod) })
	b.Run("Score", func(b *testing.B) { st.BenchmarkScore(b, fwk, snapshot, pod) })
}
