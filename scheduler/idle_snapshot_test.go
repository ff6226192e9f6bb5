package scheduler

import (
	"context"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// TestIdleLoopReleasesAssumedPods checks that once the loop has no more
// work and the bindings of the pods it placed have shown, nothing keeps
// their assumed copies. A cycle's snapshot holds what the cache held when
// the cycle started: the lone pod's cycle, which starts while the gang's
// bindings are still on their way, sees the gang's members as assumed.
func TestIdleLoopReleasesAssumedPods(t *testing.T) {
	s, cs := startWorkloadLoop(t, 5)
	gang := []string{"p0", "p1", "p2", "p3"}
	objs := []k8sruntime.Object{st.MakePodGroup().Namespace(metav1.NamespaceDefault).Name("pg").MinCount(4).Obj()}
	for _, n := range gang {
		objs = append(objs, gangPod(n, "pg"))
	}
	createAll(t, cs, objs...)
	bound := func(names ...string) func() bool {
		return func() bool {
			for _, node := range boundNodes(cs, names...) {
				if node == "" {
					return false
				}
			}
			return true
		}
	}
	poll(t, "the gang to be bound", bound(gang...))

	// The fake API server records a binding but does not bind, so the
	// members stay assumed until they are bound below.
	ctx := context.Background()
	var mu sync.Mutex
	released := sets.New[string]()
	for _, n := range gang {
		pod, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !s.cache.IsAssumedPod(pod) {
			t.Fatalf("pod %s is not assumed", n)
		}
		assumed, err := s.cache.GetPod(pod)
		if err != nil {
			t.Fatal(err)
		}
		goruntime.SetFinalizer(assumed, func(*v1.Pod) {
			mu.Lock()
			defer mu.Unlock()
			released.Insert(n)
		})
	}
	createAll(t, cs, st.MakePod().Namespace(metav1.NamespaceDefault).Name("lone").UID("lone").SchedulerName(testProfile).Obj())
	poll(t, "the lone pod to be bound", bound("lone"))

	for _, n := range append(gang, "lone") {
		pod, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.NodeName = boundTo(cs, n)
		if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the bindings to show", func() bool { return s.cache.AssumedPodCount() == 0 })

	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		goruntime.GC()
		mu.Lock()
		defer mu.Unlock()
		return released.Len() == len(gang), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(sets.List(sets.New(gang...)), sets.List(released)); diff != "" {
		t.Errorf("assumed copies let go once bound (-want +got):\n%s", diff)
	}
}
