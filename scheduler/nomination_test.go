package scheduler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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

const holdingPermitName = "HoldingPermit"

// holdingPermit makes pods labelled permit wait at Permit; the test
// allows them.
type holdingPermit struct{}

func (holdingPermit) Name() string { return holdingPermitName }

func (holdingPermit) Permit(_ context.Context, _ *framework.CycleState, p *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if _, ok := p.Labels["permit"]; !ok {
		return nil, 0
	}
	return framework.NewStatus(framework.Wait), time.Minute
}

// nominatedNodes returns the nominated nodes the pod's status was patched
// with, in order.
func nominatedNodes(t *testing.T, cs *fake.Clientset, pod string) []string {
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
		if patched.Status.NominatedNodeName != "" {
			out = append(out, patched.Status.NominatedNodeName)
		}
	}
	return out
}

// TestNominatedNodeNameForExpectation: as upstream with
// NominatedNodeNameForExpectation (beta, on by default), a pod that will
// wait at Permit, or whose PreBind plugins have work, has the node it is
// about to bind to written as its nominated node before the wait or the
// PreBind; a pod that binds at once does not.
func TestNominatedNodeNameForExpectation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []string
	}{{
		name:   "waits at Permit",
		labels: map[string]string{"permit": ""},
		want:   []string{"node-1"},
	}, {
		name:   "PreBind has work",
		labels: map[string]string{"prebind": "context"},
		want:   []string{"node-1"},
	}, {
		name: "binds at once",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
			pl := &slowPreBind{
				entered:     make(chan types.UID, 1),
				release:     make(chan struct{}),
				attempts:    map[types.UID]int{},
				cancellable: map[string]string{},
			}
			s := startLoop(t, cs,
				testPlugin{slowPreBindName, func(_ context.Context, _ k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
					pl.h = h
					return pl, nil
				}},
				testPlugin{holdingPermitName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
					return holdingPermit{}, nil
				}})
			pod := st.MakePod().Name("pod").UID("pod").SchedulerName(testProfile).Obj()
			pod.Labels = tc.labels
			if _, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			fwk := s.Profiles().Get(testProfile)
			switch {
			case tc.labels["prebind"] != "":
				<-pl.entered
				poll(t, "the nomination", func() bool { return len(nominatedNodes(t, cs, "pod")) != 0 })
				close(pl.release)
			case tc.labels != nil:
				poll(t, "the pod to wait at Permit", func() bool { return fwk.GetWaitingPod(pod.UID) != nil })
				poll(t, "the nomination", func() bool { return len(nominatedNodes(t, cs, "pod")) != 0 })
				fwk.GetWaitingPod(pod.UID).Allow(holdingPermitName)
			}
			poll(t, "the pod to be bound", func() bool { return boundTo(cs, "pod") == "node-1" })
			if diff := cmp.Diff(tc.want, nominatedNodes(t, cs, "pod")); diff != "" {
				t.Errorf("nominated nodes patched (-want +got):\n%s", diff)
			}
		})
	}
}
