package scheduler

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// BenchmarkStatusUpdate is what a scheduling cycle pays to ask for a
// status write (the writes themselves run off the cycle, not started
// here): a failed pod's condition, the binding cycle's nomination, and a
// PodGroup's condition. "same" asks again for one object whose write is
// still pending (coalesced); "distinct" cycles through 1000 objects.
func BenchmarkStatusUpdate(b *testing.B) {
	pods := make([]*v1.Pod, 1000)
	pgs := make([]*schedulingv1beta1.PodGroup, len(pods))
	for i := range pods {
		name := fmt.Sprint("p-", i)
		pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		pgs[i] = &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	}
	cond := &v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}
	nominate := &framework.NominatingInfo{NominatingMode: framework.ModeOverride, NominatedNodeName: "node-1"}
	pgCond := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse}
	for _, bc := range []struct {
		name string
		of   func(i int) int
	}{
		{name: "same", of: func(int) int { return 0 }},
		{name: "distinct", of: func(i int) int { return i % len(pods) }},
	} {
		b.Run("pod/"+bc.name, func(b *testing.B) {
			u := newStatusUpdater(fake.NewClientset(), nil)
			b.Cleanup(func() { stopUnstarted(u.run) })
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pod := pods[bc.of(i)]
				u.update(pod, cond, nil)
				u.update(pod, nil, nominate)
				i++
			}
		})
		b.Run("podgroup/"+bc.name, func(b *testing.B) {
			u := newPodGroupStatusUpdater(fake.NewClientset(), nil)
			b.Cleanup(func() { stopUnstarted(u.run) })
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				u.update(pgs[bc.of(i)], pgCond)
				i++
			}
		})
	}
}

// stopUnstarted stops a writer that was never started: run with an ended
// context shuts its queue down, whose goroutine would outlive the
// benchmark otherwise.
func stopUnstarted(run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run(ctx)
}
