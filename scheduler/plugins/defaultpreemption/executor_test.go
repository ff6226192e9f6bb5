package defaultpreemption

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// statusPatches returns, per pod name, the status the pod was patched with.
func statusPatches(t *testing.T, e *env) map[string]v1.PodStatus {
	t.Helper()
	out := map[string]v1.PodStatus{}
	for _, a := range e.cs.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetSubresource() != "status" {
			continue
		}
		var pod v1.Pod
		if err := json.Unmarshal(p.GetPatch(), &pod); err != nil {
			t.Fatalf("patch of %s: %v", p.GetName(), err)
		}
		out[p.GetName()] = pod.Status
	}
	return out
}

// checkDisruptionTarget checks the DisruptionTarget condition pod's status
// was patched with: the scheduler's reason, message, and the pod's
// generation.
func checkDisruptionTarget(t *testing.T, patches map[string]v1.PodStatus, pod, message string, generation int64) {
	t.Helper()
	var cond *v1.PodCondition
	for i := range patches[pod].Conditions {
		if c := &patches[pod].Conditions[i]; c.Type == v1.DisruptionTarget {
			cond = c
		}
	}
	if cond == nil {
		t.Fatalf("%s got no DisruptionTarget condition; patches: %v", pod, patches)
	}
	want := v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
		Message: message, ObservedGeneration: generation,
	}
	cond.LastTransitionTime = want.LastTransitionTime
	if diff := cmp.Diff(want, *cond); diff != "" {
		t.Errorf("condition (-want +got):\n%s", diff)
	}
}

func drainEvents(e *env) []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestActuation(t *testing.T) {
	victim := placed("victim", "n1", 1, "2", 0).Obj()
	victim.Generation = 3
	// A pod of lower priority than the preemptor nominated to the same node.
	nominatedLow := st.MakePod().Name("nominated").Priority(5).Req(cpu("1")).NominatedNodeName("n1").Obj()
	// One of higher priority keeps its nomination.
	nominatedHigh := st.MakePod().Name("nominated-high").Priority(50).Req(cpu("1")).NominatedNodeName("n1").Obj()
	p := preemptor(10, "1").Obj()
	e := newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{victim, nominatedLow, nominatedHigh, p}})
	for _, n := range []*v1.Pod{nominatedLow, nominatedHigh} {
		pi, _ := framework.NewPodInfo(n)
		e.nominator.AddNominatedPod(klog.Background(), pi, nil)
	}

	// Hold the deletion so the preemption is observably in flight.
	release := make(chan struct{})
	e.cs.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		<-release
		return false, nil, nil
	})
	ctx := context.Background()
	// The nominated high-priority pod takes 1 of the 2 cpu in the
	// preemptor's filters, so the victim must go.
	result, status := e.filterAndPostFilter(t, p)
	if !status.IsSuccess() || result.NominatedNodeName != "n1" {
		t.Fatalf("PostFilter = %v, %v", result, status)
	}
	if s := e.pl.PreEnqueue(ctx, p); s.Code() != framework.UnschedulableAndUnresolvable {
		t.Errorf("PreEnqueue while evicting = %v, want UnschedulableAndUnresolvable", s)
	}
	if s := e.pl.PreEnqueue(ctx, nominatedLow); !s.IsSuccess() {
		t.Errorf("PreEnqueue of another pod = %v, want Success", s)
	}
	close(release)
	e.pl.inFlight.Wait()
	if s := e.pl.PreEnqueue(ctx, p); !s.IsSuccess() {
		t.Errorf("PreEnqueue after eviction = %v, want Success", s)
	}

	if diff := cmp.Diff([]string{"victim"}, sets.List(deletedPods(e))); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	patches := statusPatches(t, e)
	checkDisruptionTarget(t, patches, "victim", "default-scheduler: preempting to accommodate a higher priority pod", 3)
	if st, ok := patches["nominated"]; !ok || st.NominatedNodeName != "" {
		t.Errorf("the lower-priority nominated pod was not cleared: %v", patches)
	}
	if _, ok := patches["nominated-high"]; ok {
		t.Errorf("the higher-priority nominated pod was cleared")
	}
	if diff := cmp.Diff([]string{"Normal Preempted Preempted by pod preemptor on node n1"}, drainEvents(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The victim's deletion event requeues the preemptor.
	if len(e.activator.pods) != 0 {
		t.Errorf("activated %v after a deletion, want none", e.activator.pods)
	}
}

func TestActuationOfWaitingPod(t *testing.T) {
	waiting := placed("waiting", "n1", 1, "2", 0).Label("wait", "").Obj()
	p := preemptor(10, "1").Obj()
	e := newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{waiting, p}})
	ctx := context.Background()
	if s := e.fwk.RunPermitPlugins(ctx, framework.NewCycleState(), waiting, "n1"); !s.IsWait() {
		t.Fatalf("Permit = %v, want Wait", s)
	}
	done := make(chan *framework.Status, 1)
	go func() { done <- e.fwk.WaitOnPermit(ctx, waiting) }()

	if _, status := e.filterAndPostFilter(t, p); !status.IsSuccess() {
		t.Fatalf("PostFilter = %v", status)
	}
	e.pl.inFlight.Wait()
	select {
	case s := <-done:
		if s.Code() != framework.Error || !strings.Contains(s.Message(), "preempted") {
			t.Errorf("the waiting pod ended with %v %q, want Error preempted", s.Code(), s.Message())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting pod was not preempted")
	}
	if got := deletedPods(e); got.Len() != 0 {
		t.Errorf("a waiting pod is rejected in memory, not deleted; deleted %v", got)
	}
	if diff := cmp.Diff([]string{"Normal Preempted Preempted by pod preemptor on node n1 (in kube-scheduler memory)."}, drainEvents(e)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// No deletion event will let the preemptor through PreEnqueue: it is
	// moved to the active queue when the goroutine ends.
	if diff := cmp.Diff([]string{"default/preemptor"}, e.activator.pods); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
}

// A victim whose binding cycle is in PreBind is cancelled in memory, as
// upstream: its PreBind context ends with "preempted by DefaultPreemption",
// nothing is deleted, and the preemptor is moved to the active queue since
// no deletion event will come. Once the binding cycle marked the victim
// prebound, its binding may be on its way: it is deleted like a bound pod.
func TestActuationOfPodInPreBind(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prebound bool
	}{
		{name: "in PreBind"},
		{name: "marked prebound", prebound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim := placed("victim", "n1", 1, "2", 0).Obj()
			p := preemptor(10, "1").Obj()
			e := newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{victim, p}})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			e.fwk.AddPodInPreBind(victim.UID, cancel)
			defer e.fwk.RemovePodInPreBind(victim.UID)
			if tc.prebound && !e.fwk.GetPodInPreBind(victim.UID).MarkPrebound() {
				t.Fatal("MarkPrebound = false before any preemption")
			}
			// The victim's binding cycle: once cancelled, it gives the
			// room back and leaves. Until then the preemptor stays out.
			left := make(chan []string, 1)
			go func() {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
				}
				left <- e.activator.activated()
				e.fwk.RemovePodInPreBind(victim.UID)
			}()

			if _, status := e.filterAndPostFilter(t, p); !status.IsSuccess() {
				t.Fatalf("PostFilter = %v", status)
			}
			e.pl.inFlight.Wait()

			wantCause, wantDeleted, wantActivated := "preempted by DefaultPreemption", []string(nil), []string{"default/preemptor"}
			wantEvents := []string{"Normal Preempted Preempted by pod preemptor on node n1 (in kube-scheduler memory)."}
			if tc.prebound {
				wantCause, wantDeleted, wantActivated = "", []string{"victim"}, nil
				wantEvents = []string{"Normal Preempted Preempted by pod preemptor on node n1"}
			}
			gotCause := ""
			if err := context.Cause(ctx); err != nil {
				gotCause = err.Error()
			}
			if gotCause != wantCause {
				t.Errorf("PreBind context cause = %q, want %q", gotCause, wantCause)
			}
			if diff := cmp.Diff(wantDeleted, sets.List(deletedPods(e)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantEvents, drainEvents(e)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantActivated, e.activator.pods); diff != "" {
				t.Errorf("activated (-want +got):\n%s", diff)
			}
			if !tc.prebound {
				if got := <-left; len(got) != 0 {
					t.Errorf("activated %v before the victim left its binding cycle", got)
				}
			}
		})
	}
}

func TestActuationFailureRequeuesThePreemptor(t *testing.T) {
	p := preemptor(10, "2").Obj()
	e := newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{
		placed("v1", "n1", 1, "1", 0).Obj(), placed("v2", "n1", 1, "1", 1).Obj(), p,
	}})
	e.cs.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if _, status := e.filterAndPostFilter(t, p); !status.IsSuccess() {
		t.Fatalf("PostFilter = %v", status)
	}
	e.pl.inFlight.Wait()
	if diff := cmp.Diff([]string{"default/preemptor"}, e.activator.pods); diff != "" {
		t.Errorf("activated (-want +got):\n%s", diff)
	}
	if s := e.pl.PreEnqueue(context.Background(), p); !s.IsSuccess() {
		t.Errorf("PreEnqueue after a failed preemption = %v, want Success", s)
	}
}

// TestNominationHoldsTheRoom follows a preemption into the next cycles:
// once the victim is gone and the preemptor is nominated to its node, a
// pod of lower priority cannot take the room, while the preemptor fits.
func TestNominationHoldsTheRoom(t *testing.T) {
	p := preemptor(10, "2").Obj()
	nodes := []*v1.Node{makeNode("n1", "2").Obj()}
	e := newEnv(t, envConfig{nodes: nodes, pods: []*v1.Pod{placed("victim", "n1", 1, "2", 0).Obj(), p}})
	result, status := e.filterAndPostFilter(t, p)
	if !status.IsSuccess() {
		t.Fatalf("PostFilter = %v", status)
	}
	e.pl.inFlight.Wait()

	// What the scheduling loop and the informers do next: the victim's
	// deletion reaches the snapshot (a new instance over the emptied node)
	// and the nomination is recorded.
	nominated := p.DeepCopy()
	nominated.Status.NominatedNodeName = result.NominatedNodeName
	next := newEnv(t, envConfig{nodes: nodes, pods: []*v1.Pod{nominated}})
	pi, _ := framework.NewPodInfo(nominated)
	next.nominator.AddNominatedPod(klog.Background(), pi, result.NominatingInfo)
	ctx := context.Background()

	low := st.MakePod().Name("low").Priority(5).Req(cpu("1")).Obj()
	res := st.RunCycle(ctx, next.fwk, next.snapshot, low)
	if got := res.Filter["n1"]; got.Code() != framework.Unschedulable || !strings.Contains(got.Message(), "Insufficient cpu") {
		t.Errorf("lower-priority pod on the nominated node: %v %q, want Insufficient cpu", got.Code(), got.Message())
	}
	res = st.RunCycle(ctx, next.fwk, next.snapshot, nominated)
	if got := res.Filter["n1"]; !got.IsSuccess() {
		t.Errorf("the preemptor on its nominated node: %v", got)
	}
	higher := st.MakePod().Name("higher").Priority(20).Req(cpu("1")).Obj()
	res = st.RunCycle(ctx, next.fwk, next.snapshot, higher)
	if got := res.Filter["n1"]; !got.IsSuccess() {
		t.Errorf("a pod of higher priority ignores the nomination: %v", got)
	}
}

// TestVictimAlreadyTerminating: a victim whose deletion already started
// gets no second API call, yet it is counted in the message and in
// scheduler_preemption_victims.
func TestVictimAlreadyTerminating(t *testing.T) {
	going := placed("going", "n1", 1, "2", 0).Obj()
	going.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p := preemptor(10, "1").Obj()
	e := newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{going, p}})
	_, status := e.filterAndPostFilter(t, p)
	e.pl.inFlight.Wait()
	if want := "preemption: found a potential placement for pod on node n1, preempting 1 victims"; !status.IsSuccess() || status.Message() != want {
		t.Fatalf("PostFilter = %v %q, want Success %q", status.Code(), status.Message(), want)
	}
	if got := deletedPods(e); got.Len() != 0 {
		t.Errorf("deleted %v, want none", sets.List(got))
	}
	var m dto.Metric
	if err := e.fwk.Metrics().PreemptionVictims.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("scheduler_preemption_victims observed %d times, want 1", got)
	}
}

// TestPreemptionMetrics checks the series upstream added in 1.37: the
// evaluation by outcome, the eviction by result, and budget violations.
func TestPreemptionMetrics(t *testing.T) {
	sampleCount := func(t *testing.T, vec *prometheus.HistogramVec, labels ...string) uint64 {
		t.Helper()
		var m dto.Metric
		if err := vec.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}

	p := preemptor(10, "1").Obj()
	e := newEnv(t, envConfig{
		nodes: []*v1.Node{makeNode("n1", "2").Obj()},
		pods:  []*v1.Pod{placed("guarded", "n1", 1, "2", 0).Label("app", "db").Obj(), p},
		pdbs:  []*policy.PodDisruptionBudget{pdb("db", map[string]string{"app": "db"}, 0)},
	})
	if _, status := e.filterAndPostFilter(t, p); !status.IsSuccess() {
		t.Fatalf("PostFilter = %v", status)
	}
	e.pl.inFlight.Wait()
	m := e.fwk.Metrics()
	if got := sampleCount(t, m.PreemptionEvaluationDuration, "pod", "Success"); got != 1 {
		t.Errorf("evaluations{pod, Success} = %d, want 1", got)
	}
	if got := sampleCount(t, m.PreemptionExecutionDuration, "pod", "success"); got != 1 {
		t.Errorf("executions{pod, success} = %d, want 1", got)
	}
	if got := testutil.ToFloat64(m.PreemptionPDBViolations.WithLabelValues("pod")); got != 1 {
		t.Errorf("PDB violations{pod} = %v, want 1", got)
	}

	never := preemptor(10, "1").Obj()
	never.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
	e = newEnv(t, envConfig{nodes: []*v1.Node{makeNode("n1", "2").Obj()}, pods: []*v1.Pod{placed("low", "n1", 1, "2", 0).Obj(), never}})
	if _, status := e.filterAndPostFilter(t, never); status.Code() != framework.Unschedulable {
		t.Fatalf("PostFilter = %v, want Unschedulable", status)
	}
	if got := sampleCount(t, e.fwk.Metrics().PreemptionEvaluationDuration, "pod", "Unschedulable"); got != 1 {
		t.Errorf("evaluations{pod, Unschedulable} = %d, want 1", got)
	}
}
