package scheduler

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

const slowPreBindName = "SlowPreBind"

// slowPreBind has PreBind work for pods labelled prebind: on their first
// attempt it holds them until release is closed, or, unless the label is
// "ignore-context", until its context ends; later attempts are rejected,
// so that a pod it failed stays in the unschedulable pool. It records
// Unreserve calls and, at PostBind, whether preemption could still cancel
// the pod.
type slowPreBind struct {
	h       framework.Handle
	entered chan types.UID
	release chan struct{}

	mu         sync.Mutex
	attempts   map[types.UID]int
	unreserved []string
	// cancellable records, per pod at PostBind: "absent" when it is not
	// in PreBind's map, else whether CancelPod succeeded.
	cancellable map[string]string
}

func (*slowPreBind) Name() string { return slowPreBindName }

func (pl *slowPreBind) Reserve(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

func (pl *slowPreBind) Unreserve(_ context.Context, _ *framework.CycleState, p *v1.Pod, _ string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.unreserved = append(pl.unreserved, p.Name)
}

func (pl *slowPreBind) PreBindPreFlight(_ context.Context, _ *framework.CycleState, p *v1.Pod, _ string) (*framework.PreBindPreFlightResult, *framework.Status) {
	if _, ok := p.Labels["prebind"]; !ok {
		return nil, framework.NewStatus(framework.Skip)
	}
	return &framework.PreBindPreFlightResult{}, nil
}

func (pl *slowPreBind) PreBind(ctx context.Context, _ *framework.CycleState, p *v1.Pod, _ string) *framework.Status {
	pl.mu.Lock()
	pl.attempts[p.UID]++
	attempt := pl.attempts[p.UID]
	pl.mu.Unlock()
	if attempt > 1 {
		return framework.NewStatus(framework.Unschedulable, "test: a single attempt")
	}
	pl.entered <- p.UID
	if p.Labels["prebind"] == "ignore-context" {
		<-pl.release
		return nil
	}
	select {
	case <-ctx.Done():
		return framework.AsStatus(ctx.Err())
	case <-pl.release:
		return nil
	}
}

func (pl *slowPreBind) PostBind(_ context.Context, _ *framework.CycleState, p *v1.Pod, _ string) {
	got := "absent"
	if pib := pl.h.GetPodInPreBind(p.UID); pib != nil {
		got = "cancel=false"
		if pib.CancelPod("too late") {
			got = "cancel=true"
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.cancellable[p.Name] = got
}

func (pl *slowPreBind) unreservedPods() []string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return append([]string(nil), pl.unreserved...)
}

func (pl *slowPreBind) cancellableAtPostBind(pod string) string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.cancellable[pod]
}

// scheduledMessages returns the messages of the PodScheduled conditions
// the pod's status was patched with, in order.
func scheduledMessages(t *testing.T, cs *fake.Clientset, pod string) []string {
	t.Helper()
	var out []string
	for _, a := range cs.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetSubresource() != "status" || p.GetName() != pod {
			continue
		}
		var patched v1.Pod
		if err := json.Unmarshal(p.GetPatch(), &patched); err != nil {
			t.Fatalf("patch of %s: %v", pod, err)
		}
		for _, c := range patched.Status.Conditions {
			if c.Type == v1.PodScheduled {
				out = append(out, c.Message)
			}
		}
	}
	return out
}

// TestPreemptionCancelsPreBind: a pod whose binding cycle is in PreBind
// can be cancelled (by preemption, Handle.GetPodInPreBind) until the cycle
// marks it prebound, as upstream: it is then not bound, Unreserve runs and
// the failure names the cancellation's cause. A pod whose PreBind plugins
// have no work never enters the map.
func TestPreemptionCancelsPreBind(t *testing.T) {
	const cause = "preempted by DefaultPreemption"
	for _, tc := range []struct {
		name  string
		label string
		// cancel cancels the pod while it is in PreBind; otherwise it is
		// let through.
		cancel         bool
		wantMessage    string
		wantBound      bool
		wantUnreserved []string
		wantPostBind   string
	}{{
		name:           "cancelled, PreBind honours its context",
		label:          "context",
		cancel:         true,
		wantMessage:    `running PreBind plugin "SlowPreBind": ` + cause,
		wantUnreserved: []string{"pod"},
	}, {
		name:           "cancelled, PreBind ends without error",
		label:          "ignore-context",
		cancel:         true,
		wantMessage:    cause,
		wantUnreserved: []string{"pod"},
	}, {
		name:         "prebound, too late to cancel",
		label:        "context",
		wantBound:    true,
		wantPostBind: "cancel=false",
	}, {
		name:         "no PreBind work",
		wantBound:    true,
		wantPostBind: "absent",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
			pl := &slowPreBind{
				entered:     make(chan types.UID, 1),
				release:     make(chan struct{}),
				attempts:    map[types.UID]int{},
				cancellable: map[string]string{},
			}
			s := startLoop(t, cs, testPlugin{slowPreBindName, func(_ context.Context, _ k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
				pl.h = h
				return pl, nil
			}})
			// Before the loop's cleanup, which waits for binding cycles.
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(pl.release) }) }
			t.Cleanup(release)

			pod := st.MakePod().Name("pod").UID("pod").SchedulerName(testProfile).Obj()
			if tc.label != "" {
				pod.Labels = map[string]string{"prebind": tc.label}
			}
			if _, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.label != "" {
				<-pl.entered
				pib := s.Profiles().Get(testProfile).GetPodInPreBind(pod.UID)
				if pib == nil {
					t.Fatal("the pod in PreBind is not in the map")
				}
				if tc.cancel && !pib.CancelPod(cause) {
					t.Fatal("CancelPod = false while the pod is in PreBind")
				}
				// A PreBind that honours its context returns on the cancel
				// alone: released as well, it could see the release first
				// and end without error.
				if !tc.cancel || tc.label == "ignore-context" {
					release()
				}
			}

			if tc.wantBound {
				poll(t, "the pod to be bound", func() bool { return boundTo(cs, "pod") == "node-1" })
				poll(t, "PostBind", func() bool { return pl.cancellableAtPostBind("pod") != "" })
			} else {
				poll(t, "the failure to be reported", func() bool { return len(scheduledMessages(t, cs, "pod")) != 0 })
				if got := boundTo(cs, "pod"); got != "" {
					t.Errorf("the cancelled pod was bound to %q", got)
				}
				if diff := cmp.Diff(tc.wantMessage, scheduledMessages(t, cs, "pod")[0]); diff != "" {
					t.Errorf("PodScheduled message (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantUnreserved, pl.unreservedPods()); diff != "" {
				t.Errorf("unreserved (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPostBind, pl.cancellableAtPostBind("pod")); diff != "" {
				t.Errorf("at PostBind (-want +got):\n%s", diff)
			}
			poll(t, "the pod to leave PreBind's map", func() bool { return s.Profiles().Get(testProfile).GetPodInPreBind(pod.UID) == nil })
		})
	}
}
