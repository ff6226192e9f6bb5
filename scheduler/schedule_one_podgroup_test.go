package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// onePodPerNode rejects a node that already holds a pod: a gang of n pods
// then needs n nodes, and fits only if each pod sees those placed before it.
type onePodPerNode struct{}

const onePodPerNodeName = "OnePodPerNode"

func (onePodPerNode) Name() string { return onePodPerNodeName }
func (onePodPerNode) Filter(_ context.Context, _ *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if len(ni.Pods) > 0 {
		return framework.NewStatus(framework.Unschedulable, "node is taken")
	}
	return nil
}

// startWorkloadLoop runs a scheduler with GenericWorkload on, serving a
// workload-aware profile (GangScheduling and extra) that fits one pod per
// node, on nodes node-0 to node-(nodes-1).
func startWorkloadLoop(t *testing.T, nodes int, extra ...framework.Plugin) (*Scheduler, *fake.Clientset) {
	t.Helper()
	s, cs, publish := startUnpublishedWorkloadLoop(t, nodes, extra...)
	publish()
	return s, cs
}

// startUnpublishedWorkloadLoop is startWorkloadLoop with the profile built
// but published only when the returned function is called.
func startUnpublishedWorkloadLoop(t *testing.T, nodes int, extra ...framework.Plugin) (*Scheduler, *fake.Clientset, func()) {
	t.Helper()
	var objs []k8sruntime.Object
	for i := range nodes {
		objs = append(objs, st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj())
	}
	cs := fake.NewClientset(objs...)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	r := runtime.Registry{}
	for name, f := range map[string]runtime.Factory{
		queuesort.Name:      queuesort.New,
		defaultbinder.Name:  defaultbinder.New,
		gangscheduling.Name: gangscheduling.New,
		onePodPerNodeName: func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
			return onePodPerNode{}, nil
		},
	} {
		if err := r.Register(name, f, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	enabled := []configv1.Plugin{{Name: queuesort.Name}, {Name: defaultbinder.Name}, {Name: gangscheduling.Name}, {Name: onePodPerNodeName}}
	for _, pl := range extra {
		if err := r.Register(pl.Name(), func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
			return pl, nil
		}, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
		enabled = append(enabled, configv1.Plugin{Name: pl.Name()})
	}
	profile := st.MultiPointProfile(enabled...)
	profile.SchedulerName = ptr.To(testProfile)
	s, err := New(ctx, cs, r, WithDefaultPlugins(&configv1.Plugins{}), WithWorkloadGates(true, false),
		WithPodBackoff(10*time.Millisecond, 10*time.Millisecond), WithPodMaxInUnschedulablePodsDuration(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fwk, err := runtime.NewFramework(ctx, r, profile, append(s.FrameworkOptions(testProfile), runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true}))...)
	if err != nil {
		t.Fatal(err)
	}
	if !fwk.WorkloadAware() {
		t.Fatal("the profile is not workload-aware")
	}
	if err := s.StartPodGroupInformer(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the scheduler did not stop")
		}
		if err := fwk.Close(); err != nil {
			t.Errorf("closing the instance: %v", err)
		}
	})
	poll(t, "the pod group informer to watch", func() bool { return watching(cs, "podgroups") })
	return s, cs, func() { s.Profiles().Publish(testProfile, fwk) }
}

// gangPod is a member of pod group pg of the test profile.
func gangPod(name, pg string) *v1.Pod {
	return st.MakePod().Namespace(metav1.NamespaceDefault).Name(name).UID(name).SchedulerName(testProfile).PodGroupName(pg).Obj()
}

func createAll(t *testing.T, cs *fake.Clientset, objs ...k8sruntime.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Pod:
			_, err = cs.CoreV1().Pods(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *schedulingv1beta1.PodGroup:
			_, err = cs.SchedulingV1beta1().PodGroups(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// boundNodes returns where each of pods was bound, "" when it was not.
func boundNodes(cs *fake.Clientset, pods ...string) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[p] = boundTo(cs, p)
	}
	return out
}

// initiallyScheduled returns the PodGroupInitiallyScheduled condition of
// PodGroup name, without its transition time.
func initiallyScheduled(t *testing.T, cs *fake.Clientset, name string) *metav1.Condition {
	t.Helper()
	pg, err := cs.SchedulingV1beta1().PodGroups(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	if c != nil {
		c.LastTransitionTime = metav1.Time{}
	}
	return c
}

// TestPodGroupScheduledAsAUnit checks that a gang is placed as a whole,
// each pod seeing those placed before it, and bound only when all of its
// minCount fit, with the PodGroupInitiallyScheduled condition upstream writes.
func TestPodGroupScheduledAsAUnit(t *testing.T) {
	names := []string{"p0", "p1", "p2", "p3"}
	gang := func(pg string) []k8sruntime.Object {
		objs := []k8sruntime.Object{st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name(pg).MinCount(4).Obj()}
		for _, n := range names {
			objs = append(objs, gangPod(n, pg))
		}
		return objs
	}

	t.Run("fits", func(t *testing.T) {
		_, cs := startWorkloadLoop(t, 4)
		createAll(t, cs, gang("pg")...)
		poll(t, "the gang to be bound", func() bool {
			for _, node := range boundNodes(cs, names...) {
				if node == "" {
					return false
				}
			}
			return true
		})
		nodes := map[string]bool{}
		for _, node := range boundNodes(cs, names...) {
			nodes[node] = true
		}
		if len(nodes) != 4 {
			t.Errorf("the gang was bound to %v, want one pod per node", boundNodes(cs, names...))
		}
		want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}
		poll(t, "the PodGroup to say it was scheduled", func() bool { return cmp.Equal(want, initiallyScheduled(t, cs, "pg")) })
	})

	// Pods already pending when their profile appears, as when a
	// workload-aware profile is created for waiting gangs: no pod add event
	// comes after the profile exists to release the gated group.
	t.Run("pending before its profile", func(t *testing.T) {
		s, cs, publish := startUnpublishedWorkloadLoop(t, 4)
		createAll(t, cs, gang("pg")...)
		poll(t, "the informer to see the pods", func() bool {
			pods, err := s.podLister.List(labels.Everything())
			return err == nil && len(pods) == len(names)
		})
		publish()
		poll(t, "the gang to be bound", func() bool {
			for _, node := range boundNodes(cs, names...) {
				if node == "" {
					return false
				}
			}
			return true
		})
	})

	t.Run("does not fit", func(t *testing.T) {
		s, cs := startWorkloadLoop(t, 3)
		createAll(t, cs, gang("pg")...)
		want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable}
		var got *metav1.Condition
		poll(t, "the PodGroup to say it is unschedulable", func() bool {
			got = initiallyScheduled(t, cs, "pg")
			if got == nil {
				return false
			}
			msg := got.Message
			got.Message = ""
			defer func() { got.Message = msg }()
			return cmp.Equal(want, got)
		})
		t.Logf("condition message: %s", got.Message)
		if diff := cmp.Diff(map[string]string{"p0": "", "p1": "", "p2": "", "p3": ""}, boundNodes(cs, names...)); diff != "" {
			t.Errorf("pods of a gang that does not fit were bound (-want +got):\n%s", diff)
		}
		if n := s.cache.AssumedPodCount(); n != 0 {
			t.Errorf("%d pods stayed assumed", n)
		}
	})

	t.Run("invalid group", func(t *testing.T) {
		_, cs := startWorkloadLoop(t, 4)
		objs := gang("pg")
		objs[2].(*v1.Pod).Spec.Priority = ptr.To[int32](10)
		createAll(t, cs, objs...)
		want := &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonSchedulerError,
			Message: "all pods in a single pod group should have the same priority as the pod group's priority, got 10 and 0"}
		poll(t, "the PodGroup to name the invalid priority", func() bool { return cmp.Equal(want, initiallyScheduled(t, cs, "pg")) })
		if diff := cmp.Diff(map[string]string{"p0": "", "p1": "", "p2": "", "p3": ""}, boundNodes(cs, names...)); diff != "" {
			t.Errorf("pods of an invalid group were bound (-want +got):\n%s", diff)
		}
	})
}
