package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// snapshotView is what a test checks about a snapshot during a pod-group cycle.
type snapshotView struct {
	MilliCPU     map[string]int64
	WithAffinity []string
	PVCUsed      bool
	Group        groupState
	Generation   int64
}

func viewOf(s *Snapshot) snapshotView {
	v := snapshotView{MilliCPU: map[string]int64{}, PVCUsed: s.IsPVCUsedByPods("ns1/claim")}
	for name, ni := range s.nodeInfoMap {
		v.MilliCPU[name] = ni.Requested.MilliCPU
		v.Generation += ni.Generation
	}
	withAffinity, _ := s.HavePodsWithAffinityList()
	v.WithAffinity = names(withAffinity)
	v.Group = groups(s.PodGroupStates(), s.PodGroups(), "g")["g"]
	return v
}

// TestSnapshotAssumePod checks that pods assumed in a snapshot count there,
// in the node, the affinity list, the PVCs and their pod group, and not in
// the cache, and that forgetting them, last first, restores the snapshot.
func TestSnapshotAssumePod(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New(WithPodGroups(true))
	c.AddNode(logger, node("n1"))
	c.AddNode(logger, node("n2"))
	c.AddPodGroup(podGroup("g", 2))
	a := member("a", "g", "")
	a.Spec.Containers = cpuPod("a", "", "1").Spec.Containers
	b := st.MakePod().Namespace("ns1").Name("b").UID("b").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).
		PodAffinity(st.PodAffinityTerm("app", "x", "zone")).PVC("claim").Obj()
	b.Spec.SchedulingGroup = a.Spec.SchedulingGroup
	c.AddPodGroupMember(a)
	c.AddPodGroupMember(b)
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	before := viewOf(s)

	assume := func(p *v1.Pod, nodeName string) *v1.Pod {
		p = p.DeepCopy()
		p.Spec.NodeName = nodeName
		pi, _ := framework.NewPodInfo(p)
		if err := s.AssumePod(pi); err != nil {
			t.Fatal(err)
		}
		return p
	}
	assumedA, assumedB := assume(a, "n1"), assume(b, "n1")
	want := before
	want.MilliCPU = map[string]int64{"n1": 3000, "n2": 0}
	want.WithAffinity = []string{"n1"}
	want.PVCUsed = true
	want.Group = groupState{Assumed: []string{"a", "b"}, MinCount: 2, All: 2, Count: 2}
	if diff := cmp.Diff(want, viewOf(s)); diff != "" {
		t.Errorf("snapshot with the pods assumed (-want +got):\n%s", diff)
	}
	if got := dump(c).Nodes["n1"].MilliCPU; got != 0 {
		t.Errorf("the cache's node requests %d milliCPU, want 0", got)
	}

	for _, p := range []*v1.Pod{assumedB, assumedA} {
		if err := s.ForgetPod(logger, p); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(before, viewOf(s)); diff != "" {
		t.Errorf("snapshot after forgetting (-want +got):\n%s", diff)
	}
	if err := s.ForgetPod(logger, assumedA); err == nil {
		t.Error("forgetting a pod no longer assumed succeeded")
	}

	// A cycle that left a pod assumed is reverted by the next update.
	assume(a, "n2")
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, viewOf(s)); diff != "" {
		t.Errorf("snapshot updated over a leftover assumption (-want +got):\n%s", diff)
	}
}

// TestSnapshotAssumePlacement checks that an assumed placement limits the
// nodes a pod-group cycle lists and gets, and only to the snapshot's own.
func TestSnapshotAssumePlacement(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.AddNode(logger, node(n))
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.Get("n1")
	n2, _ := s.Get("n2")
	p := &framework.Placement{Name: "p", Nodes: []*framework.NodeInfo{n1, n2}}
	if err := s.AssumePlacement(p); err != nil {
		t.Fatal(err)
	}
	listed, _ := s.ListNodesInPlacement()
	if diff := cmp.Diff([]string{"n1", "n2"}, names(listed)); diff != "" {
		t.Errorf("nodes in placement (-want +got):\n%s", diff)
	}
	if s.NumNodesInPlacement() != 2 || s.GetPlacement() != p {
		t.Errorf("placement has %d nodes, is %v; want 2, %v", s.NumNodesInPlacement(), s.GetPlacement(), p)
	}
	if _, err := s.GetNodeInPlacement("n3"); err == nil {
		t.Error("a node outside the placement was found in it")
	}
	if _, err := s.GetNodeInPlacement("n2"); err != nil {
		t.Errorf("a node of the placement was not found: %v", err)
	}

	foreign := &framework.Placement{Nodes: []*framework.NodeInfo{n1.Snapshot()}}
	if err := s.AssumePlacement(foreign); err == nil {
		t.Error("a placement of another snapshot's NodeInfo was assumed")
	}
	if s.GetPlacement() != nil || s.NumNodesInPlacement() != 3 {
		t.Error("a refused placement left a limit behind")
	}
	if err := s.AssumePlacement(p); err != nil {
		t.Fatal(err)
	}
	s.ForgetPlacement()
	if listed, _ := s.ListNodesInPlacement(); len(listed) != 3 {
		t.Errorf("after ForgetPlacement %d nodes are listed, want 3", len(listed))
	}
}
