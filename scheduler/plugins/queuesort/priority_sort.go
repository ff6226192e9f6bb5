// Package queuesort provides PrioritySort, the default QueueSort plugin: pods
// with a higher priority are popped first, and pods of equal priority in the
// order they were queued, exactly as kube-scheduler orders its active queue.
package queuesort

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "PrioritySort"

type prioritySort struct{}

var _ framework.QueueSortPlugin = (*prioritySort)(nil)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, _ framework.Handle) (framework.Plugin, error) {
	return &prioritySort{}, nil
}

func (*prioritySort) Name() string { return Name }

// Less orders by spec.priority (unset counts as 0, as for pods created
// before any PriorityClass existed), then by the time the pod was queued.
func (*prioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	p1 := corev1helpers.PodPriority(a.Pod)
	p2 := corev1helpers.PodPriority(b.Pod)
	return p1 > p2 || (p1 == p2 && a.Timestamp.Before(b.Timestamp))
}
