package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// podGroupOf is the PodGroup of the i-th measured pod of a PodGroups
// workload: pods fill the groups in order, the sizes cycling.
func (w *Workload) podGroupOf(i int) string {
	cycle := 0
	for _, size := range w.PodGroups {
		cycle += size
	}
	group := len(w.PodGroups) * (i / cycle)
	for rest := i % cycle; rest >= w.PodGroups[group%len(w.PodGroups)]; group++ {
		rest -= w.PodGroups[group%len(w.PodGroups)]
	}
	return fmt.Sprintf("group-%d", group)
}

// podGroupSizes are the names and member counts of the measured pods'
// PodGroups; the last may be cut short by the pod count (scaled down).
func (w *Workload) podGroupSizes() map[string]int {
	sizes := map[string]int{}
	for i := range w.Pods {
		sizes[w.podGroupOf(i)]++
	}
	return sizes
}

// inPodGroup puts the i-th measured pod of a PodGroups workload into its
// group.
func (w *Workload) inPodGroup(p *corev1.Pod, i int) {
	if len(w.PodGroups) > 0 {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(w.podGroupOf(i))}
	}
}

// createWorkloadPodGroups creates the scheduling.k8s.io/v1beta1 PodGroups
// of a PodGroups workload's measured pods in namespace, gangs needing all
// their members.
func (h *harness) createWorkloadPodGroups(ctx context.Context, namespace string) error {
	if len(h.w.PodGroups) == 0 {
		return nil
	}
	sizes := h.w.podGroupSizes()
	names := slices.Sorted(maps.Keys(sizes))
	return localcluster.Parallel(ctx, len(names), h.o.Workers, func(ctx context.Context, i int) error {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names[i]},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(sizes[names[i]])},
			}},
		}
		if _, err := h.cs.SchedulingV1beta1().PodGroups(namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PodGroup %s/%s: %w", namespace, pg.Name, err)
		}
		return nil
	})
}
