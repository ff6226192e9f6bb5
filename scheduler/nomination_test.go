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
	"k8s.io/utils/ptr"

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
// with, in order; a patch clearing it gives "".
func nominatedNodes(t *testing.T, cs *fake.Clientset, pod string) []string {
	t.Helper()
	var out []string
	for _, a := range cs.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetSubresource() != "status" || p.GetName() != pod {
			continue
		}
		var patched struct {
			Status map[string]json.RawMessage `json:"status"`
		}
		if err := json.Unmarshal(p.GetPatch(), &patched); err != nil {
			t.Fatalf("patch of %s: %v", pod, err)
		}
		if raw, ok := patched.Status["nominatedNodeName"]; ok {
			var node *string
			if err := json.Unmarshal(raw, &node); err != nil {
				t.Fatalf("patch of %s: %v", pod, err)
			}
			out = append(out, ptr.Deref(node, ""))
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
		reject bool
		want   []string
	}{{
		name:   "waits at Permit",
		labels: map[string]string{"permit": ""},
		want:   []string{"node-1"},
	}, {
		// The failure clears the nomination, as upstream's does.
		name:   "rejected at Permit",
		labels: map[string]string{"permit": ""},
		reject: true,
		want:   []string{"node-1", ""},
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
				if tc.reject {
					// The clear is computed against the informer's pod, as
					// upstream's is: rejecting before the informer saw the
					// nomination would leave nothing to clear.
					poll(t, "the informer to see the nomination", func() bool {
						p, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
						return err == nil && p.Status.NominatedNodeName == "node-1"
					})
					fwk.GetWaitingPod(pod.UID).Reject(holdingPermitName, "no")
					poll(t, "the nomination to be cleared", func() bool { return len(nominatedNodes(t, cs, "pod")) == 2 })
					break
				}
				fwk.GetWaitingPod(pod.UID).Allow(holdingPermitName)
			}
			if !tc.reject {
				poll(t, "the pod to be bound", func() bool { return boundTo(cs, "pod") == "node-1" })
			}
			if diff := cmp.Diff(tc.want, nominatedNodes(t, cs, "pod")); diff != "" {
				t.Errorf("nominated nodes patched (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusUpdateOver: a pending status update of a pod takes what a
// newer one leaves unsaid, so that the binding cycle's nomination (no
// condition) does not drop the condition a failure asked for just before,
// nor the reverse; an update for another pod of the name takes nothing.
func TestStatusUpdateOver(t *testing.T) {
	cond := &v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}
	nominate := &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: "node-1"}
	for _, tc := range []struct {
		name         string
		newer, older statusUpdate
		want         statusUpdate
	}{{
		name:  "a nomination keeps the pending condition",
		newer: statusUpdate{uid: "a", nominatingInfo: nominate},
		older: statusUpdate{uid: "a", condition: cond, nominatingInfo: clearNominatedNode},
		want:  statusUpdate{uid: "a", condition: cond, nominatingInfo: nominate},
	}, {
		name:  "a condition without a nomination keeps the pending nomination",
		newer: statusUpdate{uid: "a", condition: cond},
		older: statusUpdate{uid: "a", nominatingInfo: nominate},
		want:  statusUpdate{uid: "a", condition: cond, nominatingInfo: nominate},
	}, {
		name:  "a clear overrides the pending nomination",
		newer: statusUpdate{uid: "a", condition: cond, nominatingInfo: clearNominatedNode},
		older: statusUpdate{uid: "a", nominatingInfo: nominate},
		want:  statusUpdate{uid: "a", condition: cond, nominatingInfo: clearNominatedNode},
	}, {
		name:  "another pod of the name",
		newer: statusUpdate{uid: "b", nominatingInfo: nominate},
		older: statusUpdate{uid: "a", condition: cond},
		want:  statusUpdate{uid: "b", nominatingInfo: nominate},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.newer.over(tc.older), cmp.AllowUnexported(statusUpdate{})); diff != "" {
				t.Errorf("over (-want +got):\n%s", diff)
			}
		})
	}
}
