package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestCycleProgress(t *testing.T) {
	p := cycleProgress{timeout: time.Minute}
	now := time.Now()
	if err := p.check(now); err != nil {
		t.Errorf("a loop between cycles is reported stuck: %v", err)
	}
	p.begin(st.MakePod().Namespace("ns").Name("slow").Obj())
	if err := p.check(now.Add(30 * time.Second)); err != nil {
		t.Errorf("a cycle within the timeout is reported stuck: %v", err)
	}
	err := p.check(now.Add(2 * time.Minute))
	if err == nil || !strings.Contains(err.Error(), "ns/slow") {
		t.Errorf("a cycle past the timeout: got %v, want an error naming ns/slow", err)
	}
	p.end()
	if err := p.check(now.Add(2 * time.Minute)); err != nil {
		t.Errorf("a finished cycle is reported stuck: %v", err)
	}
}

// TestInformersRunWithoutTheLoop is a standby: the Informers runnable syncs
// the cache and reports ready, and the loop, started later as on winning
// the Lease, reuses those informers.
func TestInformersRunWithoutTheLoop(t *testing.T) {
	s, _ := newMetricsScheduler(t)
	if err := s.CheckInformersSynced(nil); err == nil {
		t.Error("ready before the informers ran")
	}
	node := &v1.Node{}
	node.Name = "node-1"
	if _, err := s.client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	standby := make(chan error, 1)
	go func() { standby <- s.Informers().Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.CheckInformersSynced(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the informers did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.cache.NodeCount(); n != 1 {
		t.Errorf("the standby's cache holds %d nodes, want 1", n)
	}
	if err := s.CheckLoopProgress(nil); err != nil {
		t.Errorf("a standby is reported not live: %v", err)
	}

	loop := make(chan error, 1)
	go func() { loop <- s.Start(ctx) }()
	cancel()
	for _, done := range []chan error{loop, standby} {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("did not stop with its context")
		}
	}
}

// TestExtenderBudgetBelowStallTimeout: what a profile's extenders may take
// in one cycle stays well below the stalled-cycle timeout, so that a slow
// extender never makes the liveness check restart the operator.
// A stalled-cycle timeout set below the budget is refused when extenders
// are allowed.
func TestExtenderBudgetBelowStallTimeout(t *testing.T) {
	if 3*extender.MaxCycleTime > DefaultStalledCycleTimeout {
		t.Errorf("extenders may take %v of a cycle, more than a third of the stalled-cycle timeout %v", extender.MaxCycleTime, DefaultStalledCycleTimeout)
	}
	policy, err := extender.NewPolicy(extender.LoopbackURLPrefixes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	_, err = New(ctx, fake.NewClientset(), runtime.Registry{}, WithExtenderPolicy(policy), WithStalledCycleTimeout(extender.MaxCycleTime))
	if want := "the stalled-cycle timeout 40s must be longer than 40s, what extenders may take in one scheduling cycle"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	// Without extenders a short timeout is fine.
	if _, err := New(ctx, fake.NewClientset(), runtime.Registry{}, WithStalledCycleTimeout(time.Second)); err != nil {
		t.Errorf("without extenders: %v", err)
	}
}
