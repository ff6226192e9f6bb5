package dynamicresources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/topologyaware"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// newGroupEnv is newEnv for a workload-aware profile: GangScheduling, and
// with topologyAware TopologyPlacementGenerator, which places groups by
// topology.
func newGroupEnv(t *testing.T, topologyAware bool, nodes []*v1.Node, claims []*resourceapi.ResourceClaim) *env {
	t.Helper()
	extra := map[string]runtime.Factory{gangscheduling.Name: gangscheduling.New}
	plugins := []configv1.Plugin{st.Plugin(Name, 2), st.Plugin(gangscheduling.Name, 0)}
	gates := runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}
	if topologyAware {
		extra[topologyaware.Name] = topologyaware.New
		plugins = append(plugins, st.Plugin(topologyaware.Name, 0))
	}
	objs := []k8sruntime.Object{class(className)}
	for _, c := range claims {
		objs = append(objs, c)
	}
	e := newProfileEnv(t, extra, plugins, []runtime.Option{runtime.WithWorkloadGates(gates), runtime.WithPodGroupManager(st.NewPodGroups(nil, nil))}, nodes, objs...)
	if got := e.fwk.HasPlacementPlugins(); got != topologyAware {
		t.Fatalf("HasPlacementPlugins() = %v, want %v", got, topologyAware)
	}
	return e
}

// TestPodGroupPostFilter: a group that did not fit gets, for each of its
// unscheduled pods, what PostFilter does for a pod alone, and upstream's
// message, unless it is placed by topology.
func TestPodGroupPostFilter(t *testing.T) {
	nodes := []*v1.Node{node("node-1")}
	other := podWithClaim("other")
	member := func(name string, claims ...string) *v1.Pod {
		p := podWithClaim(name, claims...)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}
		return p
	}
	plain := st.MakePodGroup().Name("pg").MinCount(2).Obj()
	constrained := st.MakePodGroup().Name("pg").MinCount(2).TopologyKey("kubernetes.io/hostname").Obj()
	completed := status(framework.Unschedulable, "deallocation and deletion of ResourceClaims completed")
	tests := []struct {
		name          string
		topologyAware bool
		podGroup      *schedulingv1beta1.PodGroup
		claims        []*resourceapi.ResourceClaim
		// tried are the pods that went through PreFilter and Filter in the
		// cycle; unscheduled the pods the group's cycle considered.
		tried, unscheduled []*v1.Pod
		want               *framework.Status
		// wantErr is the message of an Error status, for want nil.
		wantErr         string
		wantDeallocated []string
	}{
		{
			name:            "each pod frees its idle claim",
			podGroup:        plain,
			claims:          []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0"), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:           []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:     []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			want:            completed,
			wantDeallocated: []string{"gpu-a", "gpu-b"},
		},
		{
			name:            "a claim another pod uses stays",
			podGroup:        plain,
			claims:          []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0", other), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:           []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:     []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			want:            completed,
			wantDeallocated: []string{"gpu-b"},
		},
		{
			name:            "only the group's unscheduled pods count",
			podGroup:        plain,
			claims:          []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0"), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:           []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:     []*v1.Pod{member("b", "gpu-b")},
			want:            completed,
			wantDeallocated: []string{"gpu-b"},
		},
		{
			name:        "pods without claims: the same message",
			podGroup:    plain,
			claims:      []*resourceapi.ResourceClaim{claim("gpu-a", 1), claim("gpu-b", 1)},
			tried:       []*v1.Pod{member("a"), member("b")},
			unscheduled: []*v1.Pod{member("a"), member("b")},
			want:        completed,
		},
		{
			name:          "a group placed by topology is left alone",
			topologyAware: true,
			podGroup:      constrained,
			claims:        []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0"), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:         []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:   []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			want:          framework.NewStatus(framework.Unschedulable).WithPlugin(Name),
		},
		{
			name:            "a topology constraint counts only where groups are placed by topology",
			podGroup:        constrained,
			claims:          []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0"), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:           []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:     []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			want:            completed,
			wantDeallocated: []string{"gpu-a", "gpu-b"},
		},
		{
			name:            "a group without a placement by topology",
			topologyAware:   true,
			podGroup:        plain,
			claims:          []*resourceapi.ResourceClaim{allocated(claim("gpu-a", 1), "gone", "gpu-0"), allocated(claim("gpu-b", 1), "gone", "gpu-1")},
			tried:           []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			unscheduled:     []*v1.Pod{member("a", "gpu-a"), member("b", "gpu-b")},
			want:            completed,
			wantDeallocated: []string{"gpu-a", "gpu-b"},
		},
		{
			// Upstream takes this for an error; here it happens when the
			// operator releases a group all of whose members wait at
			// Permit (its Workload was deleted), and nothing is to free.
			name:        "no pod got to PreFilter",
			podGroup:    plain,
			claims:      []*resourceapi.ResourceClaim{claim("gpu-a", 1), claim("gpu-b", 1)},
			unscheduled: []*v1.Pod{member("a"), member("b")},
			want:        completed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGroupEnv(t, tt.topologyAware, nodes, tt.claims)
			ctx := t.Context()
			podGroupCycleState := framework.NewCycleState()
			ni, _ := e.snapshot.NodeInfos().Get("node-1")
			for _, pod := range tt.tried {
				state := framework.NewCycleState()
				state.SetPodGroupSchedulingCycle(podGroupCycleState)
				_, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod)
				if s.IsSuccess() {
					s = e.fwk.RunFilterPlugins(ctx, state, pod, ni)
				}
				if s.IsRejected() != (len(pod.Spec.ResourceClaims) > 0) {
					t.Fatalf("pod %s: PreFilter or Filter: %v", pod.Name, s)
				}
			}
			pgInfo := &framework.PodGroupInfo{Namespace: namespace, Name: tt.podGroup.Name, Type: framework.PodGroupKeyType, UnscheduledPods: tt.unscheduled, PodGroup: tt.podGroup}
			_, got := e.fwk.RunPodGroupPostFilterPlugins(ctx, podGroupCycleState, pgInfo, nil)
			if tt.wantErr != "" {
				if !got.IsError() || got.Message() != tt.wantErr || got.Plugin() != Name {
					t.Errorf("PodGroupPostFilter = %v (%v, plugin %q), want the Error %q of %s", got, got.Code(), got.Plugin(), tt.wantErr, Name)
				}
			} else if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PodGroupPostFilter (-want +got):\n%s", diff)
			}
			var deallocated []string
			for _, c := range tt.claims {
				got, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, c.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if c.Status.Allocation != nil && got.Status.Allocation == nil {
					deallocated = append(deallocated, c.Name)
				}
			}
			if diff := cmp.Diff(tt.wantDeallocated, deallocated); diff != "" {
				t.Errorf("deallocated claims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodGroupSharedClaim: a claim not allocated yet that pods of one
// pod-group cycle share gets one allocation, made by the first pod's
// Reserve and reused by the cycle's later pods, until the last of them is
// unreserved; pods alone or in another cycle wait for it, as upstream.
func TestPodGroupSharedClaim(t *testing.T) {
	// Only node-1 has devices: gpu-0, then gpu-1.
	nodes := []*v1.Node{node("node-1"), node("node-2")}
	noDevice := status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims")
	elsewhere := status(framework.UnschedulableAndUnresolvable, "resourceclaim not available on the node")
	inFlight := status(framework.UnschedulableAndUnresolvable, "resource claim default/gpu is in the process of being allocated")
	fits := map[string]*framework.Status{"node-1": nil, "node-2": noDevice}
	reuses := map[string]*framework.Status{"node-1": nil, "node-2": elsewhere}
	waits := map[string]*framework.Status{"node-1": inFlight, "node-2": inFlight}

	// step schedules pod in the pod-group cycle named cycle ("" for none)
	// and reserves it on node-1 when it fits there, or, with unreserve,
	// unreserves the pod an earlier step reserved.
	type step struct {
		pod       *v1.Pod
		cycle     string
		unreserve bool
		want      map[string]*framework.Status
	}
	a, b, c := podWithClaim("a", "gpu"), podWithClaim("b", "gpu"), podWithClaim("c", "gpu")
	tests := []struct {
		name  string
		steps []step
		// wantInFlight is the device of each claim's in-flight
		// allocation at the end, "" for none.
		wantInFlight map[string]string
		// wantShared are, by cycle, the pods sharing each claim's
		// in-flight allocation.
		wantShared map[string]map[types.UID][]types.UID
	}{
		{
			name: "the cycle's later pods reuse the first pod's allocation",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				{pod: b, cycle: "g", want: reuses},
				{pod: c, cycle: "g", want: reuses},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": ""},
			wantShared:   map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"a-uid", "b-uid", "c-uid"}}},
		},
		{
			name: "a pod alone waits for the allocation",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				{pod: b, want: waits},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": ""},
			wantShared:   map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"a-uid"}}},
		},
		{
			name: "a pod of another pod-group cycle waits for the allocation",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				{pod: b, cycle: "h", want: waits},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": ""},
			wantShared:   map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"a-uid"}}, "h": {}},
		},
		{
			name: "the allocation stays while a pod shares it",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				{pod: b, cycle: "g", want: reuses},
				{pod: a, cycle: "g", unreserve: true},
				{pod: c, cycle: "g", want: reuses},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": ""},
			// Unreserve leaves the set as it is while the allocation
			// stays, as upstream.
			wantShared: map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"a-uid", "b-uid", "c-uid"}}},
		},
		{
			name: "released by the last pod sharing it, the claim is allocated anew",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				{pod: b, cycle: "g", want: reuses},
				{pod: b, cycle: "g", unreserve: true},
				{pod: a, cycle: "g", unreserve: true},
				{pod: c, cycle: "g", want: fits},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": ""},
			wantShared:   map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"c-uid"}}},
		},
		{
			name: "a pod with a claim of its own besides gets both allocations right",
			steps: []step{
				{pod: a, cycle: "g", want: fits},
				// node-2 has no device for gpu-b, which the allocator
				// finds before the other claim's node selector.
				{pod: podWithClaim("b", "gpu", "gpu-b"), cycle: "g", want: fits},
			},
			wantInFlight: map[string]string{"gpu": "gpu-0", "gpu-b": "gpu-1"},
			wantShared:   map[string]map[types.UID][]types.UID{"g": {"gpu-uid": {"a-uid", "b-uid"}, "gpu-b-uid": {"b-uid"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nodes, class(className), claim("gpu", 1), claim("gpu-b", 1), slice("node-1", "gpu-0", "gpu-1"))
			ctx := t.Context()
			cycles := map[string]*framework.CycleState{}
			states := map[string]*framework.CycleState{}
			for i, step := range tt.steps {
				if step.unreserve {
					e.fwk.RunReservePluginsUnreserve(ctx, states[step.pod.Name], step.pod, "node-1")
					continue
				}
				state := framework.NewCycleState()
				if step.cycle != "" {
					if cycles[step.cycle] == nil {
						cycles[step.cycle] = framework.NewCycleState()
					}
					state.SetPodGroupSchedulingCycle(cycles[step.cycle])
				}
				got := map[string]*framework.Status{}
				_, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, step.pod)
				for _, n := range nodes {
					if s.IsSuccess() {
						ni, _ := e.snapshot.NodeInfos().Get(n.Name)
						got[n.Name] = e.fwk.RunFilterPlugins(ctx, state, step.pod, ni)
					} else {
						got[n.Name] = s
					}
				}
				if diff := cmp.Diff(step.want, got); diff != "" {
					t.Fatalf("step %d, pod %s: PreFilter and Filter (-want +got):\n%s", i, step.pod.Name, diff)
				}
				if got["node-1"].IsSuccess() {
					if s := e.fwk.RunReservePluginsReserve(ctx, state, step.pod, "node-1"); !s.IsSuccess() {
						t.Fatalf("step %d, pod %s: Reserve: %v", i, step.pod.Name, s)
					}
					states[step.pod.Name] = state
				}
			}
			gotInFlight := map[string]string{}
			for name := range tt.wantInFlight {
				gotInFlight[name] = ""
				if alloc := e.manager.ResourceClaims().GetPendingAllocation(types.UID(name + "-uid")); alloc != nil {
					gotInFlight[name] = alloc.Devices.Results[0].Device
				}
			}
			if diff := cmp.Diff(tt.wantInFlight, gotInFlight); diff != "" {
				t.Errorf("in-flight allocations (-want +got):\n%s", diff)
			}
			gotShared := map[string]map[types.UID][]types.UID{}
			for name, cycle := range cycles {
				pgState, err := getPodGroupStateDataFromPodGroupCycleState(cycle)
				if err != nil {
					t.Fatal(err)
				}
				gotShared[name] = map[types.UID][]types.UID{}
				for uid, pods := range pgState.pendingAllocations {
					gotShared[name][uid] = sets.List(pods)
				}
			}
			if diff := cmp.Diff(tt.wantShared, gotShared); diff != "" {
				t.Errorf("allocations shared in the pod-group cycles (-want +got):\n%s", diff)
			}
		})
	}
}
