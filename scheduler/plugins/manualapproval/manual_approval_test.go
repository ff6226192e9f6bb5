package manualapproval

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// decisions is a fixed set of WaitingPod specs keyed by pod UID.
type decisions map[types.UID]*Decision

func (d decisions) Decision(_ context.Context, q Query) (*Decision, error) {
	return d[q.PodUID], nil
}

func newFramework(t *testing.T, d decisions, args string, opts ...Option) framework.Framework {
	t.Helper()
	r := registry.New(nil)
	if err := Register(r, d, opts...); err != nil {
		t.Fatal(err)
	}
	profile := st.MultiPointProfile(st.Plugin(queuesort.Name, 0), st.Plugin(Name, 0), st.Plugin(defaultbinder.Name, 0))
	if args != "" {
		profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: runtime.RawExtension{Raw: []byte(args)}}}
	}
	return st.NewFramework(t, r, profile, nil)
}

func TestPermit(t *testing.T) {
	approved := &Decision{Approve: true, DecidedBy: "alice"}
	rejected := &Decision{DecidedBy: "bob", Reason: "no budget"}
	tests := []struct {
		name      string
		args      string
		pod       *v1.Pod
		decisions decisions
		want      *framework.Status
		wantWait  time.Duration
	}{
		{
			name:     "holds every pod by default, for the default window",
			pod:      st.MakePod().Name("p").UID("u1").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: DefaultApprovalWindow,
		},
		{
			name:     "a window beyond the 15-minute cap of ordinary plugins is honoured",
			args:     `{"approvalWindow": "2h"}`,
			pod:      st.MakePod().Name("p").UID("u1").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: 2 * time.Hour,
		},
		{
			name: "pods outside the selector pass",
			args: `{"podSelector": {"matchLabels": {"tier": "gpu"}}}`,
			pod:  st.MakePod().Name("p").UID("u1").Label("tier", "web").Obj(),
		},
		{
			name:     "pods inside the selector are held",
			args:     `{"podSelector": {"matchLabels": {"tier": "gpu"}}}`,
			pod:      st.MakePod().Name("p").UID("u1").Label("tier", "gpu").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: DefaultApprovalWindow,
		},
		{
			name:      "an approval already given lets the pod through at once",
			pod:       st.MakePod().Name("p").UID("u1").Obj(),
			decisions: decisions{"u1": approved},
		},
		{
			name:      "an approval for another pod of the same name does not",
			pod:       st.MakePod().Name("p").UID("u2").Obj(),
			decisions: decisions{"u1": approved},
			want:      framework.NewStatus(framework.Wait),
			wantWait:  DefaultApprovalWindow,
		},
		{
			name:      "a rejection already given rejects",
			pod:       st.MakePod().Name("p").UID("u1").Obj(),
			decisions: decisions{"u1": rejected},
			want:      framework.NewStatus(framework.Unschedulable, "rejected at Permit by bob: no budget").WithPlugin(Name),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, tt.decisions, tt.args)
			start := time.Now()
			got := fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), tt.pod, "node-1")
			// Wait carries the runtime's own message; its code is what counts.
			if tt.want.IsWait() && !got.IsWait() || !tt.want.IsWait() && !tt.want.Equal(got) {
				t.Fatalf("RunPermitPlugins = %v, want %v", got, tt.want)
			}
			wp := fwk.GetWaitingPod(tt.pod.UID)
			if tt.wantWait == 0 {
				if wp != nil {
					t.Fatal("pod is waiting, want it let through or rejected")
				}
				return
			}
			if wp == nil {
				t.Fatal("pod is not waiting")
			}
			defer wp.Reject(Name, "test over")
			if diff := cmp.Diff([]string{Name}, wp.GetPendingPlugins()); diff != "" {
				t.Errorf("pending plugins (-want +got):\n%s", diff)
			}
			deadline := wp.GetPendingPluginDeadlines()[Name]
			if d := deadline.Sub(start); d < tt.wantWait || d > tt.wantWait+time.Minute {
				t.Errorf("deadline in %v, want %v", d, tt.wantWait)
			}
		})
	}
}

func TestPreFilterKeepsRejectedPodsOffNodes(t *testing.T) {
	fwk := newFramework(t, decisions{"u1": {Reason: "not this week"}}, "")
	pod := st.MakePod().Name("p").UID("u1").Obj()
	_, got, _ := fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), pod)
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, "rejected at Permit: not this week").WithPlugin(Name)
	if !want.Equal(got) {
		t.Fatalf("RunPreFilterPlugins = %v, want %v", got, want)
	}

	other := st.MakePod().Name("q").UID("u2").Obj()
	if _, got, _ := fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), other); !got.IsSuccess() {
		t.Fatalf("undecided pod: RunPreFilterPlugins = %v, want success", got)
	}
}

func TestWindowEnds(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		wantErr string
	}{
		{name: "onTimeout Reject returns the pod with upstream's timeout message", args: `{"approvalWindow": "50ms"}`, wantErr: "rejected due to timeout after waiting 50ms at plugin ManualApproval"},
		{name: "onTimeout Approve lets it through", args: `{"approvalWindow": "50ms", "onTimeout": "Approve"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk := newFramework(t, nil, tt.args)
			pod := st.MakePod().Name("p").UID("u1").Obj()
			ctx := context.Background()
			if s := fwk.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "node-1"); !s.IsWait() {
				t.Fatalf("RunPermitPlugins = %v, want Wait", s)
			}
			got := fwk.WaitOnPermit(ctx, pod)
			if tt.wantErr == "" {
				if !got.IsSuccess() {
					t.Fatalf("WaitOnPermit = %v, want success", got)
				}
				return
			}
			if got.IsSuccess() || !strings.Contains(got.Message(), tt.wantErr) {
				t.Fatalf("WaitOnPermit = %v, want %q", got, tt.wantErr)
			}
		})
	}
}

// approveOnTimeout holds pods for an hour and lets them through when it ends.
const approveOnTimeout = `{"approvalWindow": "1h", "onTimeout": "Approve"}`

// holdPod runs Permit for pod and returns the state of the cycle and the
// waiting pod it made.
func holdPod(t *testing.T, fwk framework.Framework, pod *v1.Pod) (*framework.CycleState, framework.WaitingPod) {
	t.Helper()
	state := framework.NewCycleState()
	if s := fwk.RunPermitPlugins(context.Background(), state, pod, "node-1"); !s.IsWait() {
		t.Fatalf("RunPermitPlugins = %v, want Wait", s)
	}
	wp := fwk.GetWaitingPod(pod.UID)
	if wp == nil {
		t.Fatal("pod is not waiting")
	}
	return state, wp
}

// waitOnPermit is WaitOnPermit bounded so a pod nobody resolves fails the
// test instead of hanging it.
func waitOnPermit(t *testing.T, fwk framework.Framework, pod *v1.Pod) *framework.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return fwk.WaitOnPermit(ctx, pod)
}

func TestStaleTimerDoesNotReleaseALaterHold(t *testing.T) {
	tests := []struct {
		name    string
		resolve func(framework.WaitingPod)
		// unreserve is whether the scheduler reports the end of the first
		// hold; it does not when the plugin is enabled at Permit alone.
		unreserve bool
	}{
		{name: "rejected, then unreserved", resolve: func(wp framework.WaitingPod) { wp.Reject(Name, "not now") }, unreserve: true},
		{name: "rejected, end never reported", resolve: func(wp framework.WaitingPod) { wp.Reject(Name, "not now") }},
		{name: "approved, then binding failed", resolve: func(wp framework.WaitingPod) { wp.Allow(Name) }, unreserve: true},
		{name: "approved, binding failure never reported", resolve: func(wp framework.WaitingPod) { wp.Allow(Name) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			fwk := newFramework(t, nil, approveOnTimeout, WithClock(clk))
			pod := st.MakePod().Name("p").UID("u1").Obj()

			state1, wp1 := holdPod(t, fwk, pod)
			tt.resolve(wp1)
			waitOnPermit(t, fwk, pod)
			if tt.unreserve {
				fwk.RunReservePluginsUnreserve(context.Background(), state1, pod, "node-1")
			}

			clk.Step(30 * time.Minute)
			_, wp2 := holdPod(t, fwk, pod)
			if got := clk.Waiters(); got != 1 {
				t.Errorf("during the second hold: %d timers, want 1 (the first hold's stopped)", got)
			}
			clk.Step(30 * time.Minute) // the first hold's window ends
			if diff := cmp.Diff([]string{Name}, wp2.GetPendingPlugins()); diff != "" {
				t.Fatalf("second hold when the first one's window ended: pending plugins (-want +got):\n%s", diff)
			}

			clk.Step(30 * time.Minute) // the second hold's window ends
			if got := waitOnPermit(t, fwk, pod); !got.IsSuccess() {
				t.Fatalf("WaitOnPermit after the second hold's window = %v, want success", got)
			}
		})
	}
}

func TestTimersEndWithTheirHold(t *testing.T) {
	tests := []struct {
		name string
		// end resolves the hold of pod, armed in state, as the scheduler does.
		end func(t *testing.T, clk *testingclock.FakeClock, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, wp framework.WaitingPod)
	}{
		{
			name: "approved and bound",
			end: func(t *testing.T, _ *testingclock.FakeClock, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, wp framework.WaitingPod) {
				wp.Allow(Name)
				if got := waitOnPermit(t, fwk, pod); !got.IsSuccess() {
					t.Fatalf("WaitOnPermit = %v, want success", got)
				}
				fwk.RunPostBindPlugins(context.Background(), state, pod, "node-1")
			},
		},
		{
			name: "rejected",
			end: func(t *testing.T, _ *testingclock.FakeClock, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, wp framework.WaitingPod) {
				wp.Reject(Name, "not now")
				waitOnPermit(t, fwk, pod)
				fwk.RunReservePluginsUnreserve(context.Background(), state, pod, "node-1")
			},
		},
		{
			name: "pod deleted while held",
			end: func(t *testing.T, _ *testingclock.FakeClock, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, _ framework.WaitingPod) {
				fwk.RejectWaitingPod(pod.UID)
				waitOnPermit(t, fwk, pod)
				fwk.RunReservePluginsUnreserve(context.Background(), state, pod, "node-1")
			},
		},
		{
			name: "window ended",
			end: func(t *testing.T, clk *testingclock.FakeClock, fwk framework.Framework, state *framework.CycleState, pod *v1.Pod, _ framework.WaitingPod) {
				clk.Step(time.Hour)
				if got := waitOnPermit(t, fwk, pod); !got.IsSuccess() {
					t.Fatalf("WaitOnPermit = %v, want success", got)
				}
				fwk.RunPostBindPlugins(context.Background(), state, pod, "node-1")
			},
		},
		{
			name: "instance closed",
			end: func(t *testing.T, _ *testingclock.FakeClock, fwk framework.Framework, _ *framework.CycleState, pod *v1.Pod, _ framework.WaitingPod) {
				if err := fwk.Close(); err != nil {
					t.Fatal(err)
				}
				waitOnPermit(t, fwk, pod)
				// A pod reaching Permit of a closed instance arms nothing.
				other := st.MakePod().Name("q").UID("u2").Obj()
				fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), other, "node-1")
				waitOnPermit(t, fwk, other)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			fwk := newFramework(t, nil, approveOnTimeout, WithClock(clk))
			pod := st.MakePod().Name("p").UID("u1").Obj()
			state, wp := holdPod(t, fwk, pod)
			if got := clk.Waiters(); got != 1 {
				t.Fatalf("while held: %d timers, want 1", got)
			}
			tt.end(t, clk, fwk, state, pod, wp)
			if got := clk.Waiters(); got != 0 {
				t.Errorf("after the hold ended: %d timers, want 0", got)
			}
		})
	}
}

func TestArgsValidation(t *testing.T) {
	tests := []struct {
		args    string
		wantErr string
	}{
		{args: `{"approvalWindow": "25h"}`, wantErr: "approvalWindow: 25h0m0s must be more than 0 and at most 24h0m0s"},
		{args: `{"approvalWindow": "0s"}`, wantErr: "approvalWindow: 0s must be more than 0"},
		{args: `{"onTimeout": "Maybe"}`, wantErr: `onTimeout: "Maybe" must be "Reject" or "Approve"`},
		{args: `{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Sometimes"}]}}`, wantErr: "podSelector:"},
		{args: `{"approvalWindw": "1h"}`, wantErr: `unknown field "approvalWindw"`},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			r := fwkruntime.Registry{}
			if err := Register(r, decisions{}); err != nil {
				t.Fatal(err)
			}
			profile := st.MultiPointProfile(st.Plugin(Name, 0))
			profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: runtime.RawExtension{Raw: []byte(tt.args)}}}
			_, err := st.BuildFramework(r, profile, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewFramework error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// lateWaiter is a Permit plugin after ManualApproval that lets time pass
// before the pod waits, as slower Permit plugins and the gang plugin do.
type lateWaiter struct {
	clk   *testingclock.FakeClock
	delay time.Duration
}

func (p *lateWaiter) Name() string { return "LateWaiter" }

func (p *lateWaiter) Permit(context.Context, *framework.CycleState, *v1.Pod, string) (*framework.Status, time.Duration) {
	p.clk.Step(p.delay)
	return nil, 0
}

// TestWindowEndingBeforeThePodWaits: the window of onTimeout Approve runs
// from when the pod waits. Were its timer armed in Permit, a window ending
// before the later Permit plugins finished would find no waiting pod, and
// the approval would be lost: the pod would stay held until the backstop
// timer, a minute later, rejected it (and with it a gang).
func TestWindowEndingBeforeThePodWaits(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	late := &lateWaiter{clk: clk, delay: 2 * time.Hour}
	r := registry.New(map[string]fwkruntime.Factory{late.Name(): func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
		return late, nil
	}})
	if err := Register(r, decisions(nil), WithClock(clk)); err != nil {
		t.Fatal(err)
	}
	profile := st.MultiPointProfile(st.Plugin(queuesort.Name, 0), st.Plugin(Name, 0), st.Plugin(late.Name(), 0), st.Plugin(defaultbinder.Name, 0))
	profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: runtime.RawExtension{Raw: []byte(approveOnTimeout)}}}
	fwk := st.NewFramework(t, r, profile, nil)
	pod := st.MakePod().Name("p").UID("u1").Obj()

	holdPod(t, fwk, pod)
	clk.Step(time.Hour)
	if got := waitOnPermit(t, fwk, pod); !got.IsSuccess() {
		t.Fatalf("WaitOnPermit once the window ended = %v, want success", got)
	}
}
