package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// noDecisions is a WaitingPod store where nobody decided anything yet:
// ManualApproval holds every pod until the test allows or rejects it, as
// the WaitingPod reconciler does.
type noDecisions struct{}

func (noDecisions) Decision(context.Context, manualapproval.Query) (*manualapproval.Decision, error) {
	return nil, nil
}

// flakyName is a Permit plugin standing for any other: a quota, a license
// check, a plugin that rejects.
const flakyName = "Flaky"

// verdict is what flaky answers for one pod at Permit.
type verdict struct {
	reject bool
	// wait, when not zero, holds the pod that long, unless the test
	// allows it first.
	wait time.Duration
}

type flaky struct{ verdicts map[types.UID]verdict }

func (p *flaky) Name() string { return flakyName }

func (p *flaky) Permit(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	v := p.verdicts[pod.UID]
	switch {
	case v.reject:
		return framework.NewStatus(framework.Unschedulable, "flaky says no"), 0
	case v.wait > 0:
		return framework.NewStatus(framework.Wait), v.wait
	}
	return nil, 0
}

// withOthers registers ManualApproval with approvalArgs and, if verdicts is
// not nil, flaky.
func withOthers(approvalArgs string, verdicts map[types.UID]verdict) func(fwkruntime.Registry, *configv1.KubeSchedulerProfile) error {
	return func(r fwkruntime.Registry, profile *configv1.KubeSchedulerProfile) error {
		if err := manualapproval.Register(r, noDecisions{}); err != nil {
			return err
		}
		if approvalArgs != "" {
			profile.PluginConfig = append(profile.PluginConfig, configv1.PluginConfig{Name: manualapproval.Name, Args: runtime.RawExtension{Raw: []byte(approvalArgs)}})
		}
		if verdicts == nil {
			return nil
		}
		return r.Register(flakyName, func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
			return &flaky{verdicts: verdicts}, nil
		}, fwkruntime.ArgsSpec{})
	}
}

// cycle is one member's way through Permit and its binding cycle.
type cycle struct {
	state *framework.CycleState
	// done delivers whether the member was let through: at once, or after
	// its wait; a failure has run Unreserve, as the binding cycle does.
	done chan bool
}

// arrive runs Permit for pod as the scheduling cycle does (Unreserve on a
// rejection) and, when it waits, its binding cycle in the background.
func (e *env) arrive(pod *v1.Pod) *cycle {
	c := &cycle{state: framework.NewCycleState(), done: make(chan bool, 1)}
	ctx := context.Background()
	s := e.fwk.RunPermitPlugins(ctx, c.state, pod, "node-1")
	switch {
	case s.IsSuccess():
		c.done <- true
	case !s.IsWait():
		e.fwk.RunReservePluginsUnreserve(ctx, c.state, pod, "node-1")
		c.done <- false
	default:
		go func() {
			ok := e.fwk.WaitOnPermit(ctx, pod).IsSuccess()
			if !ok {
				e.fwk.RunReservePluginsUnreserve(ctx, c.state, pod, "node-1")
			}
			c.done <- ok
		}()
	}
	return c
}

// action is one step of TestNoPartialGangWithOtherPermitPlugins: a member
// arriving at Permit, or a decision on it.
type action struct {
	kind string
	pod  int
}

// wait returns whether the member was let through, failing the test if its
// cycle has not ended within d.
func (c *cycle) wait(t *testing.T, d time.Duration) bool {
	t.Helper()
	select {
	case ok := <-c.done:
		return ok
	case <-time.After(d):
		t.Fatalf("a member still waits at Permit after %v", d)
		return false
	}
}

// letGo reports whether ManualApproval and flaky surely let a member go,
// given flaky's verdict, the approval window and what the test decides for
// it, and nothing rejects it. A short window that rejects, or a flaky
// timeout, may or may not beat the decision.
func letGo(v verdict, window, onTimeout string, decisions []action) bool {
	has := func(kind string) bool {
		return slices.ContainsFunc(decisions, func(a action) bool { return a.kind == kind })
	}
	if has("reject") || has("delete") || v.reject {
		return false
	}
	if v.wait > 0 && (v.wait < time.Minute || !has("flaky")) {
		return false
	}
	if window == "1h" {
		return has("approve")
	}
	return onTimeout == "Approve"
}

// decide allows or rejects pod for plugin if it waits, as a person's
// decision or another plugin would.
func (e *env) decide(pod *v1.Pod, plugin string, allow bool) {
	wp := e.fwk.GetWaitingPod(pod.UID)
	if wp == nil {
		return
	}
	if allow {
		wp.Allow(plugin)
	} else {
		wp.Reject(plugin, "rejected at Permit by test")
	}
}

func (e *env) pending(t *testing.T, pod *v1.Pod) []string {
	t.Helper()
	wp := e.fwk.GetWaitingPod(pod.UID)
	if wp == nil {
		t.Fatalf("pod %s is not waiting", pod.Name)
	}
	return wp.GetPendingPlugins()
}

func TestGangWaitsForOtherPermitPlugins(t *testing.T) {
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("g3", "g").Obj()}
	newGang := func(t *testing.T) (*env, []*cycle) {
		e := newEnv(t, envConfig{groups: groupsOf(group("g", 3)), pods: pods,
			permit: []string{Name, manualapproval.Name}, register: withOthers("", nil)})
		var cycles []*cycle
		for _, p := range pods {
			cycles = append(cycles, e.arrive(p))
		}
		return e, cycles
	}

	t.Run("approved members wait for the last approval, and the gang goes together", func(t *testing.T) {
		e, cycles := newGang(t)
		e.decide(pods[0], manualapproval.Name, true)
		e.decide(pods[1], manualapproval.Name, true)
		for _, p := range pods[:2] {
			if diff := cmp.Diff([]string{Name}, e.pending(t, p)); diff != "" {
				t.Errorf("%s is held by (-want +got):\n%s", p.Name, diff)
			}
			if diff := cmp.Diff("2/3 members assigned, 1 more held by other Permit plugins", e.message(t, p)); diff != "" {
				t.Errorf("%s's message (-want +got):\n%s", p.Name, diff)
			}
		}
		e.decide(pods[2], manualapproval.Name, true)
		for i, c := range cycles {
			if !<-c.done {
				t.Errorf("%s was not let through", pods[i].Name)
			}
		}
	})

	t.Run("rejecting the last member releases the approved ones", func(t *testing.T) {
		e, cycles := newGang(t)
		e.decide(pods[0], manualapproval.Name, true)
		e.decide(pods[1], manualapproval.Name, true)
		e.decide(pods[2], manualapproval.Name, false)
		for i, c := range cycles {
			if <-c.done {
				t.Errorf("%s was let through, want the whole gang released", pods[i].Name)
			}
		}
	})
}

// TestLetGoMembersAreNotHeld: members the gang let go count once, as let
// through, while their binding cycles have not yet taken them out of the
// waiting pods.
func TestLetGoMembersAreNotHeld(t *testing.T) {
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("extra", "g").Obj(), member("late", "g").Obj()}
	e := newEnv(t, envConfig{groups: groupsOf(group("g", 2)), pods: pods,
		permit: []string{Name, manualapproval.Name}, register: withOthers("", nil)})
	hold := func(p *v1.Pod) {
		t.Helper()
		if s := e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), p, "node-1"); !s.IsWait() {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
	}
	for _, p := range pods[:3] {
		hold(p)
	}
	e.decide(pods[0], manualapproval.Name, true)
	e.decide(pods[1], manualapproval.Name, true)
	if got := e.fwk.GetWaitingPod(pods[0].UID).GetPendingPlugins(); len(got) != 0 {
		t.Fatalf("g1 is held by %v, want it let go with g2", got)
	}
	// No binding cycle took g1 and g2 out of the waiting pods yet.
	hold(pods[3])
	for _, p := range pods[2:] {
		if diff := cmp.Diff("2/2 members assigned, 2 more held by other Permit plugins", e.message(t, p)); diff != "" {
			t.Errorf("%s's message (-want +got):\n%s", p.Name, diff)
		}
	}
}

func TestQuorumCountsOnlyPodsOfThisProfile(t *testing.T) {
	tests := []struct {
		name  string
		bound *v1.Pod
		want  *framework.Status
	}{
		{
			name:  "a member bound by this profile counts",
			bound: member("bound", "g").SchedulerName(v1.DefaultSchedulerName).Node("n1").Obj(),
		},
		{
			name:  "a pod with the label bound by another scheduler does not",
			bound: member("bound", "g").SchedulerName("other-scheduler").Node("n1").Obj(),
			want:  framework.NewStatus(framework.Wait),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := member("p", "g").Obj()
			e := newEnv(t, envConfig{groups: groupsOf(group("g", 2)), pods: []*v1.Pod{tt.bound, pod}})
			got := e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), pod, "node-1")
			if got.IsWait() != tt.want.IsWait() || !got.IsWait() && !got.IsSuccess() {
				t.Fatalf("Permit = %v, want %v", got, tt.want)
			}
			if got.IsWait() {
				e.fwk.RejectWaitingPod(pod.UID)
			}
		})
	}
}

// TestNoPartialGangWithOtherPermitPlugins runs a gang through Coscheduling,
// ManualApproval and flaky, in an order drawn per seed, while approvals,
// rejections, flaky's releases and deletions come in random order against
// short approval windows and flaky timeouts, and binding cycles unreserve
// failed members concurrently. Whatever happens, either every member is let
// through or none is.
func TestNoPartialGangWithOtherPermitPlugins(t *testing.T) {
	const rounds = 300
	outcomes := map[int]int{}
	mustGoRounds := 0
	for seed := range uint64(rounds) {
		rng := rand.New(rand.NewPCG(seed, 1))
		minMember := 2 + rng.IntN(3)
		pods := make([]*v1.Pod, minMember)
		verdicts := map[types.UID]verdict{}
		for i := range pods {
			pods[i] = member(fmt.Sprintf("s%d-m%d", seed, i), "g").Obj()
			switch r := rng.IntN(20); {
			case r == 0:
				verdicts[pods[i].UID] = verdict{reject: true}
			case r < 4:
				verdicts[pods[i].UID] = verdict{wait: time.Duration(1+rng.IntN(20)) * time.Millisecond}
			case r < 12:
				verdicts[pods[i].UID] = verdict{wait: time.Minute}
			}
		}
		permit := []string{Name, manualapproval.Name, flakyName}
		rng.Shuffle(len(permit), func(i, j int) { permit[i], permit[j] = permit[j], permit[i] })
		window, onTimeout := []string{"1h", "1h", "1ms", "5ms", "15ms"}[rng.IntN(5)], []string{"Reject", "Approve"}[rng.IntN(2)]
		approvalArgs := fmt.Sprintf(`{"approvalWindow": %q, "onTimeout": %q}`, window, onTimeout)
		e := newEnv(t, envConfig{groups: groupsOf(group("g", int32(minMember))), pods: pods,
			permit: permit, register: withOthers(approvalArgs, verdicts)})

		// Each member arrives, then its decisions come in any order; the
		// members' sequences interleave at random.
		queues := make([][]action, len(pods))
		// mustGo is whether every plugin lets every member go: then the
		// whole gang must go, and soon.
		mustGo := true
		for i := range pods {
			var decisions []action
			if rng.IntN(10) < 9 {
				decisions = append(decisions, action{"approve", i})
			}
			if rng.IntN(10) < 9 {
				decisions = append(decisions, action{"flaky", i})
			}
			switch rng.IntN(30) {
			case 0:
				decisions = append(decisions, action{"reject", i})
			case 1:
				decisions = append(decisions, action{"delete", i})
			}
			rng.Shuffle(len(decisions), func(a, b int) { decisions[a], decisions[b] = decisions[b], decisions[a] })
			queues[i] = append([]action{{"arrive", i}}, decisions...)
			if !letGo(verdicts[pods[i].UID], window, onTimeout, decisions) {
				mustGo = false
			}
		}
		var actions []action
		for left := len(pods); left > 0; {
			i := rng.IntN(len(queues))
			if len(queues[i]) == 0 {
				continue
			}
			actions = append(actions, queues[i][0])
			if queues[i] = queues[i][1:]; len(queues[i]) == 0 {
				left--
			}
		}

		cycles := make([]*cycle, len(pods))
		for _, a := range actions {
			pod := pods[a.pod]
			switch a.kind {
			case "arrive":
				cycles[a.pod] = e.arrive(pod)
			case "approve":
				e.decide(pod, manualapproval.Name, true)
			case "flaky":
				e.decide(pod, flakyName, true)
			case "reject":
				e.decide(pod, manualapproval.Name, false)
			case "delete":
				e.fwk.RejectWaitingPod(pod.UID)
			}
			if rng.IntN(3) == 0 {
				time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
			}
		}
		through := 0
		if mustGo {
			for i, c := range cycles {
				if !c.wait(t, 5*time.Second) {
					t.Fatalf("seed %d (permit order %v, %s): %s was not let through, want every plugin to have let the gang go", seed, permit, approvalArgs, pods[i].Name)
				}
				through++
			}
		} else {
			// Members still held may wait for a decision that never
			// comes: retiring the instance releases them.
			_ = e.fwk.Close()
			for _, c := range cycles {
				if c != nil && <-c.done {
					through++
				}
			}
		}
		if through != 0 && through != minMember {
			t.Fatalf("seed %d (permit order %v, %s): %d of %d members let through, want all or none", seed, permit, approvalArgs, through, minMember)
		}
		outcomes[through/minMember]++
		if mustGo {
			mustGoRounds++
		}
	}
	// The property must have been tested both ways.
	if outcomes[0] == 0 || outcomes[1] == 0 {
		t.Fatalf("rounds with no member / the whole gang let through: %d / %d, want some of each", outcomes[0], outcomes[1])
	}
	if mustGoRounds == 0 {
		t.Fatal("no round where every plugin lets every member go")
	}
	t.Logf("rounds with no member / the whole gang let through: %d / %d (%d where it had to)", outcomes[0], outcomes[1], mustGoRounds)
}

// TestNoPartialGangRacingDecisions races approvals of every member of a
// gang held by Coscheduling and ManualApproval against the rejection of one:
// either the whole gang goes or none of it.
func TestNoPartialGangRacingDecisions(t *testing.T) {
	const minMember = 4
	for round := range 50 {
		pods := make([]*v1.Pod, minMember)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("r%d-m%d", round, i), "g").Obj()
		}
		e := newEnv(t, envConfig{groups: groupsOf(group("g", minMember)), pods: pods,
			permit: []string{Name, manualapproval.Name}, register: withOthers("", nil)})
		cycles := make([]*cycle, minMember)
		for i, p := range pods {
			cycles[i] = e.arrive(p)
		}
		var wg sync.WaitGroup
		for _, p := range pods {
			wg.Go(func() { e.decide(p, manualapproval.Name, true) })
		}
		wg.Go(func() { e.decide(pods[round%minMember], manualapproval.Name, false) })
		wg.Wait()
		// Every member was decided: either the gang went before the
		// rejection, or the rejected member's Unreserve took the others
		// back. None may be left waiting.
		through := 0
		for _, c := range cycles {
			if c.wait(t, 5*time.Second) {
				through++
			}
		}
		if through != 0 && through != minMember {
			t.Fatalf("round %d: %d of %d members let through, want all or none", round, through, minMember)
		}
	}
}

// TestPermitActivatesSiblingsWithoutNodes: a member activates its siblings
// while too few members have a node for it to complete the gang, counting
// those another Permit plugin holds, since only siblings without a node
// need their turn; one that may complete the gang activates none.
func TestPermitActivatesSiblingsWithoutNodes(t *testing.T) {
	tests := []struct {
		name string
		// placed are the members already on a node: bound, or held at
		// Permit by Coscheduling and ManualApproval.
		bound, held  int
		wantActivate []string
	}{
		{name: "the first member", wantActivate: []string{"default/m1", "default/m2", "default/m3"}},
		{name: "one member held", held: 1, wantActivate: []string{"default/m0", "default/m2", "default/m3"}},
		{name: "enough members held by another plugin too", held: 3},
		{name: "enough members bound or held", bound: 2, held: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := make([]*v1.Pod, 4)
			for i := range pods {
				w := member(fmt.Sprintf("m%d", i), "g")
				if i < tt.bound {
					w = w.SchedulerName(v1.DefaultSchedulerName).Node("n1")
				}
				pods[i] = w.Obj()
			}
			e := newEnv(t, envConfig{groups: groupsOf(group("g", 4)), pods: pods,
				permit: []string{Name, manualapproval.Name}, register: withOthers("", nil)})
			for _, p := range pods[tt.bound : tt.bound+tt.held] {
				e.arrive(p)
			}
			pod := pods[tt.bound+tt.held]
			state := framework.NewCycleState()
			state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
			if s := e.fwk.RunPermitPlugins(context.Background(), state, pod, "node-1"); !s.IsWait() {
				t.Fatalf("Permit(%s) = %v, want Wait", pod.Name, s)
			}
			toActivate, err := framework.ReadAs[*framework.PodsToActivate](state, framework.PodsToActivateKey)
			if err != nil {
				t.Fatal(err)
			}
			got := sortedKeys(toActivate.Take())
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.wantActivate, got); diff != "" {
				t.Errorf("activated siblings (-want +got):\n%s", diff)
			}
		})
	}
}
