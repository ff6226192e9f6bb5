package scheduler

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// TestReleaseIfHeldOtherWay: a pod group member that a cycle on the
// previous instance of its profile holds at Permit after the profile became
// workload-aware, and after releaseHeldOtherWay looked, is released before
// its wait starts; a pod of no group is left held.
func TestReleaseIfHeldOtherWay(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	r := plugins.NewInTreeRegistry()
	if err := manualapproval.Register(r, undecided{}); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, fake.NewClientset(), r, WithDefaultPlugins(plugins.DefaultPlugins()), WithWorkloadGates(true, false))
	if err != nil {
		t.Fatal(err)
	}
	const name = "p"
	build := func(enabled ...string) framework.Framework {
		t.Helper()
		profile := &configv1.KubeSchedulerProfile{SchedulerName: ptr.To(name), Plugins: &configv1.Plugins{}}
		for _, pl := range enabled {
			profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, configv1.Plugin{Name: pl})
		}
		fwk, err := profilebuild.Builder(s)(ctx, profile, runtime.WithWorkloadGates(s.WorkloadGates()))
		if err != nil {
			t.Fatal(err)
		}
		return fwk
	}
	old, aware := build("ManualApproval"), build("ManualApproval", "GangScheduling")
	if old.WorkloadAware() || !aware.WorkloadAware() {
		t.Fatalf("workload-aware: old %v, new %v; want false, true", old.WorkloadAware(), aware.WorkloadAware())
	}
	s.Profiles().Publish(name, old)
	// A cycle holds the old instance across the change, as scheduleOnePod
	// does, and reaches Permit only after it.
	ref, ok := s.Profiles().Acquire(name)
	if !ok {
		t.Fatal("the profile is not served")
	}
	s.Profiles().Publish(name, aware)

	member := st.MakePod().Namespace("ns").Name("member").UID("member").SchedulerName(name).PodGroupName("g").Obj()
	alone := st.MakePod().Namespace("ns").Name("alone").UID("alone").SchedulerName(name).Obj()
	for _, pod := range []*v1.Pod{member, alone} {
		if status := old.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n1"); !status.IsWait() {
			t.Fatalf("Permit of %s: %v, want Wait", pod.Name, status)
		}
		s.releaseIfHeldOtherWay(logger, old, pod)
	}

	waitCtx, cancel := context.WithTimeout(ctx, wait.ForeverTestTimeout)
	defer cancel()
	got := old.WaitOnPermit(waitCtx, member)
	const want = "profile p started scheduling pod groups as a unit while the pod was held at Permit"
	if !got.IsRejected() || got.Message() != want {
		t.Errorf("the member's wait: %v, want rejected with %q", got, want)
	}
	if wp := old.GetWaitingPod(alone.UID); wp == nil {
		t.Error("a pod of no group was released")
	} else {
		wp.Reject("", "test over")
		old.WaitOnPermit(waitCtx, alone)
	}
	ref.Release()
}

// undecided has no decision on any pod, so ManualApproval holds each.
type undecided struct{}

func (undecided) Decision(context.Context, manualapproval.Query) (*manualapproval.Decision, error) {
	return nil, nil
}
