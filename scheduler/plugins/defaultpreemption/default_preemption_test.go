package defaultpreemption

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

func TestArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    *configv1.DefaultPreemptionArgs
		wantErr string
	}{
		{name: "defaults", args: &configv1.DefaultPreemptionArgs{}},
		{name: "absolute only", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](0), MinCandidateNodesAbsolute: ptr.To[int32](5)}},
		{name: "percentage above 100", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](101)},
			wantErr: "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"},
		{name: "negative absolute", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesAbsolute: ptr.To[int32](-1)},
			wantErr: "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"},
		{name: "both zero", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](0), MinCandidateNodesAbsolute: ptr.To[int32](0)},
			wantErr: "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, " +
				"minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if tt.wantErr == "" {
				// The runtime defaults the args and the instance must build.
				e := newEnv(t, envConfig{args: tt.args})
				if e.pl == nil {
					t.Fatal("plugin not built")
				}
			} else if err := ValidateArgs(tt.args); err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.wantErr) {
				t.Errorf("error = %q, want one containing %q", got, tt.wantErr)
			}
		})
	}
	e := newEnv(t, envConfig{})
	if e.pl.minCandidateNodesPercentage != 10 || e.pl.minCandidateNodesAbsolute != 100 {
		t.Errorf("defaults = %d%%, %d; want 10%%, 100", e.pl.minCandidateNodesPercentage, e.pl.minCandidateNodesAbsolute)
	}
}

func TestCalculateNumCandidates(t *testing.T) {
	tests := []struct {
		name                  string
		percentage, absolute  int32
		numNodes, wantNumCand int32
	}{
		{name: "percentage above absolute", percentage: 50, absolute: 10, numNodes: 100, wantNumCand: 50},
		{name: "absolute above percentage", percentage: 10, absolute: 50, numNodes: 100, wantNumCand: 50},
		{name: "never more than the nodes", percentage: 10, absolute: 100, numNodes: 50, wantNumCand: 50},
		{name: "upstream defaults at 5000 nodes", percentage: 10, absolute: 100, numNodes: 5000, wantNumCand: 500},
		{name: "percentage only", percentage: 20, absolute: 0, numNodes: 1000, wantNumCand: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &defaultPreemption{minCandidateNodesPercentage: tt.percentage, minCandidateNodesAbsolute: tt.absolute}
			if got := pl.calculateNumCandidates(tt.numNodes); got != tt.wantNumCand {
				t.Errorf("calculateNumCandidates(%d) = %d, want %d", tt.numNodes, got, tt.wantNumCand)
			}
		})
	}
}

func TestEventsToRegister(t *testing.T) {
	e := newEnv(t, envConfig{})
	events, err := e.pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Event != (framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}) {
		t.Fatalf("events = %v", events)
	}
	if h, _ := events[0].QueueingHintFn(klog.Background(), nil, nil, nil); h != framework.QueueSkip {
		t.Errorf("hint = %v, want QueueSkip", h)
	}
}

func TestPostFilter(t *testing.T) {
	// terminating is a victim of an earlier preemption, on n1.
	terminating := func(cpuQ string) *v1.Pod {
		p := placed("old", "n1", 1, cpuQ, 0).Obj()
		p.DeletionTimestamp = &metav1.Time{}
		p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
		return p
	}
	webAnti := v1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: v1.LabelHostname}

	tests := []struct {
		name        string
		nodes       []*v1.Node
		pods        []*v1.Pod
		pdbs        []*policy.PodDisruptionBudget
		preemptor   *v1.Pod
		wantNode    string
		wantResult  bool
		wantCode    framework.Code
		wantMessage string
		wantVictims []string
	}{
		{
			name:  "preemptionPolicy Never does not preempt",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods:  []*v1.Pod{placed("low", "n1", 1, "2", 0).Obj()},
			preemptor: func() *v1.Pod {
				p := preemptor(10, "1").Obj()
				p.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
				return p
			}(),
			wantCode:    framework.Unschedulable,
			wantMessage: "preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name:        "pods of equal or higher priority are never victims",
			nodes:       []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods:        []*v1.Pod{placed("same", "n1", 10, "2", 0).Obj(), placed("high", "n2", 20, "2", 0).Obj()},
			preemptor:   preemptor(10, "1").Obj(),
			wantResult:  true,
			wantCode:    framework.Unschedulable,
			wantMessage: "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		},
		{
			name:  "nodes rejected as unresolvable are not candidates",
			nodes: []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods:  []*v1.Pod{placed("low", "n1", 1, "1", 0).Obj()},
			// No node has a zone label: spreading rejects both as unresolvable.
			preemptor:   preemptor(10, "1").Label("app", "web").SpreadConstraint(1, v1.LabelTopologyZone, v1.DoNotSchedule, "app", "web").Obj(),
			wantResult:  true,
			wantCode:    framework.Unschedulable,
			wantMessage: "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		},
		{
			name:  "the pod must fit once every lower-priority pod is gone",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods:  []*v1.Pod{placed("low", "n1", 1, "1", 0).Obj(), placed("high", "n1", 20, "1", 0).Obj()},
			// 2 cpu cannot fit next to the high-priority pod.
			preemptor:   preemptor(10, "2").Obj(),
			wantResult:  true,
			wantCode:    framework.Unschedulable,
			wantMessage: "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name:  "victims are the least important pods that make room",
			nodes: []*v1.Node{makeNode("n1", "3").Obj()},
			pods: []*v1.Pod{
				placed("p1", "n1", 1, "1", 0).Obj(),
				placed("p2", "n1", 2, "1", 0).Obj(),
				placed("p3", "n1", 3, "1", 0).Obj(),
			},
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"p1", "p2"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 2 victims",
		},
		{
			name:  "among equal priorities the pod that ran longest is kept",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods: []*v1.Pod{
				placed("older", "n1", 1, "1", 0).Obj(),
				placed("newer", "n1", 1, "1", 5).Obj(),
			},
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"newer"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:        "the node with the lowest highest-priority victim wins",
			nodes:       []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods:        []*v1.Pod{placed("five", "n1", 5, "2", 0).Obj(), placed("three", "n2", 3, "2", 0).Obj()},
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"three"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:  "then the lowest sum of victim priorities",
			nodes: []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods: []*v1.Pod{
				placed("a3", "n1", 3, "1", 0).Obj(), placed("a2", "n1", 2, "1", 0).Obj(),
				placed("b3", "n2", 3, "1", 0).Obj(), placed("b1", "n2", 1, "1", 0).Obj(),
			},
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"b3", "b1"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 2 victims",
		},
		{
			name:  "then the latest start among the highest-priority victims",
			nodes: []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods: []*v1.Pod{
				placed("early", "n1", 3, "2", 0).Obj(),
				placed("late", "n2", 3, "2", 10).Obj(),
			},
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"late"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:  "fewest PodDisruptionBudget violations come first",
			nodes: []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods: []*v1.Pod{
				placed("guarded", "n1", 1, "2", 0).Label("app", "db").Obj(),
				placed("higher", "n2", 5, "2", 0).Obj(),
			},
			pdbs:        []*policy.PodDisruptionBudget{pdb("db", map[string]string{"app": "db"}, 0)},
			preemptor:   preemptor(10, "2").Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"higher"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:  "a pod whose eviction violates a budget is reprieved first",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods: []*v1.Pod{
				// "free" is more important (it started earlier) but is
				// evicted because "guarded" is protected by its budget.
				placed("free", "n1", 1, "1", 0).Obj(),
				placed("guarded", "n1", 1, "1", 5).Label("app", "db").Obj(),
			},
			pdbs:        []*policy.PodDisruptionBudget{pdb("db", map[string]string{"app": "db"}, 0)},
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"free"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:  "pods already counted as disrupted do not use up the budget",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods: []*v1.Pod{
				placed("free", "n1", 1, "1", 0).Obj(),
				placed("guarded", "n1", 1, "1", 5).Label("app", "db").Obj(),
			},
			pdbs: []*policy.PodDisruptionBudget{func() *policy.PodDisruptionBudget {
				b := pdb("db", map[string]string{"app": "db"}, 0)
				b.Status.DisruptedPods = map[string]metav1.Time{"guarded": {}}
				return b
			}()},
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"guarded"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:  "budgets are violated when nothing else helps",
			nodes: []*v1.Node{makeNode("n1", "2").Obj()},
			pods: []*v1.Pod{
				placed("guarded", "n1", 1, "2", 0).Label("app", "db").Obj(),
			},
			pdbs:        []*policy.PodDisruptionBudget{pdb("db", map[string]string{"app": "db"}, 0)},
			preemptor:   preemptor(10, "1").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"guarded"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 1 victims",
		},
		{
			name:        "a victim of an earlier preemption still terminating on the nominated node: wait",
			nodes:       []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()},
			pods:        []*v1.Pod{terminating("2"), placed("low", "n2", 1, "2", 0).Obj()},
			preemptor:   preemptor(10, "1").NominatedNodeName("n1").Obj(),
			wantCode:    framework.Unschedulable,
			wantMessage: "preemption: not eligible due to a terminating pod on the nominated node.",
		},
		{
			name: "a nominated node that became unresolvable does not hold the pod back",
			nodes: []*v1.Node{
				makeNode("n1", "2").Obj(),
				makeNode("n2", "2").Label(v1.LabelTopologyZone, "a").Obj(),
			},
			// n1 has room but no zone label: spreading makes it unresolvable.
			pods:        []*v1.Pod{terminating("1"), placed("low", "n2", 1, "2", 0).Obj()},
			preemptor:   preemptor(10, "1").NominatedNodeName("n1").Label("app", "web").SpreadConstraint(1, v1.LabelTopologyZone, v1.DoNotSchedule, "app", "web").Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"low"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
		{
			name:  "spreading decides the victims through the PreFilter extensions",
			nodes: []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "1").Obj()},
			pods: []*v1.Pod{
				placed("w1", "n1", 1, "1", 0).Label("app", "web").Obj(),
				placed("w2", "n1", 1, "1", 5).Label("app", "web").Obj(),
				placed("busy", "n2", 20, "1", 0).Obj(),
			},
			// One cpu would be enough on n1, but maxSkew 1 against n2's 0
			// web pods allows no web pod to stay.
			preemptor:   preemptor(10, "1").Label("app", "web").SpreadConstraint(1, v1.LabelHostname, v1.DoNotSchedule, "app", "web").Obj(),
			wantNode:    "n1",
			wantResult:  true,
			wantVictims: []string{"w1", "w2"},
			wantMessage: "preemption: found a potential placement for pod on node n1, preempting 2 victims",
		},
		{
			name:  "anti-affinity decides the victims through the PreFilter extensions",
			nodes: []*v1.Node{makeNode("n1", "4").Obj(), makeNode("n2", "4").Obj()},
			pods: []*v1.Pod{
				placed("web1", "n1", 1, "1", 0).Label("app", "web").Obj(),
				placed("db1", "n1", 1, "1", 0).Label("app", "db").Obj(),
				placed("web2", "n2", 1, "1", 10).Label("app", "web").Obj(),
			},
			preemptor:   preemptor(10, "1").PodAntiAffinity(webAnti).Obj(),
			wantNode:    "n2",
			wantResult:  true,
			wantVictims: []string{"web2"},
			wantMessage: "preemption: found a potential placement for pod on node n2, preempting 1 victims",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{nodes: tt.nodes, pods: append(append([]*v1.Pod(nil), tt.pods...), tt.preemptor), pdbs: tt.pdbs, parallelism: 1})
			result, status := e.filterAndPostFilter(t, tt.preemptor)
			e.pl.inFlight.Wait()

			wantCode := tt.wantCode
			if tt.wantNode != "" {
				wantCode = framework.Success
			}
			if status.Code() != wantCode || status.Message() != tt.wantMessage {
				t.Fatalf("status = %v %q, want %v %q", status.Code(), status.Message(), wantCode, tt.wantMessage)
			}
			var wantResult *framework.PostFilterResult
			if tt.wantResult {
				wantResult = &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatedNodeName: tt.wantNode, NominatingMode: framework.ModeOverride}}
			}
			if diff := cmp.Diff(wantResult, result); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sets.New(tt.wantVictims...), deletedPods(e)); diff != "" {
				t.Errorf("deleted pods (-want +got):\n%s", diff)
			}
		})
	}
}

// deletedPods returns the names of the pods deleted through the client.
func deletedPods(e *env) sets.Set[string] {
	out := sets.New[string]()
	for _, a := range e.cs.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().Resource == "pods" {
			out.Insert(d.GetName())
		}
	}
	return out
}

// TestMinCandidateNodes checks that the dry run stops after enough
// candidates: with one candidate wanted, the first node that can help is
// nominated even though a cheaper one comes later.
func TestMinCandidateNodes(t *testing.T) {
	nodes := []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj(), makeNode("n3", "2").Obj()}
	pods := []*v1.Pod{
		placed("five", "n1", 5, "2", 0).Obj(),
		placed("four", "n2", 4, "2", 0).Obj(),
		placed("one", "n3", 1, "2", 0).Obj(),
	}
	tests := []struct {
		name     string
		args     *configv1.DefaultPreemptionArgs
		wantNode string
	}{
		{name: "defaults evaluate every node", wantNode: "n3"},
		{name: "one candidate is enough", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](0), MinCandidateNodesAbsolute: ptr.To[int32](1)}, wantNode: "n1"},
		{name: "two candidates", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](0), MinCandidateNodesAbsolute: ptr.To[int32](2)}, wantNode: "n2"},
		{name: "percentage", args: &configv1.DefaultPreemptionArgs{MinCandidateNodesPercentage: ptr.To[int32](67), MinCandidateNodesAbsolute: ptr.To[int32](0)}, wantNode: "n2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := preemptor(10, "2").Obj()
			e := newEnv(t, envConfig{nodes: nodes, pods: append(append([]*v1.Pod(nil), pods...), p), args: tt.args, parallelism: 1})
			result, status := e.filterAndPostFilter(t, p)
			if !status.IsSuccess() {
				t.Fatalf("status = %v", status)
			}
			if got := result.NominatedNodeName; got != tt.wantNode {
				t.Errorf("nominated %q, want %q", got, tt.wantNode)
			}
		})
	}
}

func TestFilterVictimsWithPDBViolation(t *testing.T) {
	pod := func(name string, labels ...string) *framework.PodInfo {
		p := placed(name, "n1", 1, "1", 0)
		for _, l := range labels {
			p.Label(l, "")
		}
		pi, err := framework.NewPodInfo(p.Obj())
		if err != nil {
			t.Fatal(err)
		}
		return pi
	}
	inOtherNamespace := pdb("other", map[string]string{"a": ""}, 0)
	inOtherNamespace.Namespace = "other"
	emptySelector := pdb("empty", nil, 0)
	disrupted := pdb("disrupted", map[string]string{"a": ""}, 0)
	disrupted.Status.DisruptedPods = map[string]metav1.Time{"p1": {}}

	tests := []struct {
		name             string
		pods             []*framework.PodInfo
		pdbs             []*policy.PodDisruptionBudget
		wantViolating    []string
		wantNonViolating []string
	}{
		{
			name:             "no budgets",
			pods:             []*framework.PodInfo{pod("p1", "a"), pod("p2")},
			wantNonViolating: []string{"p1", "p2"},
		},
		{
			name:             "the allowance is used up in the pods' order",
			pods:             []*framework.PodInfo{pod("p1", "a"), pod("p2", "a"), pod("p3", "a")},
			pdbs:             []*policy.PodDisruptionBudget{pdb("x", map[string]string{"a": ""}, 1)},
			wantViolating:    []string{"p2", "p3"},
			wantNonViolating: []string{"p1"},
		},
		{
			name:             "pods without labels, in another namespace or under an empty selector match nothing",
			pods:             []*framework.PodInfo{pod("p1"), pod("p2", "a")},
			pdbs:             []*policy.PodDisruptionBudget{inOtherNamespace, emptySelector},
			wantNonViolating: []string{"p1", "p2"},
		},
		{
			name:             "a pod already counted as disrupted does not use up the budget",
			pods:             []*framework.PodInfo{pod("p1", "a"), pod("p2", "a")},
			pdbs:             []*policy.PodDisruptionBudget{disrupted},
			wantViolating:    []string{"p2"},
			wantNonViolating: []string{"p1"},
		},
		{
			// 1.36 also charged p1 to y, so p2 violated y too.
			name:             "a pod stops at the first budget it violates",
			pods:             []*framework.PodInfo{pod("p1", "a", "b"), pod("p2", "b")},
			pdbs:             []*policy.PodDisruptionBudget{pdb("x", map[string]string{"a": ""}, 0), pdb("y", map[string]string{"b": ""}, 1)},
			wantViolating:    []string{"p1"},
			wantNonViolating: []string{"p2"},
		},
		{
			name:          "budgets before the violated one are charged",
			pods:          []*framework.PodInfo{pod("p1", "a", "b"), pod("p2", "b")},
			pdbs:          []*policy.PodDisruptionBudget{pdb("y", map[string]string{"b": ""}, 1), pdb("x", map[string]string{"a": ""}, 0)},
			wantViolating: []string{"p1", "p2"},
		},
	}
	names := func(vs []*victim) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.pods[0].Pod.Name)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var victims []*victim
			for _, pi := range tt.pods {
				victims = append(victims, newPodVictim(pi, nil, time.Now()))
			}
			violatingVictims, nonViolating := filterVictimsWithPDBViolation(victims, tt.pdbs)
			var violating []*victim
			for _, vv := range violatingVictims {
				violating = append(violating, vv.victim)
			}
			if diff := cmp.Diff(tt.wantViolating, names(violating)); diff != "" {
				t.Errorf("violating (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNonViolating, names(nonViolating)); diff != "" {
				t.Errorf("non-violating (-want +got):\n%s", diff)
			}
		})
	}
}
