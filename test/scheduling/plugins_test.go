package scheduling_test

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Small plugins for the suite, each doing what its upstream namesake does
// for the cases the suite needs, with upstream's messages and events.

// prioritySort orders by priority, then by time in the queue.
type prioritySort struct{}

func (prioritySort) Name() string { return "TestSort" }
func (prioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	pa, pb := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod)
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}

// fit rejects nodes without the CPU the pod requests. The request is
// computed once per cycle in PreFilter.
type fit struct{}

const fitStateKey framework.StateKey = "PreFilterTestFit"

type fitState struct{ milliCPU int64 }

func (s *fitState) Clone() framework.StateData { return s }

func (fit) Name() string { return "TestFit" }
func (fit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	pi, _ := framework.NewPodInfo(pod)
	state.Write(fitStateKey, &fitState{milliCPU: pi.CalculateResource().Resource.MilliCPU})
	return nil, nil
}
func (fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }
func (fit) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*fitState](state, fitStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.milliCPU > 0 && ni.Allocatable.MilliCPU < ni.Requested.MilliCPU+s.milliCPU {
		return framework.NewStatus(framework.Unschedulable, "Insufficient cpu")
	}
	return nil
}
func (fit) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable}},
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}},
	}, nil
}

// leastAllocated prefers the node with the most CPU left.
type leastAllocated struct{}

func (leastAllocated) Name() string { return "TestLeastAllocated" }
func (leastAllocated) Score(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	if ni.Allocatable.MilliCPU == 0 {
		return 0, nil
	}
	return (ni.Allocatable.MilliCPU - ni.Requested.MilliCPU) * framework.MaxNodeScore / ni.Allocatable.MilliCPU, nil
}
func (leastAllocated) ScoreExtensions() framework.ScoreExtensions { return nil }

// taints rejects nodes with a NoSchedule taint the pod does not tolerate.
type taints struct{}

func (taints) Name() string { return "TestTaints" }
func (taints) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.Node().Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoSchedule }, false)
	if untolerated {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
	}
	return nil
}
func (taints) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}},
	}, nil
}

// gates holds pods that have scheduling gates until the last one is removed.
type gates struct{}

func (gates) Name() string { return "TestGates" }
func (gates) PreEnqueue(_ context.Context, pod *v1.Pod) *framework.Status {
	if len(pod.Spec.SchedulingGates) == 0 {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for scheduling gates")
}
func (gates) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.UpdatePodSchedulingGatesEliminated}},
	}, nil
}

// bindCounter counts Bind calls per pod across every instance, so the suite
// can prove no pod is bound twice.
type bindCounter struct {
	mu    sync.Mutex
	calls map[types.UID]int
}

func (c *bindCounter) add(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[uid]++
}

func (c *bindCounter) get(uid types.UID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[uid]
}

var binds = &bindCounter{calls: map[types.UID]int{}}

// binder posts a pods/binding, as DefaultBinder does.
type binder struct{ h framework.Handle }

func (*binder) Name() string { return "TestBinder" }
func (b *binder) Bind(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	binds.add(pod.UID)
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	return framework.AsStatus(b.h.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}))
}

func registry() runtime.Registry {
	fixed := func(p framework.Plugin) runtime.Factory {
		return func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) { return p, nil }
	}
	r := runtime.Registry{}
	for _, p := range []framework.Plugin{prioritySort{}, fit{}, leastAllocated{}, taints{}, gates{}} {
		if err := r.Register(p.Name(), fixed(p), runtime.ArgsSpec{}); err != nil {
			panic(err)
		}
	}
	if err := r.Register("TestBinder", func(_ context.Context, _ k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
		return &binder{h: h}, nil
	}, runtime.ArgsSpec{}); err != nil {
		panic(err)
	}
	return r
}

// profile is a profile named name running every test plugin.
func profile(name string) *configv1.KubeSchedulerProfile {
	var enabled []configv1.Plugin
	for _, n := range []string{"TestSort", "TestGates", "TestFit", "TestTaints", "TestLeastAllocated", "TestBinder"} {
		enabled = append(enabled, configv1.Plugin{Name: n})
	}
	return &configv1.KubeSchedulerProfile{
		SchedulerName: &name,
		Plugins:       &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: enabled}},
	}
}
