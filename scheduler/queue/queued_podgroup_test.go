package queue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// framework.QueuedPodGroupInfo's methods, tested here where they are used,
// as upstream's framework/types_test.go tests them.

func TestPodGroupMemberPodsOrderingFunc(t *testing.T) {
	now := time.Now()
	info := func(name string, priority int32, attempts int, ts time.Time) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{
			PodInfo:   &framework.PodInfo{Pod: member(name, wl, pg).Priority(priority).Obj()},
			Attempts:  attempts,
			Timestamp: ts,
		}
	}
	pod1 := info("pod1", 10, 1, now)
	pod2 := info("pod2", 10, 1, now.Add(time.Second))
	pod3 := info("pod3", 100, 1, now)
	pod4 := info("pod4", 10, 1, now)
	pod5 := info("pod5", 10, 2, now)
	tests := []struct {
		name string
		a, b *framework.QueuedPodInfo
		want int
	}{
		{"higher priority comes first", pod3, pod1, -1},
		{"lower priority comes second", pod1, pod3, 1},
		{"higher attempts comes first", pod5, pod1, -1},
		{"lower attempts comes second", pod1, pod5, 1},
		{"older timestamp comes first", pod1, pod2, -1},
		{"newer timestamp comes second", pod2, pod1, 1},
		{"same priority, same attempts, same timestamp, lower name comes first", pod1, pod4, -1},
		{"same priority, same attempts, same timestamp, higher name comes second", pod4, pod1, 1},
		{"same pod", pod1, pod1, 0},
	}
	for _, tt := range tests {
		if got := framework.PodGroupMemberPodsOrderingFunc(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestQueuedPodGroupInfoMembers(t *testing.T) {
	g := newWorkloadForestWith(podGroup(pg, 0)).buildQueuedPodGroupInfo(framework.PodGroupKey(ns, pg))
	add := func(p *v1.Pod) { g.AddPod(&framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: p}}) }
	add(member("b", wl, pg).Obj())
	add(member("a", wl, pg).Obj())
	add(member("other-group", wl, "other").Obj())
	add(member("other-ns", wl, pg).Namespace("ns2").Obj())
	add(pod("no-group", wl).Namespace(ns).Obj())
	unscheduled := func() []string {
		var names []string
		for _, p := range g.UnscheduledPods {
			names = append(names, p.Name)
		}
		return names
	}
	if diff := cmp.Diff([]string{"a", "b"}, podNames(g)); diff != "" {
		t.Fatalf("members (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, unscheduled()); diff != "" {
		t.Fatalf("UnscheduledPods (-want +got):\n%s", diff)
	}

	updated := member("b", wl, pg).Label("x", "y").Obj()
	if pInfo, err := g.Update(updated); err != nil || pInfo.Pod != updated || g.UnscheduledPods[1] != updated {
		t.Errorf("Update(b) = %v, %v; the pod was not replaced", pInfo, err)
	}
	if _, err := g.Update(member("c", wl, pg).Obj()); err == nil {
		t.Error("Update of a pod not in the group succeeded")
	}
	if g.RemovePod(member("c", wl, pg).Obj()) != nil {
		t.Error("RemovePod of a pod not in the group removed something")
	}
	if removed := g.RemovePod(member("a", wl, pg).Obj()); removed == nil || removed.Pod.Name != "a" {
		t.Errorf("RemovePod(a) = %v", removed)
	}
	if diff := cmp.Diff([]string{"b"}, unscheduled()); diff != "" {
		t.Errorf("UnscheduledPods after RemovePod (-want +got):\n%s", diff)
	}
	if got := len(g.RemovePodGroup(podGroup(pg, 0))); got != 1 || g.HasQueuedPodInfos() || g.Size() != 0 {
		t.Errorf("RemovePodGroup removed %d pods, left %d", got, g.Size())
	}
}

func newWorkloadForestWith(pg *schedulingv1beta1.PodGroup) *workloadForest {
	wf := newWorkloadForest()
	wf.addPodGroup(pg)
	return wf
}
