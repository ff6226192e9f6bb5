package scheduling_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// bindCounter counts Bind calls per pod across every instance, so the suite
// can prove that no pod is bound twice.
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

const countingBinderName = "CountingBinder"

// countingBinder is DefaultBinder, counting its calls.
type countingBinder struct{ inner framework.BindPlugin }

func (*countingBinder) Name() string { return countingBinderName }
func (b *countingBinder) Bind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	binds.add(pod.UID)
	return b.inner.Bind(ctx, state, pod, nodeName)
}

const nominatorName = "TestNominator"

// nominator is a PostFilter plugin that nominates the first node, as
// preemption does for the node it frees, and reports upstream's no-victims
// message.
type nominator struct{ h framework.Handle }

func (*nominator) Name() string { return nominatorName }
func (n *nominator) PostFilter(context.Context, *framework.CycleState, *v1.Pod, framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	nodes, err := n.h.SnapshotSharedLister().NodeInfos().List()
	if err != nil || len(nodes) == 0 {
		return nil, framework.NewStatus(framework.Unschedulable, "preemption: nothing to nominate")
	}
	return &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: nodes[0].Node().Name}},
		framework.NewStatus(framework.Unschedulable, fmt.Sprintf("preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.", len(nodes), len(nodes)))
}

const holdName = "TestHold"

// hold keeps pods labelled hold=true waiting at Permit.
type hold struct{}

func (hold) Name() string { return holdName }
func (hold) Permit(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.Status, time.Duration) {
	if pod.Labels["hold"] == "true" {
		return framework.NewStatus(framework.Wait), time.Minute
	}
	return nil, 0
}

const slowPreBindName = "TestSlowPreBind"

// slowPreBind has PreBind work for pods labelled prebind=slow, as
// VolumeBinding has for a pod whose claims wait for a volume: it holds
// them until its context ends (then fails with the context's error, as
// VolumeBinding's wait does) or a minute passed. It records the pods that
// entered PreBind.
type slowPreBind struct {
	mu      sync.Mutex
	entered map[types.UID]bool
}

var slowPreBinds = &slowPreBind{entered: map[types.UID]bool{}}

func (*slowPreBind) Name() string { return slowPreBindName }

func (*slowPreBind) PreBindPreFlight(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) (*framework.PreBindPreFlightResult, *framework.Status) {
	if pod.Labels["prebind"] != "slow" {
		return nil, framework.NewStatus(framework.Skip)
	}
	return &framework.PreBindPreFlightResult{}, nil
}

func (pl *slowPreBind) PreBind(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) *framework.Status {
	pl.mu.Lock()
	pl.entered[pod.UID] = true
	pl.mu.Unlock()
	select {
	case <-ctx.Done():
		return framework.AsStatus(ctx.Err())
	case <-time.After(time.Minute):
		return nil
	}
}

func (pl *slowPreBind) hasEntered(uid types.UID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.entered[uid]
}

// registry is the in-tree registry plus the test plugins.
func registry() runtime.Registry {
	r := plugins.NewInTreeRegistry()
	if err := r.Register(countingBinderName, func(ctx context.Context, args k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
		inner, err := defaultbinder.New(ctx, args, h)
		if err != nil {
			return nil, err
		}
		return &countingBinder{inner: inner.(framework.BindPlugin)}, nil
	}, runtime.ArgsSpec{}); err != nil {
		panic(err)
	}
	if err := r.Register(holdName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return hold{}, nil
	}, runtime.ArgsSpec{}); err != nil {
		panic(err)
	}
	if err := r.Register(slowPreBindName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return slowPreBinds, nil
	}, runtime.ArgsSpec{}); err != nil {
		panic(err)
	}
	if err := r.Register(nominatorName, func(_ context.Context, _ k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
		return &nominator{h: h}, nil
	}, runtime.ArgsSpec{}); err != nil {
		panic(err)
	}
	return r
}

// profile is the default profile under schedulerName name, binding
// through the counting binder.
func profile(name string) *configv1.KubeSchedulerProfile {
	return &configv1.KubeSchedulerProfile{
		SchedulerName: &name,
		Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
			Enabled:  []configv1.Plugin{{Name: countingBinderName}},
			Disabled: []configv1.Plugin{{Name: defaultbinder.Name}},
		}},
	}
}
