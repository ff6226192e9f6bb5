package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// blockingBinder counts the Bind calls in flight and holds each until
// release is closed.
type blockingBinder struct {
	inFlight, peak atomic.Int32
	release        chan struct{}
}

func (*blockingBinder) Name() string { return "BlockingBinder" }

func (b *blockingBinder) Bind(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	n := b.inFlight.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	<-b.release
	b.inFlight.Add(-1)
	return nil
}

// TestBindCallsBounded: however many pods wait to be bound, at most
// maxConcurrentBindCalls Bind calls are in flight.
func TestBindCallsBounded(t *testing.T) {
	binder := &blockingBinder{release: make(chan struct{})}
	r := runtime.Registry{}
	if err := r.Register(queuesort.Name, queuesort.New, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("BlockingBinder", func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return binder, nil
	}, runtime.ArgsSpec{}); err != nil {
		t.Fatal(err)
	}
	const pods = 3 * maxConcurrentBindCalls
	objs := []k8sruntime.Object{st.MakeNode().Name("node").Capacity(map[v1.ResourceName]string{v1.ResourcePods: "1000"}).Obj()}
	for i := range pods {
		objs = append(objs, st.MakePod().Namespace("ns").Name(fmt.Sprint("p", i)).UID(fmt.Sprint("p", i)).SchedulerName("bounded").Obj())
	}
	_, ctx := ktesting.NewTestContext(t)
	s, err := New(ctx, fake.NewClientset(objs...), r, WithDefaultPlugins(&configv1.Plugins{
		QueueSort: configv1.PluginSet{Enabled: []configv1.Plugin{{Name: queuesort.Name}}},
		Bind:      configv1.PluginSet{Enabled: []configv1.Plugin{{Name: "BlockingBinder"}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, s, "bounded")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for binder.inFlight.Load() < maxConcurrentBindCalls {
		if time.Now().After(deadline) {
			t.Fatalf("%d Bind calls in flight after 10s, want %d", binder.inFlight.Load(), maxConcurrentBindCalls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Every pod has been through its cycle by now and waits to bind.
	time.Sleep(200 * time.Millisecond)
	if peak := binder.peak.Load(); peak != maxConcurrentBindCalls {
		t.Errorf("peak of %d Bind calls in flight, want %d", peak, maxConcurrentBindCalls)
	}
	close(binder.release)
}
