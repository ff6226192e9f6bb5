package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// TestSnapshotMutations checks that a mutation session removes and adds
// pods in every aggregate of the snapshot, not only in the NodeInfos: the
// affinity lists, the claims in use and the pod groups; that a pod-group
// cycle can assume pods within it; and that ending it, or the next update
// should the session be left open, restores the snapshot exactly.
func TestSnapshotMutations(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New(WithPodGroups(true))
	c.AddNode(logger, node("n1"))
	c.AddNode(logger, node("n2"))
	c.AddPodGroup(podGroup("g", 2))
	victim := st.MakePod().Namespace("ns1").Name("v").UID("v").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).
		PodAffinity(st.PodAffinityTerm("app", "x", "zone")).PVC("claim").Obj()
	victim.Spec.SchedulingGroup = member("v", "g", "n1").Spec.SchedulingGroup
	other := member("o", "g", "n2")
	for _, p := range []*v1.Pod{victim, other} {
		if err := c.AddPod(logger, p); err != nil {
			t.Fatal(err)
		}
		c.AddPodGroupMember(p)
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	before := viewOf(s)
	listBefore, _ := s.HavePodsWithAffinityList()

	if err := s.AddPod(podInfo(t, victim), "n2"); err == nil {
		t.Error("AddPod outside a session succeeded")
	}
	if err := s.StartMutations(); err != nil {
		t.Fatal(err)
	}
	if err := s.StartMutations(); err == nil {
		t.Error("a second session started within the first")
	}
	if err := s.RemovePod(logger, victim, "n1"); err != nil {
		t.Fatal(err)
	}
	want := before
	want.MilliCPU = map[string]int64{"n1": 0, "n2": 0}
	want.WithAffinity = []string{}
	want.PVCUsed = false
	want.Group = groupState{Assigned: []string{"o"}, MinCount: 2, All: 1, Count: 1}
	got := viewOf(s)
	got.Generation = want.Generation
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot without the victim (-want +got):\n%s", diff)
	}

	// A pod-group cycle assumes its pods within the session and forgets
	// them before the session ends.
	assumed := st.MakePod().Namespace("ns1").Name("a").UID("a").Node("n1").PodAffinity(st.PodAffinityTerm("app", "x", "zone")).Obj()
	if err := s.AssumePod(podInfo(t, assumed)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.HavePodsWithAffinityList(); !cmp.Equal(names(got), []string{"n1"}) {
		t.Errorf("affinity list with a pod assumed = %v, want [n1]", names(got))
	}
	if err := s.ForgetPod(logger, assumed); err != nil {
		t.Fatal(err)
	}

	moved := victim.DeepCopy()
	moved.Spec.NodeName = "n2"
	if err := s.AddPod(podInfo(t, moved), "n2"); err != nil {
		t.Fatal(err)
	}
	want.MilliCPU = map[string]int64{"n1": 0, "n2": 2000}
	want.WithAffinity = []string{"n2"}
	want.PVCUsed = true
	want.Group = groupState{Assigned: []string{"o", "v"}, MinCount: 2, All: 2, Count: 2}
	got = viewOf(s)
	got.Generation = want.Generation
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot with the victim moved (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n1"}, names(listBefore)); diff != "" {
		t.Errorf("a list handed out before the session changed (-want +got):\n%s", diff)
	}

	if err := s.EndMutations(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, viewOf(s)); diff != "" {
		t.Errorf("snapshot after the session (-want +got):\n%s", diff)
	}
	if err := s.EndMutations(); err == nil {
		t.Error("EndMutations without a session succeeded")
	}

	// A session left open is ended by the next update.
	if err := s.StartMutations(); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePod(logger, victim, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, viewOf(s)); diff != "" {
		t.Errorf("snapshot updated over a session left open (-want +got):\n%s", diff)
	}
	if err := s.StartMutations(); err != nil {
		t.Errorf("StartMutations after the update: %v", err)
	}
}

func podInfo(t *testing.T, p *v1.Pod) *framework.PodInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	return pi
}
