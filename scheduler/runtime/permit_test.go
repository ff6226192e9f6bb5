package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

func waitStatus() *framework.Status { return framework.NewStatus(framework.Wait) }

// newPermitFramework builds an instance whose Permit plugins are given in order.
func newPermitFramework(t *testing.T, plugins ...framework.PermitPlugin) *frameworkImpl {
	t.Helper()
	extra := map[string]framework.Plugin{}
	var names []string
	for _, p := range plugins {
		extra[p.Name()] = p
		names = append(names, p.Name())
	}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled(names...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	return fw
}

func TestPermit(t *testing.T) {
	type action func(fw *frameworkImpl, wp framework.WaitingPod)
	allow := func(plugin string) action {
		return func(_ *frameworkImpl, wp framework.WaitingPod) { wp.Allow(plugin) }
	}
	reject := func(plugin, msg string) action {
		return func(_ *frameworkImpl, wp framework.WaitingPod) { wp.Reject(plugin, msg) }
	}
	tests := []struct {
		name           string
		plugins        []framework.PermitPlugin
		wantRunStatus  *framework.Status
		actions        []action
		wantWaitStatus *framework.Status
	}{
		{
			name:    "all plugins allow immediately",
			plugins: []framework.PermitPlugin{&permitPlugin{name: "A"}, &permitPlugin{name: "B"}},
		},
		{
			name:          "a rejection stops at once",
			plugins:       []framework.PermitPlugin{&permitPlugin{name: "A", status: framework.NewStatus(framework.Unschedulable, "no")}, &permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus: framework.NewStatus(framework.Unschedulable, "no").WithPlugin("A"),
		},
		{
			name:          "allowed by every waiting plugin",
			plugins:       []framework.PermitPlugin{&permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}, &permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus: framework.NewStatus(framework.Wait, "one or more plugins asked to wait and no plugin rejected pod"),
			actions:       []action{allow("A"), allow("B")},
		},
		{
			name:           "rejected while waiting",
			plugins:        []framework.PermitPlugin{&permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}, &permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus:  framework.NewStatus(framework.Wait, "one or more plugins asked to wait and no plugin rejected pod"),
			actions:        []action{allow("A"), reject("B", "nope")},
			wantWaitStatus: framework.NewStatus(framework.Unschedulable, "nope").WithPlugin("B"),
		},
		{
			name:           "allow after reject is a no-op",
			plugins:        []framework.PermitPlugin{&permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus:  framework.NewStatus(framework.Wait, "one or more plugins asked to wait and no plugin rejected pod"),
			actions:        []action{reject("A", "nope"), allow("A")},
			wantWaitStatus: framework.NewStatus(framework.Unschedulable, "nope").WithPlugin("A"),
		},
		{
			name:           "timeout rejects with upstream's message",
			plugins:        []framework.PermitPlugin{&permitPlugin{name: "A", status: waitStatus(), timeout: 20 * time.Millisecond}, &permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus:  framework.NewStatus(framework.Wait, "one or more plugins asked to wait and no plugin rejected pod"),
			wantWaitStatus: framework.NewStatus(framework.Unschedulable, "rejected due to timeout after waiting 20ms at plugin A").WithPlugin("A"),
		},
		{
			name:          "RejectWaitingPod through the handle",
			plugins:       []framework.PermitPlugin{&permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}},
			wantRunStatus: framework.NewStatus(framework.Wait, "one or more plugins asked to wait and no plugin rejected pod"),
			actions: []action{func(fw *frameworkImpl, wp framework.WaitingPod) {
				if !fw.RejectWaitingPod(wp.GetPod().UID) {
					t.Error("RejectWaitingPod = false")
				}
			}},
			wantWaitStatus: framework.NewStatus(framework.Unschedulable, "removed"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := newPermitFramework(t, tt.plugins...)
			pod := makePod("p")
			got := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "node-a")
			if diff := cmp.Diff(tt.wantRunStatus, got, cmp.Comparer(errEqual)); diff != "" {
				t.Fatalf("RunPermitPlugins (-want +got):\n%s", diff)
			}
			if !got.IsWait() {
				if fw.WillWaitOnPermit(t.Context(), pod) {
					t.Error("pod must not wait")
				}
				return
			}
			wp := fw.GetWaitingPod(pod.UID)
			if wp == nil || wp.GetNodeName() != "node-a" {
				t.Fatalf("waiting pod = %v", wp)
			}
			for _, a := range tt.actions {
				a(fw, wp)
			}
			status := fw.WaitOnPermit(t.Context(), pod)
			if diff := cmp.Diff(tt.wantWaitStatus, status, cmp.Comparer(errEqual)); diff != "" {
				t.Errorf("WaitOnPermit (-want +got):\n%s", diff)
			}
			if fw.GetWaitingPod(pod.UID) != nil {
				t.Error("pod still in the waiting map after WaitOnPermit")
			}
		})
	}
}

func TestPermitTimeoutClamp(t *testing.T) {
	long := &longPermitPlugin{permitPlugin{name: "Manual", status: waitStatus(), timeout: 24 * time.Hour, maxTimeout: 48 * time.Hour}}
	ordinary := &permitPlugin{name: "Ordinary", status: waitStatus(), timeout: time.Hour}
	fw := newPermitFramework(t, long, ordinary)
	pod := makePod("p")
	before := time.Now()
	if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
		t.Fatal(s)
	}
	wp := fw.GetWaitingPod(pod.UID)
	deadlines := wp.GetPendingPluginDeadlines()
	got := map[string]time.Duration{}
	for p, d := range deadlines {
		got[p] = d.Sub(before).Round(time.Minute)
	}
	want := map[string]time.Duration{"Manual": 24 * time.Hour, "Ordinary": framework.MaxPermitTimeout}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeouts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Manual", "Ordinary"}, wp.GetPendingPlugins()); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	wp.Allow("Ordinary")
	if diff := cmp.Diff([]string{"Manual"}, wp.GetPendingPlugins()); diff != "" {
		t.Errorf("pending after allow (-want +got):\n%s", diff)
	}
	wp.Allow("Manual")
	if s := fw.WaitOnPermit(t.Context(), pod); s != nil {
		t.Errorf("WaitOnPermit = %v, want nil", s)
	}
}

func TestPermitConcurrentAllowReject(t *testing.T) {
	plugins := []framework.PermitPlugin{}
	for i := 0; i < 4; i++ {
		plugins = append(plugins, &permitPlugin{name: fmt.Sprint("P", i), status: waitStatus(), timeout: time.Minute})
	}
	fw := newPermitFramework(t, plugins...)
	for round := 0; round < 50; round++ {
		pod := makePod(fmt.Sprint("pod-", round))
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
			t.Fatal(s)
		}
		wp := fw.GetWaitingPod(pod.UID)
		var wg sync.WaitGroup
		rejected := make(chan bool, 2)
		for _, p := range plugins {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				wp.Allow(name)
			}(p.Name())
		}
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rejected <- wp.Reject("P0", "racing reject")
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fw.IterateOverWaitingPods(func(w framework.WaitingPod) { _ = w.GetPendingPlugins() })
		}()
		status := fw.WaitOnPermit(t.Context(), pod)
		wg.Wait()
		close(rejected)
		successfulRejects := 0
		for r := range rejected {
			if r {
				successfulRejects++
			}
		}
		// Exactly one outcome: either every Allow won (no Reject succeeded)
		// or one Reject won and the pod is unschedulable.
		switch {
		case status.IsSuccess() && successfulRejects == 0:
		case status.Code() == framework.Unschedulable && successfulRejects == 1:
		default:
			t.Fatalf("round %d: status %v with %d successful rejects", round, status, successfulRejects)
		}
	}
}

func TestWaitOnPermitContextCancelled(t *testing.T) {
	fw := newPermitFramework(t, &permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute})
	pod := makePod("p")
	fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := fw.WaitOnPermit(ctx, pod)
	if s.Code() != framework.Error {
		t.Errorf("status = %v, want Error", s)
	}
}

func TestCloseRejectsWaitingPodsAndClosesPlugins(t *testing.T) {
	closed := false
	extra := map[string]framework.Plugin{
		"A":      &permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute},
		"Closer": &closingPlugin{name: "Closer", closed: &closed},
	}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled("A"), PostBind: enabled("Closer")})
	if err != nil {
		t.Fatal(err)
	}
	pod := makePod("p")
	fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n")
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s := fw.WaitOnPermit(t.Context(), pod)
	want := framework.NewStatus(framework.Unschedulable, "scheduling profile instance was retired")
	if diff := cmp.Diff(want, s, cmp.Comparer(errEqual)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !closed {
		t.Error("io.Closer plugin was not closed")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := &permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}
	fw, err := newTestFramework(t.Context(), baseRegistry(map[string]framework.Plugin{"A": a}), &configv1.Plugins{Permit: enabled("A")}, WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	if fw.Metrics() != m {
		t.Error("Handle.Metrics does not return the metrics the instance was built with")
	}
	pod := makePod("metrics-pod")
	state := framework.NewCycleState()
	state.SetRecordPluginMetrics(true)
	fw.RunPermitPlugins(t.Context(), state, pod, "n")
	fw.GetWaitingPod(pod.UID).Allow("A")
	fw.WaitOnPermit(t.Context(), pod)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range families {
		if !strings.Contains(mf.GetName(), "duration") {
			continue // the counters and histograms without labels are always there
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if mf.GetName() == "scheduler_plugin_execution_duration_seconds" && !slices.Contains(labels, "plugin=A") {
				continue
			}
			if mf.GetName() == "scheduler_framework_extension_point_duration_seconds" && !slices.Contains(labels, "extension_point=Permit") {
				continue
			}
			got[mf.GetName()] = append(got[mf.GetName()], strings.Join(labels, ","))
		}
	}
	want := map[string][]string{
		"scheduler_framework_extension_point_duration_seconds": {"extension_point=Permit,profile=test,status=Wait"},
		"scheduler_plugin_execution_duration_seconds":          {"extension_point=Permit,plugin=A,status=Wait"},
		"scheduler_permit_wait_duration_seconds":               {"result=Success"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}

// recordingObserver notes what a WaitingPodObserver is told.
type recordingObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *recordingObserver) PodWaiting(profile string, wp framework.WaitingPod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("waiting %s/%s on %s for %v", profile, wp.GetPod().Name, wp.GetNodeName(), wp.GetPendingPlugins()))
}

func (o *recordingObserver) PodWaitChanged(profile string, wp framework.WaitingPod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("changed %s/%s for %v %v", profile, wp.GetPod().Name, wp.GetPendingPlugins(), wp.GetPendingPluginMessages()))
}

func (o *recordingObserver) PodResolved(profile string, pod *v1.Pod, r framework.PermitResolution, s *framework.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("resolved %s/%s %v: %v", profile, pod.Name, r, s.Message()))
}

func TestWaitingPodObserver(t *testing.T) {
	// Every observer given is told, in order.
	obs, second := &recordingObserver{}, &recordingObserver{}
	extra := map[string]framework.Plugin{"A": &permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute}}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled("A")}, WithWaitingPodObserver(obs), WithWaitingPodObserver(second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })

	allowed, rejected := makePod("allowed"), makePod("rejected")
	rejected.UID = "rejected-uid"
	for _, pod := range []*v1.Pod{allowed, rejected} {
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "node-a"); !s.IsWait() {
			t.Fatalf("RunPermitPlugins = %v, want Wait", s)
		}
	}
	fw.GetWaitingPod(allowed.UID).Allow("A")
	fw.WaitOnPermit(t.Context(), allowed)
	fw.GetWaitingPod(rejected.UID).Reject("A", "not today")
	fw.WaitOnPermit(t.Context(), rejected)

	want := []string{
		"waiting test/allowed on node-a for [A]",
		"waiting test/rejected on node-a for [A]",
		"resolved test/allowed Allowed: ",
		"resolved test/rejected Rejected: not today",
	}
	if diff := cmp.Diff(want, obs.events); diff != "" {
		t.Errorf("observer events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, second.events); diff != "" {
		t.Errorf("second observer's events (-want +got):\n%s", diff)
	}
}

func TestWaitingPodObserverTimeout(t *testing.T) {
	obs := &recordingObserver{}
	extra := map[string]framework.Plugin{"A": &permitPlugin{name: "A", status: waitStatus(), timeout: 10 * time.Millisecond}}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled("A")}, WithWaitingPodObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	pod := makePod("late")
	if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "node-a"); !s.IsWait() {
		t.Fatalf("RunPermitPlugins = %v, want Wait", s)
	}
	fw.WaitOnPermit(t.Context(), pod)
	want := []string{
		"waiting test/late on node-a for [A]",
		"resolved test/late TimedOut: rejected due to timeout after waiting 10ms at plugin A",
	}
	if diff := cmp.Diff(want, obs.events); diff != "" {
		t.Errorf("observer events (-want +got):\n%s", diff)
	}
}

func TestWaitingPodMessagesAndChanges(t *testing.T) {
	obs := &recordingObserver{}
	extra := map[string]framework.Plugin{
		"A": &permitPlugin{name: "A", status: framework.NewStatus(framework.Wait, "1/2 members assigned"), timeout: time.Minute},
		"B": &permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute},
	}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled("A", "B")}, WithWaitingPodObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	pod := makePod("p")
	if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "node-a"); !s.IsWait() {
		t.Fatalf("RunPermitPlugins = %v, want Wait", s)
	}
	wp := fw.GetWaitingPod(pod.UID)
	wp.SetPendingMessage("A", "1/2 members assigned") // unchanged: not reported
	wp.SetPendingMessage("A", "2/3 members assigned")
	wp.SetPendingMessage("C", "not pending") // not holding the pod: ignored
	wp.Allow("A")
	wp.SetPendingMessage("A", "after allow") // no longer pending: ignored
	wp.Allow("B")
	fw.WaitOnPermit(t.Context(), pod)
	wp.SetPendingMessage("B", "after the end") // resolved: ignored

	want := []string{
		"waiting test/p on node-a for [A B]",
		"changed test/p for [A B] map[A:2/3 members assigned]",
		"changed test/p for [B] map[]",
		"resolved test/p Allowed: ",
	}
	if diff := cmp.Diff(want, obs.events); diff != "" {
		t.Errorf("observer events (-want +got):\n%s", diff)
	}
}

func TestAllowWaitingPodsTogether(t *testing.T) {
	hold := func(t *testing.T, fw *frameworkImpl, names ...string) []framework.WaitingPod {
		t.Helper()
		var out []framework.WaitingPod
		for _, name := range names {
			pod := makePod(name)
			pod.UID = types.UID(name + "-uid")
			if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
				t.Fatalf("RunPermitPlugins(%s) = %v, want Wait", name, s)
			}
			out = append(out, fw.GetWaitingPod(pod.UID))
		}
		return out
	}
	t.Run("all held: all allowed", func(t *testing.T) {
		fw := newPermitFramework(t, &permitPlugin{name: "Gang", status: waitStatus(), timeout: time.Minute})
		wps := hold(t, fw, "a", "b", "c")
		// A pod named twice is allowed once.
		if !fw.AllowWaitingPodsTogether("Gang", append(wps, wps[0])) {
			t.Fatal("AllowWaitingPodsTogether = false, want true")
		}
		for _, wp := range wps {
			if s := fw.WaitOnPermit(t.Context(), wp.GetPod()); s != nil {
				t.Errorf("WaitOnPermit(%s) = %v, want allowed", wp.GetPod().Name, s)
			}
		}
	})
	t.Run("one resolved: none allowed", func(t *testing.T) {
		fw := newPermitFramework(t, &permitPlugin{name: "Gang", status: waitStatus(), timeout: time.Minute})
		wps := hold(t, fw, "a", "b", "c")
		wps[1].Reject("Gang", "timed out")
		if fw.AllowWaitingPodsTogether("Gang", wps) {
			t.Fatal("AllowWaitingPodsTogether = true with a rejected pod, want false")
		}
		for _, wp := range wps {
			if got := wp.GetPendingPlugins(); wp != wps[1] && !slices.Equal(got, []string{"Gang"}) {
				t.Errorf("pending plugins of %s = %v, want still [Gang]", wp.GetPod().Name, got)
			}
		}
	})
	t.Run("another plugin holds one: none allowed", func(t *testing.T) {
		fw := newPermitFramework(t,
			&permitPlugin{name: "Gang", status: waitStatus(), timeout: time.Minute},
			&permitPlugin{name: "Manual", status: waitStatus(), timeout: time.Minute})
		wps := hold(t, fw, "a", "b")
		wps[0].Allow("Manual")
		if fw.AllowWaitingPodsTogether("Gang", wps) {
			t.Fatal("AllowWaitingPodsTogether = true while Manual holds b, want false")
		}
		want := map[string][]string{"a": {"Gang"}, "b": {"Gang", "Manual"}}
		for _, wp := range wps {
			if got := wp.GetPendingPlugins(); !slices.Equal(got, want[wp.GetPod().Name]) {
				t.Errorf("pending plugins of %s = %v, want %v", wp.GetPod().Name, got, want[wp.GetPod().Name])
			}
		}
	})
	t.Run("races with rejections: all or none", func(t *testing.T) {
		for range 50 {
			fw := newPermitFramework(t, &permitPlugin{name: "Gang", status: waitStatus(), timeout: time.Minute})
			wps := hold(t, fw, "a", "b", "c", "d")
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); wps[3].Reject("Gang", "deleted") }()
			var allowed bool
			go func() { defer wg.Done(); allowed = fw.AllowWaitingPodsTogether("Gang", wps) }()
			wg.Wait()
			// Close rejects whatever still waits, so that nothing blocks.
			_ = fw.Close()
			admitted := 0
			for _, wp := range wps {
				if fw.WaitOnPermit(t.Context(), wp.GetPod()) == nil {
					admitted++
				}
			}
			// Either the group was allowed before the rejection (which
			// then found d resolved) or nobody was allowed.
			if want := map[bool]int{true: 4, false: 0}[allowed]; admitted != want {
				t.Fatalf("allowed=%v and %d pods admitted, want %d", allowed, admitted, want)
			}
		}
	})
}

// gangPlugin holds every pod and, when told that a hold changed, notes what
// still held the pod and lets it go, after delay, if release says so.
type gangPlugin struct {
	permitPlugin
	fw      *frameworkImpl
	release bool
	delay   time.Duration
	mu      sync.Mutex
	calls   []string
}

func (p *gangPlugin) HoldChanged(_ context.Context, wp framework.WaitingPod) {
	p.mu.Lock()
	p.calls = append(p.calls, fmt.Sprintf("%s held by %v", wp.GetPod().Name, wp.GetPendingPlugins()))
	p.mu.Unlock()
	if p.release {
		time.Sleep(p.delay)
		p.fw.AllowWaitingPodsTogether(p.name, []framework.WaitingPod{wp})
	}
}

func TestGangPermitPlugin(t *testing.T) {
	newGang := func(t *testing.T, release bool, others ...framework.PermitPlugin) (*frameworkImpl, *gangPlugin, *recordingObserver) {
		t.Helper()
		gang := &gangPlugin{permitPlugin: permitPlugin{name: "Gang", status: waitStatus(), timeout: time.Minute}, release: release}
		extra := map[string]framework.Plugin{gang.name: gang}
		names := []string{gang.name}
		for _, p := range others {
			extra[p.Name()] = p
			names = append(names, p.Name())
		}
		obs := &recordingObserver{}
		fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{Permit: enabled(names...)}, WithWaitingPodObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fw.Close() })
		gang.fw = fw
		return fw, gang, obs
	}

	t.Run("told when the pod waits and each time another plugin allows it", func(t *testing.T) {
		fw, gang, _ := newGang(t, false,
			&permitPlugin{name: "Manual", status: waitStatus(), timeout: time.Minute},
			&permitPlugin{name: "Quota", status: waitStatus(), timeout: time.Minute})
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
			t.Fatalf("RunPermitPlugins = %v, want Wait", s)
		}
		wp := fw.GetWaitingPod(pod.UID)
		wp.Allow("Manual")
		wp.Allow("Manual") // not pending any more: nothing changed
		wp.Allow("Quota")
		want := []string{"p held by [Gang Manual Quota]", "p held by [Gang Quota]", "p held by [Gang]"}
		if diff := cmp.Diff(want, gang.calls); diff != "" {
			t.Errorf("HoldChanged calls (-want +got):\n%s", diff)
		}
	})

	t.Run("not told of a pod it does not hold", func(t *testing.T) {
		fw, gang, _ := newGang(t, false, &permitPlugin{name: "Manual", status: waitStatus(), timeout: time.Minute})
		gang.status = nil
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
			t.Fatalf("RunPermitPlugins = %v, want Wait", s)
		}
		fw.GetWaitingPod(pod.UID).Allow("Manual")
		if len(gang.calls) != 0 {
			t.Errorf("HoldChanged calls = %v, want none", gang.calls)
		}
	})

	t.Run("a pod let go at once passes Permit unseen", func(t *testing.T) {
		fw, _, obs := newGang(t, true)
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); s != nil {
			t.Fatalf("RunPermitPlugins = %v, want Success", s)
		}
		if fw.WillWaitOnPermit(t.Context(), pod) {
			t.Error("the pod waits, want it let through")
		}
		if len(obs.events) != 0 {
			t.Errorf("observer events = %v, want none", obs.events)
		}
	})

	t.Run("a pod let go at once passes with a zero timeout", func(t *testing.T) {
		fw, gang, _ := newGang(t, true)
		// Upstream's Coscheduling returns Success for the member that
		// completes its gang, whatever the timeout; the timer must not
		// run while the gang plugin decides.
		gang.timeout, gang.delay = 0, 20*time.Millisecond
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); s != nil {
			t.Fatalf("RunPermitPlugins = %v, want Success", s)
		}
	})

	t.Run("a pod still held times out with a zero timeout", func(t *testing.T) {
		fw, gang, _ := newGang(t, false)
		gang.timeout = 0
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
			t.Fatalf("RunPermitPlugins = %v, want Wait", s)
		}
		s := fw.WaitOnPermit(t.Context(), pod)
		if want := "rejected due to timeout after waiting 0s at plugin Gang"; s == nil || s.Message() != want {
			t.Errorf("WaitOnPermit = %v, want %q", s, want)
		}
	})

	t.Run("a pod another plugin holds is not let go", func(t *testing.T) {
		fw, gang, obs := newGang(t, true, &permitPlugin{name: "Manual", status: waitStatus(), timeout: time.Minute})
		pod := makePod("p")
		if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
			t.Fatalf("RunPermitPlugins = %v, want Wait", s)
		}
		if got := fw.GetWaitingPod(pod.UID).GetPendingPlugins(); !slices.Equal(got, []string{"Gang", "Manual"}) {
			t.Errorf("pending plugins = %v, want [Gang Manual]", got)
		}
		// Once Manual allows it, the gang plugin lets it go.
		fw.GetWaitingPod(pod.UID).Allow("Manual")
		if s := fw.WaitOnPermit(t.Context(), pod); s != nil {
			t.Errorf("WaitOnPermit = %v, want allowed", s)
		}
		want := []string{"waiting test/p on n for [Gang Manual]", "changed test/p for [Gang] map[]", "resolved test/p Allowed: "}
		if diff := cmp.Diff(want, obs.events); diff != "" {
			t.Errorf("observer events (-want +got):\n%s", diff)
		}
		if len(gang.calls) != 2 {
			t.Errorf("HoldChanged calls = %v, want 2", gang.calls)
		}
	})

	t.Run("two gang plugins are refused", func(t *testing.T) {
		a := &gangPlugin{permitPlugin: permitPlugin{name: "GangA", status: waitStatus()}}
		b := &gangPlugin{permitPlugin: permitPlugin{name: "GangB", status: waitStatus()}}
		_, err := newTestFramework(t.Context(), baseRegistry(map[string]framework.Plugin{a.name: a, b.name: b}), &configv1.Plugins{Permit: enabled(a.name, b.name)})
		want := "at most one Permit plugin may hold pods as a group"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("NewFramework error = %v, want %q", err, want)
		}
	})
}

// A callback of IterateOverWaitingPods may Allow a pod, which calls the gang
// plugin, which may take its lock and iterate again while another goroutine
// holding that lock waits to iterate. Were the callback run under the
// waiting-pods read lock, a writer queued meanwhile would block the nested
// read lock and deadlock all three; so no writer may wait for a callback.
func TestIterateOverWaitingPodsCallsBackUnlocked(t *testing.T) {
	fw := newPermitFramework(t, &permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute})
	if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), makePod("p"), "n"); !s.IsWait() {
		t.Fatalf("RunPermitPlugins = %v, want Wait", s)
	}
	calls := 0
	fw.IterateOverWaitingPods(func(framework.WaitingPod) {
		calls++
		added := make(chan struct{})
		go func() {
			defer close(added)
			fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), makePod("q"), "n")
		}()
		select {
		case <-added:
		case <-time.After(2 * time.Second):
			t.Error("a pod starting to wait blocked while an IterateOverWaitingPods callback ran")
		}
	})
	if calls != 1 {
		t.Errorf("callback called %d times, want 1 (the pod waiting when iteration began)", calls)
	}
	if fw.GetWaitingPod("q") == nil {
		t.Error("pod q is not waiting")
	}
}

func TestWaitingPodHeldBy(t *testing.T) {
	type holding struct{ held, alone bool }
	tests := []struct {
		name    string
		resolve func(framework.WaitingPod)
		want    map[string]holding
	}{
		{name: "held by both", want: map[string]holding{"A": {held: true}, "B": {held: true}, "C": {}}},
		{name: "B allowed", resolve: func(wp framework.WaitingPod) { wp.Allow("B") },
			want: map[string]holding{"A": {held: true, alone: true}, "B": {}}},
		{name: "rejected", resolve: func(wp framework.WaitingPod) { wp.Reject("B", "no") },
			want: map[string]holding{"A": {}, "B": {}}},
		{name: "allowed by both", resolve: func(wp framework.WaitingPod) { wp.Allow("A"); wp.Allow("B") },
			want: map[string]holding{"A": {}, "B": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := newPermitFramework(t,
				&permitPlugin{name: "A", status: waitStatus(), timeout: time.Minute},
				&permitPlugin{name: "B", status: waitStatus(), timeout: time.Minute})
			pod := makePod("p")
			if s := fw.RunPermitPlugins(t.Context(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
				t.Fatalf("RunPermitPlugins = %v, want Wait", s)
			}
			wp := fw.GetWaitingPod(pod.UID)
			if tt.resolve != nil {
				tt.resolve(wp)
			}
			got := map[string]holding{}
			for plugin := range tt.want {
				held, alone := wp.HeldBy(plugin)
				got[plugin] = holding{held, alone}
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(holding{})); diff != "" {
				t.Errorf("HeldBy (-want +got):\n%s", diff)
			}
		})
	}
}
