package defaultpreemption

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func genericWorkload() feature.Features { return feature.Features{EnableGenericWorkload: true} }

// podGroup is a PodGroup of priority prio; all says its disruptionMode is
// All, else Single.
func podGroup(name string, prio int32, all bool) *schedulingv1beta1.PodGroup {
	pg := st.MakePodGroup().Name(name).MinCount(1).Obj()
	pg.UID = types.UID("uid-" + name)
	pg.Spec.Priority = &prio
	if all {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	} else {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}
	}
	return pg
}

// victimSummary is what a test checks of a victim.
type victimSummary struct {
	Priority int32
	Pods     []string
	Type     framework.EntityKeyType
	Nodes    []string
}

func summarize(vs []*victim) []victimSummary {
	var out []victimSummary
	for _, v := range vs {
		s := victimSummary{Priority: v.priority, Type: v.keyType, Nodes: sets.List(sets.KeySet(v.affectedNodes))}
		for _, pi := range v.pods {
			s.Pods = append(s.Pods, pi.Pod.Name)
		}
		sort.Strings(s.Pods)
		out = append(out, s)
	}
	return out
}

// Ported from upstream's TestGetVictimsOnNode.
func TestGetVictimsOnNode(t *testing.T) {
	const low, mid, high = 0, 100, 1000
	nodes := []*v1.Node{makeNode("node1", "4").Obj(), makeNode("node2", "4").Obj()}
	pod := func(name, node, group string, prio int32) *v1.Pod {
		p := st.MakePod().Name(name).Node(node).Priority(prio)
		if group != "" {
			p.PodGroupName(group)
		}
		return p.Obj()
	}
	tests := []struct {
		name      string
		features  feature.Features
		podGroups []*schedulingv1beta1.PodGroup
		pods      []*v1.Pod
		want      []victimSummary
	}{
		{
			name: "GenericWorkload disabled, two pods on target node",
			pods: []*v1.Pod{pod("p1", "node1", "", mid), pod("p2", "node1", "", low)},
			want: []victimSummary{
				{Priority: mid, Pods: []string{"p1"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
				{Priority: low, Pods: []string{"p2"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
			},
		},
		{
			name:      "GenericWorkload disabled, pods of a PodGroup are pods with their own priority",
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("pg1", mid, true)},
			pods:      []*v1.Pod{pod("p1", "node1", "pg1", low), pod("p2", "node2", "pg1", low)},
			want:      []victimSummary{{Priority: low, Pods: []string{"p1"}, Type: framework.PodKeyType, Nodes: []string{"node1"}}},
		},
		{
			name:     "GenericWorkload enabled, pods with no PodGroup",
			features: genericWorkload(),
			pods:     []*v1.Pod{pod("p1", "node1", "", mid), pod("p2", "node1", "", low)},
			want: []victimSummary{
				{Priority: mid, Pods: []string{"p1"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
				{Priority: low, Pods: []string{"p2"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
			},
		},
		{
			name:      "GenericWorkload enabled, pod belonging to PodGroup with disruptionMode All",
			features:  genericWorkload(),
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("pg1", mid, true)},
			pods:      []*v1.Pod{pod("p1", "node1", "pg1", mid), pod("p2", "node2", "pg1", mid), pod("p3", "node1", "", low)},
			want: []victimSummary{
				{Priority: mid, Pods: []string{"p1", "p2"}, Type: framework.PodGroupKeyType, Nodes: []string{"node1", "node2"}},
				{Priority: low, Pods: []string{"p3"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
			},
		},
		{
			name:      "GenericWorkload enabled, pods belonging to PodGroup with disruptionMode Single",
			features:  genericWorkload(),
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("pg1", mid, false)},
			pods: []*v1.Pod{
				pod("p1", "node1", "pg1", low), pod("p2", "node2", "pg1", low), pod("p3", "node1", "pg1", low), pod("p4", "node1", "", low),
			},
			want: []victimSummary{
				{Priority: mid, Pods: []string{"p1"}, Type: framework.PodGroupKeyType, Nodes: []string{"node1"}},
				{Priority: mid, Pods: []string{"p3"}, Type: framework.PodGroupKeyType, Nodes: []string{"node1"}},
				{Priority: low, Pods: []string{"p4"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
			},
		},
		{
			name:      "GenericWorkload enabled, mixed test with individual pods, PodGroup with DisruptionMode Single, and PodGroup with DisruptionMode All",
			features:  genericWorkload(),
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("pg-all", high, true), podGroup("pg-single", mid, false)},
			pods: []*v1.Pod{
				pod("p-all-1", "node1", "pg-all", high), pod("p-all-2", "node2", "pg-all", high),
				pod("p-single-1", "node1", "pg-single", low), pod("p-single-2", "node2", "pg-single", low),
				pod("p-ind", "node1", "", low),
			},
			want: []victimSummary{
				{Priority: high, Pods: []string{"p-all-1", "p-all-2"}, Type: framework.PodGroupKeyType, Nodes: []string{"node1", "node2"}},
				{Priority: mid, Pods: []string{"p-single-1"}, Type: framework.PodGroupKeyType, Nodes: []string{"node1"}},
				{Priority: low, Pods: []string{"p-ind"}, Type: framework.PodKeyType, Nodes: []string{"node1"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{nodes: nodes, pods: tt.pods, podGroups: tt.podGroups, features: tt.features})
			ni, err := e.snapshot.Get("node1")
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.pl.getVictimsOnNode(ni, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMoreImportantVictim(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(prio int32, keyType framework.EntityKeyType, size, start int) *victim {
		return &victim{priority: prio, keyType: keyType, pods: make([]*framework.PodInfo, size), earliestStart: now.Add(time.Duration(start) * time.Minute)}
	}
	tests := []struct {
		name string
		a, b *victim
		want bool
	}{
		{name: "higher priority first", a: mk(2, framework.PodKeyType, 1, 5), b: mk(1, framework.PodGroupKeyType, 3, 0), want: true},
		{name: "a pod group before a pod of the same priority", a: mk(1, framework.PodGroupKeyType, 1, 5), b: mk(1, framework.PodKeyType, 1, 0), want: true},
		{name: "a pod after a pod group", a: mk(1, framework.PodKeyType, 1, 0), b: mk(1, framework.PodGroupKeyType, 1, 5), want: false},
		{name: "the larger group first", a: mk(1, framework.PodGroupKeyType, 3, 5), b: mk(1, framework.PodGroupKeyType, 2, 0), want: true},
		{name: "then the one that started earlier", a: mk(1, framework.PodGroupKeyType, 2, 0), b: mk(1, framework.PodGroupKeyType, 2, 5), want: true},
		{name: "pods by start", a: mk(1, framework.PodKeyType, 1, 5), b: mk(1, framework.PodKeyType, 1, 0), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := moreImportantVictim(tt.a, tt.b); got != tt.want {
				t.Errorf("moreImportantVictim = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPostFilterWithGenericWorkload checks single-pod preemption in a
// workload-aware profile: a PodGroup with disruptionMode All goes as a
// whole, on every node, and pods of groups are kept before lone pods.
func TestPostFilterWithGenericWorkload(t *testing.T) {
	nodes := []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()}
	// groupOnTwoNodes has the group pg's pods on n1 and n2, and a lone pod
	// beside the first.
	groupOnTwoNodes := func() []*v1.Pod {
		return []*v1.Pod{
			placed("g1", "n1", 1, "1", 0).PodGroupName("pg").Obj(),
			placed("g2", "n2", 1, "2", 0).PodGroupName("pg").Obj(),
			placed("lone", "n1", 1, "1", 0).Obj(),
		}
	}
	// memberBesideLone has a member of pg on n1 beside an older lone pod,
	// n2 being full.
	memberBesideLone := func() []*v1.Pod {
		return []*v1.Pod{
			placed("member", "n1", 1, "1", 5).PodGroupName("pg").Obj(),
			placed("lone", "n1", 1, "1", 0).Obj(),
			placed("full", "n2", 100, "2", 0).Obj(),
		}
	}
	tests := []struct {
		name        string
		features    feature.Features
		podGroups   []*schedulingv1beta1.PodGroup
		pods        []*v1.Pod
		preemptor   *v1.Pod
		wantNode    string
		wantVictims []string
		wantMessage string
	}{
		{
			// n1 would cost the group and the lone pod, n2 the group only;
			// the group's pod on n1 goes too.
			name:        "GenericWorkload enabled, a PodGroup with disruptionMode All is preempted whole",
			features:    genericWorkload(),
			podGroups:   []*schedulingv1beta1.PodGroup{podGroup("pg", 1, true)},
			pods:        groupOnTwoNodes(),
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantVictims: []string{"g1", "g2"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 2 victims",
		},
		{
			name:        "GenericWorkload disabled, only the pods on the node",
			podGroups:   []*schedulingv1beta1.PodGroup{podGroup("pg", 1, true)},
			pods:        groupOnTwoNodes(),
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantVictims: []string{"g2"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:        "GenericWorkload enabled, a pod of a group is kept before an older lone pod",
			features:    genericWorkload(),
			podGroups:   []*schedulingv1beta1.PodGroup{podGroup("pg", 1, false)},
			pods:        memberBesideLone(),
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantVictims: []string{"lone"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:        "GenericWorkload disabled, the older lone pod is kept",
			podGroups:   []*schedulingv1beta1.PodGroup{podGroup("pg", 1, false)},
			pods:        memberBesideLone(),
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantVictims: []string{"member"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:      "GenericWorkload enabled, a member weighs with its group's priority",
			features:  genericWorkload(),
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("pg", 50, false)},
			pods: []*v1.Pod{
				placed("member", "n1", 1, "2", 0).PodGroupName("pg").Obj(),
				placed("full", "n2", 100, "2", 0).Obj(),
			},
			preemptor:   preemptor(10, "1").Obj(),
			wantMessage: "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{nodes: nodes, pods: append(tt.pods, tt.preemptor), podGroups: tt.podGroups, features: tt.features, parallelism: 1})
			result, status := e.filterAndPostFilter(t, tt.preemptor)
			if diff := cmp.Diff(tt.wantMessage, status.Message()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if tt.wantNode != "" && (result == nil || result.NominatedNodeName != tt.wantNode) {
				t.Errorf("result = %v, want node %s", result, tt.wantNode)
			}
			checkDeleted(t, e, tt.wantVictims)
		})
	}
}

// assignment is a ProposedAssignment of the test's scheduling function.
type assignment struct {
	pi    *framework.PodInfo
	node  string
	state *framework.CycleState
}

func (a *assignment) GetPod() *v1.Pod                      { return a.pi.Pod }
func (a *assignment) GetPodInfo() *framework.PodInfo       { return a.pi }
func (a *assignment) GetNodeName() string                  { return a.node }
func (a *assignment) GetCycleState() *framework.CycleState { return a.state }

// oneGroupPodPerNode is a pod-group algorithm for tests: each pod goes to
// the first node, in snapshot order, that passes its filters and has no
// other pod of the group. It records how many times it ran.
func oneGroupPodPerNode(t *testing.T, e *env, pods []*v1.Pod, runs *int) framework.PodGroupSchedulingFunc {
	return func(ctx context.Context) (*framework.PodGroupAssignments, *framework.Status) {
		*runs++
		nodes, _ := e.snapshot.List()
		taken := sets.New[string]()
		var out []framework.ProposedAssignment
		for _, p := range pods {
			state := framework.NewCycleState()
			if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, p); !s.IsSuccess() {
				return nil, s
			}
			for _, ni := range nodes {
				name := ni.Node().Name
				if taken.Has(name) || !e.fwk.RunFilterPluginsWithNominatedPods(ctx, state, p, ni).IsSuccess() {
					continue
				}
				pi, err := framework.NewPodInfo(p)
				if err != nil {
					t.Fatal(err)
				}
				taken.Insert(name)
				out = append(out, &assignment{pi: pi, node: name, state: state})
				break
			}
		}
		if len(out) < len(pods) {
			return &framework.PodGroupAssignments{ProposedAssignments: out}, framework.NewStatus(framework.Unschedulable, "the group does not fit")
		}
		return &framework.PodGroupAssignments{ProposedAssignments: out}, nil
	}
}

// preemptorMember is a pod of the PodGroup "preemptor", of its priority,
// requesting cpuQ.
func preemptorMember(name, cpuQ string) *st.PodWrapper {
	return st.MakePod().Name(name).PodGroupName("preemptor").Priority(10).Req(cpu(cpuQ)).SchedulerName("default-scheduler")
}

// newPreemptorEnv is newEnv with GenericWorkload, cfg's pods and members,
// and the PodGroup "preemptor" (priority 10, disruptionMode All) before
// cfg's; it returns the env and the group of members as the pod-group
// cycle hands it to PodGroupPostFilter.
func newPreemptorEnv(t *testing.T, cfg envConfig, members []*v1.Pod) (*env, *framework.PodGroupInfo) {
	t.Helper()
	group := podGroup("preemptor", 10, true)
	cfg.pods = append(append([]*v1.Pod{}, cfg.pods...), members...)
	cfg.podGroups = append([]*schedulingv1beta1.PodGroup{group}, cfg.podGroups...)
	cfg.features = genericWorkload()
	e := newEnv(t, cfg)
	return e, &framework.PodGroupInfo{Namespace: "default", Name: "preemptor", Type: framework.PodGroupKeyType, UnscheduledPods: members, PodGroup: group}
}

// checkDeleted waits for the preemptions under way and compares the pods
// deleted through the API with want.
func checkDeleted(t *testing.T, e *env, want []string) {
	t.Helper()
	e.pl.inFlight.Wait()
	if diff := cmp.Diff(want, sets.List(deletedPods(e)), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

// Ported from upstream's podgrouppreemption_test.go, on our test builders.
func TestPodGroupPostFilter(t *testing.T) {
	nodes := []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj(), makeNode("n3", "2").Obj()}
	never := v1.PreemptNever
	neverMember := preemptorMember("m2", "2").Obj()
	neverMember.Spec.PreemptionPolicy = &never
	terminating := placed("terminating", "n1", 1, "1", 0).Obj()
	now := metav1.Now()
	terminating.DeletionTimestamp = &now
	terminating.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	nominatedMember := preemptorMember("m1", "2").NominatedNodeName("n1").Obj()

	tests := []struct {
		name            string
		podGroups       []*schedulingv1beta1.PodGroup
		placed          []*v1.Pod
		members         []*v1.Pod
		wantCode        framework.Code
		wantMessage     string
		wantNominations map[types.NamespacedName]*framework.NominatingInfo
		wantVictims     []string
		wantRuns        int
	}{
		{
			name: "the lowest-priority victims make room for every member, the others are reprieved",
			placed: []*v1.Pod{
				placed("low1", "n1", 1, "2", 0).Obj(),
				placed("low2", "n2", 1, "2", 0).Obj(),
				placed("mid3", "n3", 5, "2", 0).Obj(),
			},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj(), preemptorMember("m2", "2").Obj()},
			wantCode:    framework.Success,
			wantMessage: "pod group preemption: found a placement for podgroup, preempting 2 victims",
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
				{Namespace: "default", Name: "m2"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n2"},
			},
			wantVictims: []string{"low1", "low2"},
			wantRuns:    1,
		},
		{
			name: "a small victim that leaves enough room is reprieved",
			placed: []*v1.Pod{
				placed("big", "n1", 1, "2", 0).Obj(),
				placed("small", "n2", 1, "1", 0).Obj(),
				placed("high", "n3", 100, "2", 0).Obj(),
			},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj(), preemptorMember("m2", "1").Obj()},
			wantCode:    framework.Success,
			wantMessage: "pod group preemption: found a placement for podgroup, preempting 1 victims",
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
				{Namespace: "default", Name: "m2"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n2"},
			},
			wantVictims: []string{"big"},
			wantRuns:    1,
		},
		{
			name:      "a victim PodGroup with disruptionMode All goes whole",
			podGroups: []*schedulingv1beta1.PodGroup{podGroup("victim", 1, true)},
			placed: []*v1.Pod{
				placed("v1", "n1", 1, "2", 0).PodGroupName("victim").Obj(),
				placed("v2", "n2", 1, "1", 0).PodGroupName("victim").Obj(),
				placed("high", "n3", 100, "2", 0).Obj(),
			},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj()},
			wantCode:    framework.Success,
			wantMessage: "pod group preemption: found a placement for podgroup, preempting 2 victims",
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
			},
			wantVictims: []string{"v1", "v2"},
			wantRuns:    1,
		},
		{
			name:        "no lower-priority victim",
			placed:      []*v1.Pod{placed("high", "n1", 100, "2", 0).Obj()},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj()},
			wantCode:    framework.UnschedulableAndUnresolvable,
			wantMessage: "pod group preemption: No preemption victims found for incoming preemptor",
		},
		{
			name:        "the group does not fit even without the victims",
			placed:      []*v1.Pod{placed("low1", "n1", 1, "2", 0).Obj()},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj(), preemptorMember("m2", "2").Obj(), preemptorMember("m3", "2").Obj(), preemptorMember("m4", "2").Obj()},
			wantCode:    framework.Unschedulable,
			wantMessage: "pod group preemption: the group does not fit",
			wantRuns:    1,
		},
		{
			name:        "a member with preemptionPolicy Never",
			placed:      []*v1.Pod{placed("low1", "n1", 1, "2", 0).Obj()},
			members:     []*v1.Pod{preemptorMember("m1", "2").Obj(), neverMember},
			wantCode:    framework.Unschedulable,
			wantMessage: "pod group preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name:        "a victim is still terminating on a member's nominated node",
			placed:      []*v1.Pod{terminating},
			members:     []*v1.Pod{nominatedMember},
			wantCode:    framework.Success,
			wantMessage: "pod group preemption: ongoing preemption on nominated nodes",
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, pgInfo := newPreemptorEnv(t, envConfig{nodes: nodes, pods: tt.placed, podGroups: tt.podGroups}, tt.members)
			before := podsOnNodes(e)
			runs := 0
			result, status := e.pl.PodGroupPostFilter(context.Background(), framework.NewCycleState(), pgInfo, oneGroupPodPerNode(t, e, tt.members, &runs))
			if status.Code() != tt.wantCode {
				t.Errorf("code = %v, want %v", status.Code(), tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantMessage, status.Message()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			var got map[types.NamespacedName]*framework.NominatingInfo
			if result != nil {
				got = result.NominatingInfos
			}
			if diff := cmp.Diff(tt.wantNominations, got); diff != "" {
				t.Errorf("nominations (-want +got):\n%s", diff)
			}
			if runs != tt.wantRuns {
				t.Errorf("the group's algorithm ran %d times, want %d", runs, tt.wantRuns)
			}
			if diff := cmp.Diff(before, podsOnNodes(e)); diff != "" {
				t.Errorf("the snapshot was not restored (-before +after):\n%s", diff)
			}
			checkDeleted(t, e, tt.wantVictims)
			m := e.fwk.Metrics()
			if diff := cmp.Diff(map[string]float64{tt.wantCode.String(): 1}, counterValues(t, m.WorkloadPreemptionAttempts, "result")); diff != "" {
				t.Errorf("scheduler_workload_preemption_attempts_total (-want +got):\n%s", diff)
			}
			var wantVictims []uint64
			if tt.wantVictims != nil {
				wantVictims = []uint64{1, uint64(len(tt.wantVictims))}
			}
			if diff := cmp.Diff(wantVictims, histogramCountAndSum(t, m.WorkloadPreemptionVictims)); diff != "" {
				t.Errorf("scheduler_workload_preemption_victims [count, sum] (-want +got):\n%s", diff)
			}
		})
	}
}

// counterValues returns the value of each series of vec by its label.
func counterValues(t *testing.T, vec *prometheus.CounterVec, label string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	vec.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for metric := range ch {
		var m dto.Metric
		if err := metric.Write(&m); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// histogramCountAndSum returns the count and the sum of the one series of
// the unlabelled vec, nil before its first observation.
func histogramCountAndSum(t *testing.T, vec *prometheus.HistogramVec) []uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	vec.Collect(ch)
	close(ch)
	var out []uint64
	for metric := range ch {
		var m dto.Metric
		if err := metric.Write(&m); err != nil {
			t.Fatal(err)
		}
		out = []uint64{m.GetHistogram().GetSampleCount(), uint64(m.GetHistogram().GetSampleSum())}
	}
	return out
}

// podsOnNodes returns, per node of the snapshot, its pods and requested cpu.
func podsOnNodes(e *env) map[string][]string {
	out := map[string][]string{}
	nodes, _ := e.snapshot.List()
	for _, ni := range nodes {
		names := []string{strconv.FormatInt(ni.Requested.MilliCPU, 10)}
		for _, pi := range ni.Pods {
			names = append(names, pi.Pod.Name)
		}
		out[ni.Node().Name] = names
	}
	return out
}

// TestPodGroupActuation checks what the victims of a pod-group
// preemption get, and that the group's pods wait for it in PreEnqueue.
func TestPodGroupActuation(t *testing.T) {
	victimPod := placed("victim", "n1", 1, "2", 0).Obj()
	victimPod.Generation = 2
	m1 := preemptorMember("m1", "2").Obj()
	stranger := st.MakePod().Name("stranger").PodGroupName("other").Priority(10).Obj()
	e, pgInfo := newPreemptorEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{victimPod, stranger}}, []*v1.Pod{m1})

	release := make(chan struct{})
	e.cs.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		<-release
		return false, nil, nil
	})
	ctx := context.Background()
	runs := 0
	if _, status := e.pl.PodGroupPostFilter(ctx, framework.NewCycleState(), pgInfo, oneGroupPodPerNode(t, e, []*v1.Pod{m1}, &runs)); !status.IsSuccess() {
		t.Fatalf("PodGroupPostFilter = %v", status)
	}
	if s := e.pl.PreEnqueue(ctx, m1); s.Code() != framework.UnschedulableAndUnresolvable || s.Message() != "waiting for the preemption for this pod group to be finished" {
		t.Errorf("PreEnqueue of a member while evicting = %v", s)
	}
	if s := e.pl.PreEnqueue(ctx, stranger); !s.IsSuccess() {
		t.Errorf("PreEnqueue of a pod of an unknown group = %v, want Success", s)
	}
	close(release)
	e.pl.inFlight.Wait()
	if s := e.pl.PreEnqueue(ctx, m1); !s.IsSuccess() {
		t.Errorf("PreEnqueue after eviction = %v, want Success", s)
	}

	patches := statusPatches(t, e)
	checkDisruptionTarget(t, patches, "victim", "default-scheduler: preempting to accommodate a higher priority podgroup", 2)
	if diff := cmp.Diff([]string{"Normal Preempted Preempted by podgroup uid-preemptor on node cluster"}, drainEvents(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestPodGroupPostFilterSnapshotAggregates checks that the group's
// algorithm runs on a snapshot whose aggregates, not only its NodeInfos,
// lost the victims (the nodes with pods with required anti-affinity, the
// claims in use), and that every aggregate is as it was once
// PodGroupPostFilter returns. As upstream, a plugin that skipped
// (PreFilter) with the victims gone does not judge their reprieve: the
// victims here are needed for cpu too, or the members' own terms keep
// InterPodAffinity from skipping.
func TestPodGroupPostFilterSnapshotAggregates(t *testing.T) {
	member := func(name string) *st.PodWrapper {
		return preemptorMember(name, "1").UID(name).Label("app", "gang")
	}
	spread := st.PodAffinityTerm("app", "gang", v1.LabelHostname)
	nodes := []*v1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj(), makeNode("n3", "4").Obj()}
	full := placed("full", "n3", 100, "4", 0).Obj()
	rwop := st.MakePVC("default", "claim").AccessModes(v1.ReadWriteOncePod).Obj()
	tests := []struct {
		name            string
		placed          []*v1.Pod
		members         []*v1.Pod
		wantNominations map[types.NamespacedName]*framework.NominatingInfo
		wantVictims     []string
	}{
		{
			name: "victims whose required anti-affinity rejects the members",
			placed: []*v1.Pod{
				placed("anti1", "n1", 1, "1", 0).PodAntiAffinity(spread).Obj(),
				placed("bystander1", "n1", 1, "1", 0).Obj(),
				placed("anti2", "n2", 1, "1", 0).PodAntiAffinity(spread).Obj(),
				full,
			},
			members: []*v1.Pod{member("m1").PodAntiAffinity(spread).Obj(), member("m2").PodAntiAffinity(spread).Obj()},
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
				{Namespace: "default", Name: "m2"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n2"},
			},
			wantVictims: []string{"anti1", "anti2"},
		},
		{
			name:    "a victim holding the members' ReadWriteOncePod claim",
			placed:  []*v1.Pod{placed("holder", "n1", 1, "3", 0).PVC("claim").Obj(), placed("other", "n2", 1, "3", 0).Obj(), full},
			members: []*v1.Pod{member("m1").Req(cpu("2")).PVC("claim").Obj()},
			wantNominations: map[types.NamespacedName]*framework.NominatingInfo{
				{Namespace: "default", Name: "m1"}: {NominatingMode: framework.ModeOverride, NominatedNodeName: "n1"},
			},
			wantVictims: []string{"holder"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, pgInfo := newPreemptorEnv(t, envConfig{nodes: nodes, pods: tt.placed, pvcs: []*v1.PersistentVolumeClaim{rwop}}, tt.members)
			before := aggregatesOf(e)
			runs := 0
			result, status := e.pl.PodGroupPostFilter(context.Background(), framework.NewCycleState(), pgInfo, allMembersFirstFit(t, e, tt.members, &runs))
			if !status.IsSuccess() {
				t.Fatalf("PodGroupPostFilter = %v, want Success", status)
			}
			if diff := cmp.Diff(tt.wantNominations, result.NominatingInfos); diff != "" {
				t.Errorf("nominations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, aggregatesOf(e)); diff != "" {
				t.Errorf("the snapshot was not restored (-before +after):\n%s", diff)
			}
			checkDeleted(t, e, tt.wantVictims)
		})
	}
}

// allMembersFirstFit is a pod-group algorithm for tests: each pod goes to
// the first node, in snapshot order, that passes its filters, and is
// assumed there for the next, as the pod-group cycle does.
func allMembersFirstFit(t *testing.T, e *env, pods []*v1.Pod, runs *int) framework.PodGroupSchedulingFunc {
	return func(ctx context.Context) (*framework.PodGroupAssignments, *framework.Status) {
		*runs++
		logger := klog.FromContext(ctx)
		nodes, _ := e.snapshot.List()
		var out []framework.ProposedAssignment
		defer func() {
			for i := len(out) - 1; i >= 0; i-- {
				if err := e.snapshot.ForgetPod(logger, out[i].GetPodInfo().Pod); err != nil {
					t.Error(err)
				}
			}
		}()
		for _, p := range pods {
			state := framework.NewCycleState()
			if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, p); !s.IsSuccess() {
				return nil, s
			}
			for _, ni := range nodes {
				if !e.fwk.RunFilterPluginsWithNominatedPods(ctx, state, p, ni).IsSuccess() {
					continue
				}
				assumed := p.DeepCopy()
				assumed.Spec.NodeName = ni.Node().Name
				pi, err := framework.NewPodInfo(assumed)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.snapshot.AssumePod(pi); err != nil {
					t.Fatal(err)
				}
				out = append(out, &assignment{pi: pi, node: ni.Node().Name, state: state})
				break
			}
		}
		if len(out) < len(pods) {
			return &framework.PodGroupAssignments{}, framework.NewStatus(framework.Unschedulable, "the group does not fit")
		}
		return &framework.PodGroupAssignments{ProposedAssignments: slices.Clone(out)}, nil
	}
}

// aggregates is what a test checks of the snapshot beyond its nodes' pods.
type aggregates struct {
	Pods              map[string][]string
	WithAffinity      []string
	WithAntiAffinity  []string
	ClaimUsed         bool
	PreemptorMembers  int
	PreemptorSchedule int
}

func aggregatesOf(e *env) aggregates {
	names := func(nis []*framework.NodeInfo, _ error) []string {
		var out []string
		for _, ni := range nis {
			out = append(out, ni.Node().Name)
		}
		return out
	}
	a := aggregates{
		Pods:             podsOnNodes(e),
		WithAffinity:     names(e.snapshot.HavePodsWithAffinityList()),
		WithAntiAffinity: names(e.snapshot.HavePodsWithRequiredAntiAffinityList()),
		ClaimUsed:        e.snapshot.IsPVCUsedByPods("default/claim"),
	}
	if pgs, err := e.snapshot.PodGroupStates().Get("default", "preemptor"); err == nil {
		a.PreemptorMembers, a.PreemptorSchedule = pgs.AllPodsCount(), pgs.ScheduledPodsCount()
	}
	return a
}
