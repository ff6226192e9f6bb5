package scheduler

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// newMetricsScheduler returns a scheduler, not started, whose metrics are
// exported on the returned registry.
func newMetricsScheduler(t *testing.T, opts ...Option) (*Scheduler, *prometheus.Registry) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := runtime.Registry{}
	for name, f := range map[string]runtime.Factory{queuesort.Name: queuesort.New, defaultbinder.Name: defaultbinder.New} {
		if err := r.Register(name, f, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, fake.NewClientset(), r, append([]Option{
		WithDefaultPlugins(&configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: queuesort.Name}, {Name: defaultbinder.Name}}}}),
		WithMetrics(m),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

func publish(t *testing.T, s *Scheduler, name string) framework.Framework {
	t.Helper()
	fwk, err := profilebuild.Builder(s)(t.Context(), &configv1.KubeSchedulerProfile{SchedulerName: &name})
	if err != nil {
		t.Fatal(err)
	}
	s.Profiles().Publish(name, fwk)
	return fwk
}

// series returns the series of reg's families named names, as
// "name{label=value,...} value" for gauges and counters and "name{...}"
// for histograms.
func series(t *testing.T, reg *prometheus.Registry, names ...string) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range families {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			s := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetGauge() != nil:
				s += " " + strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64)
			case m.GetCounter() != nil:
				s += " " + strconv.FormatFloat(m.GetCounter().GetValue(), 'g', -1, 64)
			}
			out = append(out, s)
		}
	}
	return out
}

func TestProfileSeriesDeletedWithProfile(t *testing.T) {
	first, firstReg := newMetricsScheduler(t)
	second, secondReg := newMetricsScheduler(t)
	names := []string{"scheduler_schedule_attempts_total", "scheduler_framework_extension_point_duration_seconds"}

	fwk := publish(t, first, "gone")
	publish(t, first, "stays")
	publish(t, second, "other")
	for _, profile := range []string{"gone", "stays"} {
		first.observeAttempt(scheduledResult, profile, 0.01)
	}
	fwk.RunPreScorePlugins(t.Context(), framework.NewCycleState(), st.MakePod().Obj(), nil)
	second.observeAttempt(scheduledResult, "other", 0.01)

	want := []string{
		"scheduler_framework_extension_point_duration_seconds{extension_point=PreScore,profile=gone,status=Success}",
		"scheduler_schedule_attempts_total{profile=gone,result=scheduled} 1",
		"scheduler_schedule_attempts_total{profile=stays,result=scheduled} 1",
	}
	if diff := cmp.Diff(want, series(t, firstReg, names...)); diff != "" {
		t.Errorf("first scheduler's series (-want +got):\n%s", diff)
	}
	// Two schedulers in one process share no series.
	want = []string{"scheduler_schedule_attempts_total{profile=other,result=scheduled} 1"}
	if diff := cmp.Diff(want, series(t, secondReg, names...)); diff != "" {
		t.Errorf("second scheduler's series (-want +got):\n%s", diff)
	}

	// A cycle still running on the instance keeps the series until it ends.
	ref, ok := first.Profiles().Acquire("gone")
	if !ok {
		t.Fatal("profile gone is not served")
	}
	first.Profiles().Remove("gone", "removed")
	if got := series(t, firstReg, names...); len(got) != 3 {
		t.Errorf("series went while a cycle still used the instance: %v", got)
	}
	first.observeAttempt(errorResult, "gone", 0.01)
	ref.Release()
	want = []string{"scheduler_schedule_attempts_total{profile=stays,result=scheduled} 1"}
	if diff := cmp.Diff(want, series(t, firstReg, names...)); diff != "" {
		t.Errorf("series after the profile was removed (-want +got):\n%s", diff)
	}

	// Replacing the instance of a name keeps its series.
	publish(t, first, "stays")
	if diff := cmp.Diff(want, series(t, firstReg, names...)); diff != "" {
		t.Errorf("series after the profile was replaced (-want +got):\n%s", diff)
	}
}

func TestUnservedPendingPods(t *testing.T) {
	s, reg := newMetricsScheduler(t, WithReservedSchedulerNames(v1.DefaultSchedulerName))
	const name = "scheduler_unserved_pending_pods"
	pod := func(uid, schedulerName string) *v1.Pod {
		return st.MakePod().Name(uid).UID(uid).SchedulerName(schedulerName).Obj()
	}
	publish(t, s, "served")
	a, b := pod("a", "nobody"), pod("b", "nobody")
	for _, p := range []*v1.Pod{a, b, pod("c", v1.DefaultSchedulerName), pod("d", "served"), pod("e", "elsewhere")} {
		s.addPod(p)
	}
	bound := pod("f", "nobody")
	bound.Spec.NodeName = "node"
	s.addPod(bound)
	// A standby, whose loop does not run, counts but exports nothing.
	if got := series(t, reg, name); len(got) != 0 {
		t.Errorf("series before the loop started: %v", got)
	}
	s.unserved.start()
	want := []string{name + "{scheduler_name=elsewhere} 1", name + "{scheduler_name=nobody} 2"}
	if diff := cmp.Diff(want, series(t, reg, name)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A profile for the name serves its pods; removing it leaves them unserved again.
	publish(t, s, "nobody")
	if diff := cmp.Diff([]string{name + "{scheduler_name=elsewhere} 1"}, series(t, reg, name)); diff != "" {
		t.Errorf("with a profile for nobody (-want +got):\n%s", diff)
	}
	s.Profiles().Remove("nobody", "removed")
	if diff := cmp.Diff(want, series(t, reg, name)); diff != "" {
		t.Errorf("after the profile went (-want +got):\n%s", diff)
	}

	// Bound, deleted (also as a tombstone): no longer pending.
	boundA := a.DeepCopy()
	boundA.Spec.NodeName = "node"
	boundA.ResourceVersion = "2"
	s.updatePod(a, boundA)
	s.deletePod(cache.DeletedFinalStateUnknown{Key: "default/e", Obj: pod("e", "elsewhere")})
	if diff := cmp.Diff([]string{name + "{scheduler_name=nobody} 1"}, series(t, reg, name)); diff != "" {
		t.Errorf("after a bind and a delete (-want +got):\n%s", diff)
	}
	s.deletePod(b)
	if got := series(t, reg, name); len(got) != 0 {
		t.Errorf("series left after every pod went: %v", got)
	}
}
