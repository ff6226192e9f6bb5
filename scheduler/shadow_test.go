package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestCompareWithServing(t *testing.T) {
	nodes := func(names ...string) []*framework.NodeInfo {
		out := make([]*framework.NodeInfo, len(names))
		for i, n := range names {
			out[i] = framework.NewNodeInfo()
			out[i].SetNode(st.MakeNode().Name(n).Obj())
		}
		return out
	}
	scored := func(totals map[string]int64, order ...string) candidates {
		c := candidates{feasible: nodes(order...)}
		for _, n := range order {
			c.scores = append(c.scores, framework.NodePluginScores{Name: n, TotalScore: totals[n]})
		}
		return c
	}
	fitErr := &framework.FitError{Pod: st.MakePod().Name("p").Obj(), NumAllNodes: 3, Diagnosis: framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}}
	tests := []struct {
		name    string
		serving string
		c       candidates
		err     error
		want    shadowOutcome
	}{
		{name: "the serving node scores highest", serving: "b", c: scored(map[string]int64{"a": 10, "b": 30, "c": 20}, "a", "b", "c"),
			want: shadowOutcome{result: metrics.ShadowSameNode}},
		{name: "a tie that includes the serving node agrees", serving: "c", c: scored(map[string]int64{"a": 30, "b": 10, "c": 30}, "a", "b", "c"),
			want: shadowOutcome{result: metrics.ShadowSameNode}},
		{name: "another node scores highest", serving: "a", c: scored(map[string]int64{"a": 10, "b": 30, "c": 20}, "a", "b", "c"),
			want: shadowOutcome{result: metrics.ShadowOtherNode, nodes: []string{"b"}}},
		{name: "a tie without the serving node names every tied node, sorted", serving: "b", c: scored(map[string]int64{"a": 30, "b": 10, "c": 30}, "c", "b", "a"),
			want: shadowOutcome{result: metrics.ShadowOtherNode, nodes: []string{"a", "c"}}},
		{name: "without scoring every feasible node scores 1, all equally good", serving: "b", c: scored(map[string]int64{"a": 1, "b": 1}, "a", "b"),
			want: shadowOutcome{result: metrics.ShadowSameNode}},
		{name: "the serving node is not feasible for the shadow", serving: "z", c: candidates{feasible: nodes("a")},
			want: shadowOutcome{result: metrics.ShadowOtherNode, nodes: []string{"a"}}},
		{name: "no feasible node", serving: "a", err: fitErr,
			want: shadowOutcome{result: metrics.ShadowNoNode, reason: fitErr.Error()}},
		{name: "no nodes at all", serving: "a", err: ErrNoNodesAvailable,
			want: shadowOutcome{result: metrics.ShadowNoNode, reason: ErrNoNodesAvailable.Error()}},
		{name: "an internal error", serving: "a", err: errors.New("plugin X failed"),
			want: shadowOutcome{result: metrics.ShadowError, reason: "plugin X failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareWithServing(tt.serving, tt.c, tt.err)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(shadowOutcome{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareWithServingNamesFewNodes(t *testing.T) {
	var c candidates
	for i := range 20 {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%02d", i)).Obj())
		c.feasible = append(c.feasible, ni)
		c.scores = append(c.scores, framework.NodePluginScores{Name: ni.Node().Name, TotalScore: 1})
	}
	got := compareWithServing("elsewhere", c, nil)
	if diff := cmp.Diff([]string{"n00", "n01", "n02", "n03", "n04"}, got.nodes); diff != "" {
		t.Errorf("nodes named (-want +got):\n%s", diff)
	}
}

func TestShadowStatsRecord(t *testing.T) {
	var stats ShadowStats
	for _, o := range []shadowOutcome{
		{result: metrics.ShadowSameNode},
		{result: metrics.ShadowNoNode, reason: "0/3 nodes are available"},
		{result: metrics.ShadowError, reason: "boom"},
		{result: metrics.ShadowOtherNode, nodes: []string{"other"}},
		{result: metrics.ShadowOtherNode, nodes: []string{"other"}},
	} {
		stats.record(o)
	}
	want := ShadowStats{Evaluated: 5, SameNode: 1, NoNode: 1, Errors: 1, OtherNode: 2}
	if diff := cmp.Diff(want, stats); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func TestShadowOutcomeNote(t *testing.T) {
	for _, tc := range []struct {
		outcome shadowOutcome
		want    string
	}{
		{shadowOutcome{result: metrics.ShadowOtherNode, nodes: []string{"n1", "n2"}}, "A shadow of schedulerName web would have placed the pod on n1 or n2, not on n0"},
		{shadowOutcome{result: metrics.ShadowNoNode, reason: "0/3 nodes are available"}, "A shadow of schedulerName web would have found no node for the pod, which is on n0: 0/3 nodes are available"},
		{shadowOutcome{result: metrics.ShadowError, reason: "boom"}, "A shadow of schedulerName web could not evaluate the pod's placement on n0: boom"},
	} {
		if diff := cmp.Diff(tc.want, tc.outcome.note("web", "n0")); diff != "" {
			t.Errorf("note of %s (-want +got):\n%s", tc.outcome.result, diff)
		}
	}
	long := shadowOutcome{result: metrics.ShadowNoNode, reason: strings.Repeat("x", 2000)}
	if got := len(long.note("web", "n0")); got > maxEventNoteLength {
		t.Errorf("note of %d bytes, above the events API's %d", got, maxEventNoteLength)
	}
}

func TestShadowOfferNeverBlocks(t *testing.T) {
	tests := []struct {
		name                          string
		burst, queue, offers          int
		wantQueued, wantOut, wantDrop int
	}{
		{name: "within rate and queue", burst: 5, queue: 5, offers: 5, wantQueued: 5},
		{name: "beyond the rate", burst: 3, queue: 10, offers: 8, wantQueued: 3, wantOut: 5},
		{name: "beyond the queue", burst: 10, queue: 2, offers: 6, wantQueued: 2, wantDrop: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.NewUnregistered()
			sh := &Shadow{
				// No refill within the test: only the burst is allowed.
				limiter:          rate.NewLimiter(rate.Every(time.Hour), tt.burst),
				pods:             make(chan *v1.Pod, tt.queue),
				sampledOutMetric: m.ShadowSkippedPods.WithLabelValues("s", metrics.ShadowSampledOut),
				droppedMetric:    m.ShadowSkippedPods.WithLabelValues("s", metrics.ShadowQueueFull),
			}
			for i := range tt.offers {
				sh.offer(st.MakePod().Name(fmt.Sprint(i)).Obj())
			}
			got := []int{len(sh.pods), int(sh.sampledOut.Load()), int(sh.dropped.Load())}
			if diff := cmp.Diff([]int{tt.wantQueued, tt.wantOut, tt.wantDrop}, got); diff != "" {
				t.Errorf("queued, sampled out, dropped (-want +got):\n%s", diff)
			}
		})
	}
}

// shadow builds a shadow of the batch profile's pods running profile, as
// the controller does (its instance built with FrameworkOptions), without
// starting its goroutine: the tests call place themselves.
func (e *batchEnv) shadow(profile *configv1.KubeSchedulerProfile) *Shadow {
	e.t.Helper()
	sh := e.s.NewShadow("shadow", batchProfile)
	fwk, err := profilebuild.Builder(e.s)(e.ctx, profile, sh.FrameworkOptions()...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = fwk.Close() })
	sh.fwk = fwk
	return sh
}

// TestShadowLeavesBatchingAlone: a shadow evaluating a placement between
// two identical pods of a profile that batches keeps the second pod from
// none of the first one's results, and its own instance signs no pod, so
// it never batches.
func TestShadowLeavesBatchingAlone(t *testing.T) {
	e := newBatchEnv(t, noSpreadProfile(), batchNodes(12))
	sh := e.shadow(noSpreadProfile())
	a := e.pod().Obj()
	nodeA := e.schedule(a)
	if nodeA == "" {
		t.Fatal("pod A not placed")
	}
	placed := a.DeepCopy()
	placed.Spec.NodeName = nodeA
	if got := sh.place(e.ctx, placed); got.result != metrics.ShadowSameNode {
		t.Errorf("a shadow running the serving profile disagreed on pod A: %+v", got)
	}
	if sig := sh.fwk.SignPod(e.ctx, placed); sig != nil {
		t.Errorf("the shadow's instance signed a pod: %s", sig)
	}
	b := e.pod().Obj()
	best := e.bestNodes(b)
	if got := e.schedule(b); !slices.Contains(best, got) {
		t.Errorf("pod B went to %q, want one of %v", got, best)
	}
	if diff := cmp.Diff([]string{
		"scheduler_batch_attempts_total{result=hint_used} 1",
		"scheduler_batch_attempts_total{result=no_hint} 1",
	}, e.batchSeries()); diff != "" {
		t.Errorf("batch metrics (-want +got):\n%s", diff)
	}
}

// TestShadowWithoutScoringSeesEveryFeasibleNode: where the loop stops at
// the first feasible node of a profile that scores nothing, a shadow
// searches on, so that any feasible serving node counts as agreement.
func TestShadowWithoutScoringSeesEveryFeasibleNode(t *testing.T) {
	profile := noSpreadProfile()
	profile.Plugins.Score.Disabled = []configv1.Plugin{{Name: "*"}}
	e := newBatchEnv(t, profile, batchNodes(12))
	sh := e.shadow(profile)
	placed := e.pod().Node("node-07").Obj()
	if diff := cmp.Diff(shadowOutcome{result: metrics.ShadowSameNode}, sh.place(e.ctx, placed), cmp.AllowUnexported(shadowOutcome{})); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}
