package queue

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// BenchmarkSinglePodPath is the queue's part of a pod scheduled at its
// first attempt, Add, Pop and Done, with queued pods already waiting in
// the active queue: the path every pod of a profile that is not
// workload-aware takes.
func BenchmarkSinglePodPath(b *testing.B) {
	for _, queued := range []int{100, 5000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			logger := klog.Background()
			q := New()
			q.SetProfile(klog.NewContext(context.Background(), logger), newProfile(b, "p", prioritySort{}))
			pods := make([]*v1.Pod, queued+b.N)
			for i := range pods {
				pods[i] = pod(fmt.Sprintf("pod-%d", i), "p").UID(fmt.Sprintf("uid-%d", i)).Priority(int32(i % 7)).Obj()
			}
			for _, p := range pods[:queued] {
				q.Add(logger, p)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				q.Add(logger, pods[queued+i])
				e, err := q.Pop(logger)
				if err != nil {
					b.Fatal(err)
				}
				q.Done(e.(*framework.QueuedPodInfo).Pod.UID)
			}
		})
	}
}
