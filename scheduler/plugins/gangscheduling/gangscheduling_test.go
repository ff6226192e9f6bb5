package gangscheduling

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// podActivator records the pods Permit activates, by name.
type podActivator struct{ activated []string }

func (a *podActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for name := range pods {
		a.activated = append(a.activated, name)
	}
	slices.Sort(a.activated)
}

// workloadGates lets a profile enable GangScheduling.
func workloadGates() runtime.Option {
	return runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true})
}

// newFramework builds a profile of GangScheduling over podGroups, which
// serve as both the cache's live view and the cycle's snapshot.
func newFramework(t *testing.T, podGroups *st.PodGroups, opts ...runtime.Option) framework.Framework {
	t.Helper()
	r := registry.New(map[string]runtime.Factory{Name: New})
	snapshot := st.NewSnapshot(nil, nil).WithPodGroups(podGroups)
	return st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot, append([]runtime.Option{workloadGates(), runtime.WithPodGroupManager(podGroups)}, opts...)...)
}

func TestNewNeedsPodGroupManager(t *testing.T) {
	r := registry.New(map[string]runtime.Factory{Name: New})
	fwk, err := st.BuildFramework(r, st.PluginProfile(st.Plugin(Name, 0)), st.NewSnapshot(nil, nil), workloadGates())
	if err == nil {
		_ = fwk.Close()
		t.Fatal("built without a PodGroupManager")
	}
	if !strings.Contains(err.Error(), "PodGroupManager is nil") {
		t.Errorf("error %q does not name the PodGroupManager", err)
	}
}

func TestEvents(t *testing.T) {
	fwk := newFramework(t, st.NewPodGroups(nil, nil))
	want := []framework.ClusterEvent{
		{Resource: framework.UnscheduledPod, ActionType: framework.Add},
		{Resource: framework.AssignedPod, ActionType: framework.Add},
		{Resource: framework.PodGroup, ActionType: framework.Add},
		{Resource: framework.PodGroup, ActionType: framework.Update},
	}
	if diff := cmp.Diff(want, st.RegisteredEvents(t, fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIsSchedulableAfterPodAdded(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		newPod *v1.Pod
		want   framework.QueueingHint
	}{
		{name: "add a newPod which matches the pod's scheduling group", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPod: st.MakePod().Name("q").PodGroupName("pg").Obj(), want: framework.Queue},
		{name: "add a newPod with NodeName set which matches the pod's scheduling group", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPod: st.MakePod().Name("q").PodGroupName("pg").Node("node1").Obj(), want: framework.Queue},
		{name: "add a newPod which doesn't match the pod's namespace", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPod: st.MakePod().Name("q").Namespace("foo").PodGroupName("pg").Obj(), want: framework.QueueSkip},
		{name: "add a newPod which doesn't match the pod's pod group name", pod: st.MakePod().Name("p").PodGroupName("pg1").Obj(),
			newPod: st.MakePod().Name("q").PodGroupName("pg2").Obj(), want: framework.QueueSkip},
		{name: "add a newPod without a scheduling group", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPod: st.MakePod().Name("q").Obj(), want: framework.QueueSkip},
		{name: "pod without a scheduling group is skipped", pod: st.MakePod().Name("p").Obj(),
			newPod: st.MakePod().Name("q").PodGroupName("pg").Obj(), want: framework.QueueSkip},
	}
	fwk := newFramework(t, st.NewPodGroups(nil, nil))
	for _, tt := range tests {
		for _, resource := range []framework.EventResource{framework.UnscheduledPod, framework.AssignedPod} {
			t.Run(tt.name+" ("+string(resource)+")", func(t *testing.T) {
				got, err := st.QueueingHint(t.Context(), fwk, Name, framework.ClusterEvent{Resource: resource, ActionType: framework.Add}, tt.pod, nil, tt.newPod)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("hint (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestIsSchedulableAfterPodGroupAdded(t *testing.T) {
	tests := []struct {
		name        string
		pod         *v1.Pod
		newPodGroup *schedulingv1beta1.PodGroup
		want        framework.QueueingHint
	}{
		{name: "add a pod group which matches the pod's pod group name", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPodGroup: st.MakePodGroup().Name("pg").Obj(), want: framework.Queue},
		{name: "add a pod group which doesn't match the pod's scheduling group name", pod: st.MakePod().Name("p").PodGroupName("pg1").Obj(),
			newPodGroup: st.MakePodGroup().Name("pg2").Obj(), want: framework.QueueSkip},
		{name: "add a pod group which doesn't match the pod's scheduling group namespace", pod: st.MakePod().Name("p").PodGroupName("pg").Obj(),
			newPodGroup: st.MakePodGroup().Namespace("foo").Name("pg").Obj(), want: framework.QueueSkip},
		{name: "pod without a scheduling group is skipped", pod: st.MakePod().Name("p").Obj(),
			newPodGroup: st.MakePodGroup().Name("pg").Obj(), want: framework.QueueSkip},
	}
	fwk := newFramework(t, st.NewPodGroups(nil, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, Name, framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Add}, tt.pod, nil, tt.newPodGroup)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsSchedulableAfterPodGroupUpdated(t *testing.T) {
	pg := func() *st.PodGroupWrapper { return st.MakePodGroup().Namespace("ns1").Name("pg") }
	tests := []struct {
		name                     string
		pod                      *v1.Pod
		oldPodGroup, newPodGroup *schedulingv1beta1.PodGroup
		want                     framework.QueueingHint
		wantErr                  bool
	}{
		{name: "minCount decreased matches target pod", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().MinCount(4).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), want: framework.Queue},
		{name: "update Basic policy", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().BasicPolicy().WorkloadRef("t", "w").Obj(), newPodGroup: pg().BasicPolicy().Obj(), want: framework.QueueSkip},
		{name: "gang policy set on a basic group", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().BasicPolicy().Obj(), newPodGroup: pg().MinCount(1).Obj(), want: framework.QueueSkip},
		{name: "minCount increased matches target pod", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(4).WorkloadRef("t", "w").Obj(), want: framework.QueueSkip},
		{name: "minCount unchanged matches target pod", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), want: framework.QueueSkip},
		{name: "minCount decreased but pod group name doesn't match target pod", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg-other").Obj(),
			oldPodGroup: pg().MinCount(4).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), want: framework.QueueSkip},
		{name: "minCount decreased but pod group namespace doesn't match target pod", pod: st.MakePod().Namespace("ns-other").Name("p").PodGroupName("pg").Obj(),
			oldPodGroup: pg().MinCount(4).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), want: framework.QueueSkip},
		{name: "pod without a scheduling group is skipped", pod: st.MakePod().Namespace("ns1").Name("p").Obj(),
			oldPodGroup: pg().MinCount(4).WorkloadRef("t", "w").Obj(), newPodGroup: pg().MinCount(3).WorkloadRef("t", "w").Obj(), want: framework.QueueSkip},
		{name: "an object that is not a PodGroup queues, with an error", pod: st.MakePod().Namespace("ns1").Name("p").PodGroupName("pg").Obj(),
			want: framework.Queue, wantErr: true},
	}
	fwk := newFramework(t, st.NewPodGroups(nil, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var oldObj, newObj any = tt.oldPodGroup, tt.newPodGroup
			if tt.wantErr {
				oldObj, newObj = st.MakePod().Obj(), st.MakePod().Obj()
			}
			got, err := st.QueueingHint(t.Context(), fwk, Name, framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.Update}, tt.pod, oldObj, newObj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGangSchedulingFlow runs members of pod groups through PreEnqueue
// and Permit: podsWaitingOnPermit are assumed and wait at Permit first,
// then pod is assumed and permitted.
func TestGangSchedulingFlow(t *testing.T) {
	gangPodGroup1 := st.MakePodGroup().Namespace("ns1").Name("pg1").WorkloadRef("t1", "gang-wl").MinCount(3).Obj()
	gangPodGroup2 := st.MakePodGroup().Namespace("ns1").Name("pg2").WorkloadRef("t2", "gang-wl").MinCount(4).Obj()
	basicPodGroup := st.MakePodGroup().Namespace("ns1").Name("pg3").WorkloadRef("1", "basic-wl").BasicPolicy().Obj()
	// A group naming a parent composite group is a leaf group here: its
	// parent is not looked at.
	childPodGroup := st.MakePodGroup().Namespace("ns1").Name("pg-basic-2").MinCount(2).Obj()
	childPodGroup.Spec.ParentCompositePodGroupName = new("cpg-basic-root")

	member := func(name, group string) *v1.Pod {
		return st.MakePod().Namespace("ns1").Name(name).UID(name).PodGroupName(group).Obj()
	}
	p1, p2, p3 := member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg1")
	p4, p5 := member("p4", "pg2"), member("p5", "pg2")
	basicPolicyPod := member("basic-pod", "pg3")
	nonGangPod := st.MakePod().Namespace("ns1").Name("non-gang").UID("non-gang").Obj()
	p2x1 := member("p2_1", "pg-basic-2")

	const waitingMessage = "waiting for minCount pods from a gang to be scheduled"
	tests := []struct {
		name                string
		pod                 *v1.Pod
		initialPods         []*v1.Pod
		initialPodGroups    []*schedulingv1beta1.PodGroup
		podsWaitingOnPermit []*v1.Pod
		wantPreEnqueue      *framework.Status
		// wantPermitWait is whether pod waits at Permit, with
		// waitingMessage; else it passes.
		wantPermitWait    bool
		wantActivatedPods []string
		// wantAllowedPods are the pods of podsWaitingOnPermit that pod's
		// Permit lets go; the others still wait.
		wantAllowedPods []types.UID
	}{
		{
			name:             "non-gang pod succeeds immediately",
			pod:              nonGangPod,
			initialPodGroups: []*schedulingv1beta1.PodGroup{gangPodGroup1, gangPodGroup2, basicPodGroup},
		},
		{
			name:             "basic policy pod succeeds immediately",
			pod:              basicPolicyPod,
			initialPodGroups: []*schedulingv1beta1.PodGroup{gangPodGroup1, gangPodGroup2, basicPodGroup},
		},
		{
			name:           "gang pod fails PreEnqueue when pod group is not yet created",
			pod:            p1,
			initialPods:    []*v1.Pod{p2, p3, p4, p5},
			wantPreEnqueue: framework.NewStatus(framework.UnschedulableAndUnresolvable, `waiting for pods's pod group "pg1" to appear in scheduling queue`),
		},
		{
			name:             "gang pod fails PreEnqueue when quorum is not met",
			pod:              p1,
			initialPods:      []*v1.Pod{p2, p4, p5},
			initialPodGroups: []*schedulingv1beta1.PodGroup{gangPodGroup1, gangPodGroup2},
			wantPreEnqueue:   framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for minCount pods from a gang to appear in scheduling queue"),
		},
		{
			name:                "gang pod passes PreEnqueue, but waits at Permit",
			pod:                 p1,
			initialPods:         []*v1.Pod{p2, p3, p4, p5},
			initialPodGroups:    []*schedulingv1beta1.PodGroup{gangPodGroup1, gangPodGroup2},
			podsWaitingOnPermit: []*v1.Pod{p2, p4, p5},
			wantPermitWait:      true,
			wantActivatedPods:   []string{"p3"},
		},
		{
			name:                "final gang pod arrives at Permit and allows all waiting pods from a gang",
			pod:                 p1,
			initialPods:         []*v1.Pod{p2, p3, p4, p5},
			initialPodGroups:    []*schedulingv1beta1.PodGroup{gangPodGroup1, gangPodGroup2},
			podsWaitingOnPermit: []*v1.Pod{p2, p3, p4, p5},
			wantAllowedPods:     []types.UID{"p2", "p3"},
		},
		{
			name:             "a group's parent composite group is not looked at",
			pod:              p2x1,
			initialPods:      []*v1.Pod{member("p1_1", "pg-basic-1"), member("p1_2", "pg-basic-1")},
			initialPodGroups: []*schedulingv1beta1.PodGroup{childPodGroup},
			wantPreEnqueue:   framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for minCount pods from a gang to appear in scheduling queue"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			podGroups := st.NewPodGroups(tt.initialPodGroups, append(slices.Clone(tt.initialPods), tt.pod))
			activator := &podActivator{}
			fwk := newFramework(t, podGroups, runtime.WithPodActivator(activator))

			preEnqueue := fwk.PreEnqueuePlugins()
			if len(preEnqueue) != 1 {
				t.Fatalf("PreEnqueue plugins: %d, want GangScheduling", len(preEnqueue))
			}
			got := preEnqueue[0].PreEnqueue(ctx, tt.pod)
			if diff := cmp.Diff(tt.wantPreEnqueue, got); diff != "" {
				t.Fatalf("PreEnqueue (-want +got):\n%s", diff)
			}
			if !got.IsSuccess() {
				return
			}

			// Other members were assumed and wait at Permit.
			for _, p := range tt.podsWaitingOnPermit {
				podGroups.Assume(p, "some-node")
				if s := fwk.RunPermitPlugins(ctx, framework.NewCycleState(), p, "some-node"); !s.IsWait() {
					t.Fatalf("Permit of %s: %v, want Wait", p.Name, s)
				}
			}
			activator.activated = nil

			podGroups.Assume(tt.pod, "some-node")
			s := fwk.RunPermitPlugins(ctx, framework.NewCycleState(), tt.pod, "some-node")
			if s.IsWait() != tt.wantPermitWait || !s.IsSuccess() && !s.IsWait() {
				t.Fatalf("Permit: %v, want wait: %v", s, tt.wantPermitWait)
			}
			if diff := cmp.Diff(tt.wantActivatedPods, activator.activated); diff != "" {
				t.Errorf("activated pods (-want +got):\n%s", diff)
			}
			if tt.wantPermitWait {
				wp := fwk.GetWaitingPod(tt.pod.UID)
				if diff := cmp.Diff(map[string]string{Name: waitingMessage}, wp.GetPendingPluginMessages()); diff != "" {
					t.Errorf("waiting for (-want +got):\n%s", diff)
				}
				if left := time.Until(wp.GetPendingPluginDeadlines()[Name]); left <= 4*time.Minute || left > 5*time.Minute {
					t.Errorf("the wait ends in %v, want 5m", left)
				}
			}
			for _, p := range tt.podsWaitingOnPermit {
				wp := fwk.GetWaitingPod(p.UID)
				if wp == nil {
					t.Fatalf("pod %s was resolved, want it waiting or allowed", p.Name)
				}
				var want []string
				if !slices.Contains(tt.wantAllowedPods, p.UID) {
					want = []string{Name}
				}
				pending := wp.GetPendingPlugins()
				if diff := cmp.Diff(want, pending, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("pod %s waits for (-want +got):\n%s", p.Name, diff)
				}
				if len(pending) == 0 {
					if s := fwk.WaitOnPermit(ctx, p); !s.IsSuccess() {
						t.Errorf("pod %s: WaitOnPermit %v, want it allowed", p.Name, s)
					}
				}
			}
		})
	}
}

func TestPlacementFeasible(t *testing.T) {
	U, S, W := framework.Unschedulable, framework.Success, framework.Wait
	tests := []struct {
		name string
		// minCount 0 means a basic policy.
		minCount              int32
		childrenCount         int
		initialScheduledCount int
		// podStatuses are the results of the pods tried, in order.
		podStatuses []framework.Code
		want        []framework.Code
	}{
		{name: "All pods succeed, minCount met at end", minCount: 2, childrenCount: 2, podStatuses: []framework.Code{S, S}, want: []framework.Code{W, S}},
		{name: "First pod fails, minCount not satisfiable", minCount: 3, childrenCount: 3, podStatuses: []framework.Code{U}, want: []framework.Code{U}},
		{name: "Second pod fails, minCount not satisfiable", minCount: 2, childrenCount: 2, podStatuses: []framework.Code{S, U}, want: []framework.Code{W, U}},
		{name: "Non-gang pod group with 0 scheduled pods fails", childrenCount: 1, podStatuses: []framework.Code{U}, want: []framework.Code{U}},
		{name: "Non-gang pod group with succeeds once 1 pod is scheduled", childrenCount: 1, podStatuses: []framework.Code{S}, want: []framework.Code{S}},
		{name: "Non-gang pod group with 1 initially scheduled pod succeeds", childrenCount: 1, initialScheduledCount: 1, podStatuses: []framework.Code{U}, want: []framework.Code{S}},
		{name: "More than minCount pods, all succeed", minCount: 2, childrenCount: 3, podStatuses: []framework.Code{S, S, S}, want: []framework.Code{W, S, S}},
		{name: "More than minCount pods, first fails", minCount: 2, childrenCount: 3, podStatuses: []framework.Code{U, S, S}, want: []framework.Code{W, W, S}},
		{name: "More than minCount pods, minCount not satisfiable", minCount: 2, childrenCount: 3, podStatuses: []framework.Code{U, U}, want: []framework.Code{W, U}},
		{name: "1 pod scheduled, 2 unscheduled pods succeed, minCount 3 met", minCount: 3, childrenCount: 2, initialScheduledCount: 1, podStatuses: []framework.Code{S, S}, want: []framework.Code{W, S}},
		{name: "minCount already met by scheduled pods", minCount: 2, childrenCount: 1, initialScheduledCount: 2, podStatuses: []framework.Code{U}, want: []framework.Code{S}},
		{name: "1 pod scheduled, minCount 3, first unscheduled fails, not enough remaining", minCount: 3, childrenCount: 2, initialScheduledCount: 1, podStatuses: []framework.Code{U}, want: []framework.Code{U}},
		{name: "1 pod scheduled, minCount 4, first unscheduled succeeds, not enough remaining", minCount: 4, childrenCount: 2, initialScheduledCount: 1, podStatuses: []framework.Code{S}, want: []framework.Code{U}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, podGroupInfo := newPlacementFeasible(t, tt.minCount)
			scheduled := tt.initialScheduledCount
			var got []framework.Code
			for i, code := range tt.podStatuses {
				if code == framework.Success {
					scheduled++
				}
				progress := framework.PlacementProgress{Remaining: tt.childrenCount - (i + 1), Scheduled: scheduled}
				got = append(got, pl.PlacementFeasible(t.Context(), framework.NewCycleState(), podGroupInfo, progress).Code())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlacementFeasibleMessages(t *testing.T) {
	tests := []struct {
		name     string
		minCount int32
		progress framework.PlacementProgress
		want     *framework.Status
	}{
		{name: "not enough pods remain", minCount: 3, progress: framework.PlacementProgress{Scheduled: 1, Remaining: 1},
			want: framework.NewStatus(framework.Unschedulable, "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")},
		{name: "more pods may reach minCount", minCount: 3, progress: framework.PlacementProgress{Scheduled: 1, Remaining: 2},
			want: framework.NewStatus(framework.Wait, "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining")},
		{name: "a basic group needs one pod", progress: framework.PlacementProgress{},
			want: framework.NewStatus(framework.Unschedulable, "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining")},
		{name: "minCount met", minCount: 3, progress: framework.PlacementProgress{Scheduled: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, podGroupInfo := newPlacementFeasible(t, tt.minCount)
			got := pl.PlacementFeasible(t.Context(), framework.NewCycleState(), podGroupInfo, tt.progress)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// newPlacementFeasible returns the plugin, built with a framework
// instance's Handle, and a group with a gang policy of minCount (0: a
// basic policy).
func newPlacementFeasible(t *testing.T, minCount int32) (framework.PlacementFeasiblePlugin, *framework.PodGroupInfo) {
	t.Helper()
	pg := st.MakePodGroup().Name("test-pg")
	if minCount > 0 {
		pg.MinCount(minCount)
	} else {
		pg.BasicPolicy()
	}
	podGroups := st.NewPodGroups([]*schedulingv1beta1.PodGroup{pg.Obj()}, nil)
	p, err := New(t.Context(), nil, newFramework(t, podGroups))
	if err != nil {
		t.Fatal(err)
	}
	obj := pg.Obj()
	return p.(framework.PlacementFeasiblePlugin), &framework.PodGroupInfo{
		Namespace: obj.Namespace, Name: obj.Name, Type: framework.PodGroupKeyType, PodGroup: obj,
	}
}

// TestPermitReadsThePodGroupFromTheSnapshot: Permit takes the PodGroup
// from the cycle's snapshot, as upstream, and fails when it is not there.
func TestPermitReadsThePodGroupFromTheSnapshot(t *testing.T) {
	pod := st.MakePod().Namespace("ns1").Name("p1").PodGroupName("pg1").Obj()
	live := st.NewPodGroups([]*schedulingv1beta1.PodGroup{st.MakePodGroup().Namespace("ns1").Name("pg1").MinCount(1).Obj()}, []*v1.Pod{pod})
	r := registry.New(map[string]runtime.Factory{Name: New})
	fwk := st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0)), st.NewSnapshot(nil, nil), workloadGates(), runtime.WithPodGroupManager(live))
	live.Assume(pod, "node1")
	got := fwk.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "node1")
	want := `running Permit plugin "GangScheduling": failed to get podGroup ns1/pg1: pod group object not found for pod group podgroup/ns1/pg1`
	if got.Code() != framework.Error || got.Message() != want {
		t.Errorf("Permit: %v, want Error %q", got, want)
	}
}

// holderName is a Permit plugin standing for any other that holds pods
// (ManualApproval, a quota) until the test allows or rejects them.
const holderName = "Holder"

type holder struct{ holds map[types.UID]bool }

func (*holder) Name() string { return holderName }

func (h *holder) Permit(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if h.holds[pod.UID] {
		return framework.NewStatus(framework.Wait, "held"), time.Hour
	}
	return nil, 0
}

// TestGangGoesTogetherWithOtherPermitPlugins: members another Permit
// plugin holds count toward minCount only once it let them go, and the
// gang goes in one step when the last one counts; until then none goes,
// whatever was let go of them one by one. Members it still holds do not
// keep the others back.
func TestGangGoesTogetherWithOtherPermitPlugins(t *testing.T) {
	member := func(name string) *v1.Pod {
		return st.MakePod().Namespace("ns1").Name(name).UID(name).PodGroupName("pg1").Obj()
	}
	p1, p2, p3 := member("p1"), member("p2"), member("p3")
	type step struct {
		allow, reject types.UID
		// wantWaiting are the members still waiting afterwards, with the
		// plugins holding each; wantAllowed those let go.
		wantWaiting map[types.UID][]string
		wantAllowed []types.UID
	}
	tests := []struct {
		name     string
		minCount int32
		held     []types.UID
		// wantAtPermit is what holds each member once all three passed
		// RunPermitPlugins, in order p1, p2, p3.
		wantAtPermit map[types.UID][]string
		steps        []step
	}{
		{
			name:     "every member held: the last one let go by the other plugin lets the gang go",
			minCount: 3,
			held:     []types.UID{"p1", "p2", "p3"},
			wantAtPermit: map[types.UID][]string{
				"p1": {Name, holderName}, "p2": {Name, holderName}, "p3": {Name, holderName},
			},
			steps: []step{
				{allow: "p1", wantWaiting: map[types.UID][]string{"p1": {Name}, "p2": {Name, holderName}, "p3": {Name, holderName}}},
				{allow: "p2", wantWaiting: map[types.UID][]string{"p1": {Name}, "p2": {Name}, "p3": {Name, holderName}}},
				{allow: "p3", wantAllowed: []types.UID{"p1", "p2", "p3"}},
			},
		},
		{
			name:     "a member rejected after the others were let go lets none go",
			minCount: 3,
			held:     []types.UID{"p1", "p2", "p3"},
			wantAtPermit: map[types.UID][]string{
				"p1": {Name, holderName}, "p2": {Name, holderName}, "p3": {Name, holderName},
			},
			steps: []step{
				{allow: "p1"},
				{allow: "p2"},
				{reject: "p3", wantWaiting: map[types.UID][]string{"p1": {Name}, "p2": {Name}}},
			},
		},
		{
			name:     "a member still held does not keep a complete gang back",
			minCount: 2,
			held:     []types.UID{"p1"},
			wantAtPermit: map[types.UID][]string{
				"p1": {Name, holderName},
			},
			steps: []step{
				// Past the quorum, it goes alone once let go, as upstream's.
				{allow: "p1", wantAllowed: []types.UID{"p1"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			pg := st.MakePodGroup().Namespace("ns1").Name("pg1").MinCount(tt.minCount).Obj()
			podGroups := st.NewPodGroups([]*schedulingv1beta1.PodGroup{pg}, []*v1.Pod{p1, p2, p3})
			h := &holder{holds: map[types.UID]bool{}}
			for _, uid := range tt.held {
				h.holds[uid] = true
			}
			r := registry.New(map[string]runtime.Factory{
				Name: New,
				holderName: func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
					return h, nil
				},
			})
			snapshot := st.NewSnapshot(nil, nil).WithPodGroups(podGroups)
			fwk := st.NewFramework(t, r, st.PluginProfile(st.Plugin(Name, 0), st.Plugin(holderName, 0)), snapshot, workloadGates(), runtime.WithPodGroupManager(podGroups))

			results := map[types.UID]chan *framework.Status{}
			for _, p := range []*v1.Pod{p1, p2, p3} {
				podGroups.Assume(p, "node1")
				s := fwk.RunPermitPlugins(ctx, framework.NewCycleState(), p, "node1")
				if !s.IsSuccess() && !s.IsWait() {
					t.Fatalf("Permit of %s: %v", p.Name, s)
				}
				if s.IsWait() {
					result := make(chan *framework.Status, 1)
					results[p.UID] = result
					go func() { result <- fwk.WaitOnPermit(ctx, p) }()
				}
			}
			waiting := func() map[types.UID][]string {
				got := map[types.UID][]string{}
				for _, p := range []*v1.Pod{p1, p2, p3} {
					if wp := fwk.GetWaitingPod(p.UID); wp != nil && len(wp.GetPendingPlugins()) > 0 {
						got[p.UID] = wp.GetPendingPlugins()
					}
				}
				return got
			}
			if diff := cmp.Diff(tt.wantAtPermit, waiting(), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("held after Permit (-want +got):\n%s", diff)
			}
			for i, sp := range tt.steps {
				if sp.allow != "" {
					fwk.GetWaitingPod(sp.allow).Allow(holderName)
				}
				if sp.reject != "" {
					fwk.GetWaitingPod(sp.reject).Reject(holderName, "no")
					if s := <-results[sp.reject]; !s.IsRejected() {
						t.Fatalf("step %d: rejected member: %v", i, s)
					}
				}
				for _, uid := range sp.wantAllowed {
					if s := <-results[uid]; !s.IsSuccess() {
						t.Errorf("step %d: member %s: %v, want it allowed", i, uid, s)
					}
				}
				if sp.wantWaiting != nil || sp.wantAllowed != nil {
					if diff := cmp.Diff(sp.wantWaiting, waiting(), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("step %d: waiting (-want +got):\n%s", i, diff)
					}
				}
			}
			// Members left waiting are released so no goroutine outlives the test.
			for uid := range waiting() {
				fwk.GetWaitingPod(uid).Reject("", "test over")
			}
		})
	}
}

// TestPreEnqueueRecordsWaitingForPods: while a gang lacks pods, PreEnqueue
// keeps upstream's verdict and tells the PodGroup how many of minCount
// exist; a gang with its pods, or a group without a gang policy, gets no
// event.
func TestPreEnqueueRecordsWaitingForPods(t *testing.T) {
	gangOf4 := st.MakePodGroup().Namespace("ns1").Name("pg1").MinCount(4).Obj()
	basic := st.MakePodGroup().Namespace("ns1").Name("pg2").BasicPolicy().Obj()
	member := func(name, group string) *v1.Pod {
		return st.MakePod().Namespace("ns1").Name(name).UID(name).PodGroupName(group).Obj()
	}
	tests := []struct {
		name       string
		pods       []*v1.Pod
		wantStatus *framework.Status
		wantEvents []string
	}{
		{
			name:       "3 of minCount 4",
			pods:       []*v1.Pod{member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg1")},
			wantStatus: framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for minCount pods from a gang to appear in scheduling queue"),
			wantEvents: []string{"Normal WaitingForPods waiting for minCount pods from a gang to appear in scheduling queue: 3 of minCount 4 pods exist"},
		},
		{
			name: "4 of minCount 4",
			pods: []*v1.Pod{member("p1", "pg1"), member("p2", "pg1"), member("p3", "pg1"), member("p4", "pg1")},
		},
		{
			name: "no gang policy",
			pods: []*v1.Pod{member("b1", "pg2")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			fwk := newFramework(t, st.NewPodGroups([]*schedulingv1beta1.PodGroup{gangOf4, basic}, tt.pods), runtime.WithEventRecorder(recorder))
			got := fwk.PreEnqueuePlugins()[0].PreEnqueue(t.Context(), tt.pods[0])
			if diff := cmp.Diff(tt.wantStatus, got); diff != "" {
				t.Errorf("PreEnqueue (-want +got):\n%s", diff)
			}
			var gotEvents []string
			for len(recorder.Events) > 0 {
				gotEvents = append(gotEvents, <-recorder.Events)
			}
			if diff := cmp.Diff(tt.wantEvents, gotEvents); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGangMemberBackAfterFailedBinding: a member the gang let go whose
// binding failed, and that is back at Permit before anything saw it
// forgotten, is let go again once the gang's quorum still holds.
func TestGangMemberBackAfterFailedBinding(t *testing.T) {
	pg := st.MakePodGroup().Namespace("ns1").Name("pg1").MinCount(3).Obj()
	member := func(name string) *v1.Pod {
		return st.MakePod().Namespace("ns1").Name(name).UID(name).PodGroupName("pg1").Obj()
	}
	pods := []*v1.Pod{member("p1"), member("p2"), member("p3")}
	ctx := t.Context()
	podGroups := st.NewPodGroups([]*schedulingv1beta1.PodGroup{pg}, pods)
	fwk := newFramework(t, podGroups, runtime.WithPodActivator(&podActivator{}))

	var got []*framework.Status
	for _, p := range pods {
		podGroups.Assume(p, "some-node")
		got = append(got, fwk.RunPermitPlugins(ctx, framework.NewCycleState(), p, "some-node"))
	}
	for _, p := range pods[:2] {
		got = append(got, fwk.WaitOnPermit(ctx, p))
	}
	// p3's PreBind fails: it is forgotten, then tried again.
	podGroups.Forget(pods[2])
	podGroups.Assume(pods[2], "some-node")
	got = append(got, fwk.RunPermitPlugins(ctx, framework.NewCycleState(), pods[2], "some-node"))

	wait := framework.NewStatus(framework.Wait, "waiting for minCount pods from a gang to be scheduled", "one or more plugins asked to wait and no plugin rejected pod")
	want := []*framework.Status{wait, wait, nil, nil, nil, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Permit of p1, p2, p3, WaitOnPermit of p1, p2, Permit of p3 again (-want +got):\n%s", diff)
	}
}
