package cache

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// member returns a pod of pod group group in ns1, bound to node unless it is "".
func member(name, group, node string) *v1.Pod {
	p := st.MakePod().Namespace("ns1").Name(name).UID(name).Node(node).Obj()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
	return p
}

func podGroup(name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

// groupState is what a test checks about one pod group.
type groupState struct {
	Unscheduled, Assumed, Assigned []string
	// MinCount is the gang's minCount, -1 when the PodGroup is not cached.
	MinCount int32
	All      int
	Count    int
}

// groups summarizes the groups of names as states and PodGroups show them.
func groups(states framework.PodGroupStateLister, objects framework.PodGroupLister, names ...string) map[string]groupState {
	out := map[string]groupState{}
	for _, name := range names {
		pgs, err := states.Get("ns1", name)
		if err != nil {
			continue
		}
		g := groupState{MinCount: -1, All: pgs.AllPodsCount(), Count: pgs.ScheduledPodsCount()}
		for n := range pgs.UnscheduledPods() {
			g.Unscheduled = append(g.Unscheduled, n)
		}
		slices.Sort(g.Unscheduled)
		g.Assumed = uids(pgs.AssumedPods())
		g.Assigned = uids(pgs.AssignedPods())
		if len(pgs.ScheduledPods()) != g.Count {
			g.Count = -1
		}
		if pg, err := objects.Get("ns1", name); err == nil {
			g.MinCount = pg.Spec.SchedulingPolicy.Gang.MinCount
		}
		out[name] = g
	}
	return out
}

func uids[T ~string](s sets.Set[T]) []string {
	var out []string
	for u := range s {
		out = append(out, string(u))
	}
	slices.Sort(out)
	return out
}

func addMember(p *v1.Pod) op {
	return func(_ klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { c.AddPodGroupMember(p); return nil }
}

func updateMember(oldPod, newPod *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		c.UpdatePodGroupMember(logger, oldPod, newPod)
		return nil
	}
}

func removeMember(p *v1.Pod) op {
	return func(_ klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { c.RemovePodGroupMember(p); return nil }
}

func removeAssumed(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		return c.RemoveAssumedPod(logger, p)
	}
}

func addGroup(pg *schedulingv1beta1.PodGroup) op {
	return func(_ klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { c.AddPodGroup(pg); return nil }
}

func updateGroup(oldPG, newPG *schedulingv1beta1.PodGroup) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		c.UpdatePodGroup(logger, oldPG, newPG)
		return nil
	}
}

func removeGroup(pg *schedulingv1beta1.PodGroup) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		c.RemovePodGroup(logger, pg)
		return nil
	}
}

func TestPodGroupMembers(t *testing.T) {
	p1, p2 := member("p1", "pg1", ""), member("p2", "pg1", "")
	p1OnN1, p2OnN1, p3OnN1 := member("p1", "pg1", "n1"), member("p2", "pg1", "n1"), member("p3", "pg1", "n1")
	p1Relabelled := p1.DeepCopy()
	p1Relabelled.Labels = map[string]string{"a": "b"}
	loner := st.MakePod().Namespace("ns1").Name("loner").UID("loner").Node("n1").Obj()
	tests := []struct {
		name string
		// untracked builds the cache without WithPodGroups.
		untracked bool
		ops       []op
		want      map[string]groupState
	}{
		{
			name: "unscheduled members, then the PodGroup",
			ops:  []op{addMember(p1), addMember(p2), addGroup(podGroup("pg1", 2))},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p1", "p2"}, MinCount: 2, All: 2}},
		},
		{
			name: "assume, bind and confirm",
			ops:  []op{addMember(p1), addMember(p2), assume(p1OnN1), assume(p2OnN1), add(p1OnN1)},
			want: map[string]groupState{"pg1": {Assumed: []string{"p2"}, Assigned: []string{"p1"}, MinCount: -1, All: 2, Count: 2}},
		},
		{
			name: "a forgotten pod is unscheduled again",
			ops:  []op{addMember(p1), addMember(p2), assume(p1OnN1), assume(p2OnN1), forget(p2OnN1)},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p2"}, Assumed: []string{"p1"}, MinCount: -1, All: 2, Count: 1}},
		},
		{
			name: "an assumed pod deleted while bound leaves the group",
			ops:  []op{addMember(p1), addMember(p2), assume(p1OnN1), assume(p2OnN1), removeAssumed(p2OnN1)},
			want: map[string]groupState{"pg1": {Assumed: []string{"p1"}, MinCount: -1, All: 1, Count: 1}},
		},
		{
			name: "an expired assumed pod leaves the group",
			ops:  []op{addMember(p1), assume(p1OnN1), finish(p1OnN1), addMember(p2), wait(2 * DefaultAssumedPodTTL)},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p2"}, MinCount: -1, All: 1}},
		},
		{
			name: "a pod bound by someone else is assigned",
			ops:  []op{addMember(p1), addMember(p2), add(p3OnN1)},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p1", "p2"}, Assigned: []string{"p3"}, MinCount: -1, All: 3, Count: 1}},
		},
		{
			// As upstream: the pod recorded is the assumed one, which names
			// its node, so it counts as assigned.
			name: "assuming a pod of a group the cache never saw records it",
			ops:  []op{assume(p1OnN1)},
			want: map[string]groupState{"pg1": {Assigned: []string{"p1"}, MinCount: -1, All: 1, Count: 1}},
		},
		{
			name: "assuming a pod deleted meanwhile leaves it out of a known group",
			ops:  []op{addMember(p1), addMember(p2), removeMember(p2), assume(p2OnN1)},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p1"}, MinCount: -1, All: 1}},
		},
		{
			name: "updating an unscheduled member keeps it unscheduled",
			ops:  []op{addMember(p1), updateMember(p1, p1Relabelled)},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p1"}, MinCount: -1, All: 1}},
		},
		{
			name: "a deleted unscheduled member leaves the group; the last one takes the state with it",
			ops:  []op{addMember(p1), addMember(p2), removeMember(p1), removeMember(p2)},
			want: map[string]groupState{},
		},
		{
			name: "the state outlives its pods while the PodGroup exists",
			ops:  []op{addGroup(podGroup("pg1", 3)), addMember(p1), removeMember(p1)},
			want: map[string]groupState{"pg1": {MinCount: 3}},
		},
		{
			name: "the state outlives its PodGroup while a pod names it",
			ops:  []op{addGroup(podGroup("pg1", 3)), addMember(p1), removeGroup(podGroup("pg1", 3))},
			want: map[string]groupState{"pg1": {Unscheduled: []string{"p1"}, MinCount: -1, All: 1}},
		},
		{
			name: "a PodGroup and nothing else goes with its deletion",
			ops:  []op{addGroup(podGroup("pg1", 3)), updateGroup(podGroup("pg1", 3), podGroup("pg1", 4)), removeGroup(podGroup("pg1", 4))},
			want: map[string]groupState{},
		},
		{
			name: "updating a PodGroup",
			ops:  []op{addGroup(podGroup("pg1", 3)), updateGroup(podGroup("pg1", 3), podGroup("pg1", 4))},
			want: map[string]groupState{"pg1": {MinCount: 4}},
		},
		{
			name: "bound pods removed leave the group",
			ops:  []op{add(p1OnN1), add(p2OnN1), remove(p1OnN1)},
			want: map[string]groupState{"pg1": {Assigned: []string{"p2"}, MinCount: -1, All: 1, Count: 1}},
		},
		{
			name: "pods without a group are not tracked",
			ops:  []op{add(loner)},
			want: map[string]groupState{},
		},
		{
			name:      "without WithPodGroups nothing is tracked",
			untracked: true,
			ops:       []op{addMember(p1), assume(p2OnN1), addGroup(podGroup("pg1", 2))},
			want:      map[string]groupState{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			c := New(WithClock(clk), WithPodGroups(!tt.untracked))
			c.AddNode(logger, node("n1"))
			for i, o := range tt.ops {
				if err := o(logger, c, clk); err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
			}
			if diff := cmp.Diff(tt.want, groups(c.PodGroupStates(), c.PodGroups(), "pg1")); diff != "" {
				t.Errorf("live pod groups (-want +got):\n%s", diff)
			}
			s := NewEmptySnapshot()
			if err := c.UpdateSnapshot(logger, s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, groups(s.PodGroupStates(), s.PodGroups(), "pg1")); diff != "" {
				t.Errorf("snapshot's pod groups (-want +got):\n%s", diff)
			}
			if got, want := c.PodGroupCount(), len(tt.want); got != want {
				t.Errorf("PodGroupCount = %d, want %d", got, want)
			}
		})
	}
}

func TestUpdateSnapshotCopiesOnlyChangedPodGroups(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New(WithPodGroups(true))
	c.AddNode(logger, node("n1"))
	for _, g := range []string{"pg1", "pg2", "pg3"} {
		c.AddPodGroup(podGroup(g, 2))
		c.AddPodGroupMember(member(g+"-a", g, ""))
	}
	s1, s2 := NewEmptySnapshot(), NewEmptySnapshot()
	update := func(s *Snapshot) {
		t.Helper()
		if err := c.UpdateSnapshot(logger, s); err != nil {
			t.Fatal(err)
		}
	}
	update(s1)
	update(s2)
	before := groupsOf(s1)

	// pg1 changes, pg3 goes, pg4 comes; s1 follows, s2 is not updated yet.
	c.AddPodGroupMember(member("pg1-b", "pg1", ""))
	c.RemovePodGroupMember(member("pg3-a", "pg3", ""))
	c.RemovePodGroup(logger, podGroup("pg3", 2))
	c.AddPodGroupMember(member("pg4-a", "pg4", ""))
	update(s1)
	after := groupsOf(s1)
	if diff := cmp.Diff([]string{"pg1", "pg2", "pg4"}, sets.List(sets.KeySet(after))); diff != "" {
		t.Errorf("groups in the snapshot (-want +got):\n%s", diff)
	}
	if after["pg2"] != before["pg2"] {
		t.Error("the unchanged pg2 was copied again")
	}
	if after["pg1"] == before["pg1"] {
		t.Error("the changed pg1 was not copied again")
	}
	if got := before["pg1"].AllPodsCount(); got != 1 {
		t.Errorf("an earlier copy of pg1 changed under its holder: %d pods, want 1", got)
	}
	want := map[string]groupState{
		"pg1": {Unscheduled: []string{"pg1-a", "pg1-b"}, MinCount: 2, All: 2},
		"pg2": {Unscheduled: []string{"pg2-a"}, MinCount: 2, All: 1},
		"pg4": {Unscheduled: []string{"pg4-a"}, MinCount: -1, All: 1},
	}
	update(s2)
	for name, s := range map[string]*Snapshot{"s1": s1, "s2": s2} {
		if diff := cmp.Diff(want, groups(s.PodGroupStates(), s.PodGroups(), "pg1", "pg2", "pg3", "pg4")); diff != "" {
			t.Errorf("%s's pod groups (-want +got):\n%s", name, diff)
		}
	}

	// A snapshot never changes under its cycle.
	c.AddPodGroupMember(member("pg2-b", "pg2", ""))
	if got := groups(s1.PodGroupStates(), s1.PodGroups(), "pg2")["pg2"].All; got != 1 {
		t.Errorf("pg2 in a snapshot not updated since has %d pods, want 1", got)
	}
	// Nothing changed since: an update copies nothing.
	update(s1)
	again := groupsOf(s1)
	update(s1)
	for name, pgs := range groupsOf(s1) {
		if pgs != again[name] {
			t.Errorf("%s was copied again though it did not change", name)
		}
	}
}

// groupsOf returns the snapshot's pod group states by name.
func groupsOf(s *Snapshot) map[string]*podGroupStateSnapshot {
	out := map[string]*podGroupStateSnapshot{}
	for key, pgs := range s.podGroupStates {
		out[key.Name] = pgs
	}
	return out
}
