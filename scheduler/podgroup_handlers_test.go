package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
)

// podGroupRecorder is the recorder registered for PodGroup events.
type podGroupRecorder struct{ recorder }

func (r *podGroupRecorder) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.All},
		QueueingHintFn: r.hint(framework.PodGroup),
	}}, nil
}

// watching reports whether some informer over cs watches resource.
func watching(cs *fake.Clientset, resource string) bool {
	for _, a := range cs.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == resource {
			return true
		}
	}
	return false
}

// TestPodGroupsReachCacheAndQueueingHints checks, with GenericWorkload on,
// that PodGroups and the pods naming them reach the cache's pod group
// states, and PodGroup changes the plugins' hints.
func TestPodGroupsReachCacheAndQueueingHints(t *testing.T) {
	cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
	rec := &podGroupRecorder{}
	s := startLoopWith(t, cs, []Option{WithWorkloadGates(true, false)}, testPlugin{recorderName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return rec, nil
	}})
	ctx := context.Background()
	if watching(cs, "podgroups") {
		t.Fatal("the pod group informer watches before the API server is known to serve PodGroups")
	}
	if err := s.StartPodGroupInformer(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod group informer to watch", func() bool { return watching(cs, "podgroups") })
	states, objects := s.cache.PodGroupStates(), s.cache.PodGroups()
	unscheduled := func() []string {
		pgs, err := states.Get(metav1.NamespaceDefault, "pg")
		if err != nil {
			return nil
		}
		var out []string
		for name := range pgs.UnscheduledPods() {
			out = append(out, name)
		}
		return out
	}

	pod := pendingPod()
	pod.Namespace = metav1.NamespaceDefault
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, s)
	if diff := cmp.Diff([]string{"pending"}, unscheduled()); diff != "" {
		t.Errorf("unscheduled members (-want +got):\n%s", diff)
	}

	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"v": "1"}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}}}
	pgs := cs.SchedulingV1beta1().PodGroups(metav1.NamespaceDefault)
	if _, err := pgs.Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the add", func() bool { return len(rec.events()) >= 1 })
	if got, err := objects.Get(metav1.NamespaceDefault, "pg"); err != nil || got.Spec.SchedulingPolicy.Gang.MinCount != 2 {
		t.Errorf("cached PodGroup = %v, %v; want minCount 2", got, err)
	}
	updated := pg.DeepCopy()
	updated.Labels["v"] = "2"
	updated.ResourceVersion = "2"
	if _, err := pgs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the update", func() bool { return len(rec.events()) >= 2 })
	if err := pgs.Delete(ctx, "pg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	typ := "*v1beta1.PodGroup pg"
	want := []seenEvent{
		{Event: "scheduling.k8s.io/PodGroupAdd", New: typ + " v=1"},
		{Event: "scheduling.k8s.io/PodGroupUpdate", Old: typ + " v=1", New: typ + " v=2"},
		{Event: "scheduling.k8s.io/PodGroupDelete", Old: typ + " v=2"},
	}
	poll(t, "three events", func() bool { return len(rec.events()) >= len(want) })
	if diff := cmp.Diff(want, rec.events()); diff != "" {
		t.Errorf("events given to the hint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(queue.Summary{Unschedulable: 1}, s.queue.Summary()); diff != "" {
		t.Errorf("queue after the events (-want +got):\n%s", diff)
	}
	poll(t, "the PodGroup to leave the cache", func() bool {
		_, err := objects.Get(metav1.NamespaceDefault, "pg")
		return err != nil
	})
	// The pod still names the group: its state stays until the pod goes.
	if diff := cmp.Diff([]string{"pending"}, unscheduled()); diff != "" {
		t.Errorf("unscheduled members once the PodGroup is gone (-want +got):\n%s", diff)
	}
	if err := cs.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, "pending", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod group state to go with its last pod", func() bool { return s.cache.PodGroupCount() == 0 })
}

// TestPodGroupsUntrackedWithoutGenericWorkload checks that without the gate
// nothing watches PodGroups and the cache tracks no group.
func TestPodGroupsUntrackedWithoutGenericWorkload(t *testing.T) {
	cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
	s := startLoop(t, cs, testPlugin{recorderName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return &podGroupRecorder{}, nil
	}})
	pod := pendingPod()
	pod.Namespace = metav1.NamespaceDefault
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("pg")}
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, s)
	if watching(cs, "podgroups") {
		t.Error("PodGroups are watched without GenericWorkload")
	}
	if got := s.cache.PodGroupCount(); got != 0 {
		t.Errorf("the cache tracks %d pod groups without GenericWorkload", got)
	}
}
