package framework

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// QueuedEntityInfo is what the scheduling queue holds and pops: a single pod
// (*QueuedPodInfo) or a pod group with its queued pods
// (*QueuedPodGroupInfo), as upstream's queue does with GenericWorkload on.
type QueuedEntityInfo interface {
	// Type returns PodKeyType or PodGroupKeyType.
	Type() EntityKeyType
	// GetName returns the pod's or the pod group's name.
	GetName() string
	// GetNamespace returns the pod's or the pod group's namespace.
	GetNamespace() string
	// ForEachPodInfo calls fn for each pod of the entity until fn returns false.
	ForEachPodInfo(fn func(pInfo *QueuedPodInfo) bool)
	// Size returns the number of pods in the entity.
	Size() int
	// Gated reports whether a PreEnqueue plugin holds the entity.
	Gated() bool
}

var (
	_ QueuedEntityInfo = (*QueuedPodInfo)(nil)
	_ QueuedEntityInfo = (*QueuedPodGroupInfo)(nil)
)

// Type returns PodKeyType.
func (q *QueuedPodInfo) Type() EntityKeyType { return PodKeyType }

// GetName returns the pod's name.
func (q *QueuedPodInfo) GetName() string { return q.Pod.Name }

// GetNamespace returns the pod's namespace.
func (q *QueuedPodInfo) GetNamespace() string { return q.Pod.Namespace }

// ForEachPodInfo calls fn with the pod itself.
func (q *QueuedPodInfo) ForEachPodInfo(fn func(pInfo *QueuedPodInfo) bool) { _ = fn(q) }

// Size returns 1.
func (q *QueuedPodInfo) Size() int { return 1 }

// QueueingParams is a pod group's state and history in the scheduling
// queue: the fields QueuedPodInfo keeps for a single pod. A group backs off,
// is retried and is gated as one entity, by these fields and not by those
// of its pods.
type QueueingParams struct {
	// Timestamp is when the group was last added to the queue.
	Timestamp time.Time
	// Attempts counts the group's scheduling attempts, successful or not.
	Attempts int
	// BackoffExpiration is when the group's current backoff ends; zero
	// until the queue computes it from the counts below.
	BackoffExpiration time.Time
	// UnschedulableCount counts attempts that ended Unschedulable; it drives backoff.
	UnschedulableCount int
	// ConsecutiveErrorsCount counts Error attempts in a row; while non-zero it
	// drives backoff instead of UnschedulableCount.
	ConsecutiveErrorsCount int
	// InitialAttemptTimestamp is when the group first entered the active
	// queue; never updated.
	InitialAttemptTimestamp *time.Time
	// UnschedulablePlugins are the plugins that rejected the group; only
	// their events requeue it.
	UnschedulablePlugins sets.Set[string]
	// PendingPlugins are the plugins that returned Pending.
	PendingPlugins sets.Set[string]
	// GatingPlugin is the PreEnqueue plugin that gated one of the group's
	// pods, if any: one gated pod gates the whole group.
	GatingPlugin string
	// GatingPluginEvents caches the events registered by GatingPlugin.
	GatingPluginEvents []ClusterEvent
}

// QueuedPodGroupInfo is a pod group in the scheduling queue: the group, its
// queueing state, and the pods of it that are queued. The queue pops it as
// one entity, and the pod-group scheduling cycle hands it back with
// AddAttemptedPodGroupIfNeeded.
type QueuedPodGroupInfo struct {
	*PodGroupInfo
	QueueingParams
	// QueuedPodInfos are the group's queued pods, keyed by the key of their
	// leaf pod group (PodGroupKey). Each slice is ordered by
	// PodGroupMemberPodsOrderingFunc, as is the leaf's UnscheduledPods.
	QueuedPodInfos map[EntityKey][]*QueuedPodInfo
}

// Type returns PodGroupKeyType.
func (pgqi *QueuedPodGroupInfo) Type() EntityKeyType { return PodGroupKeyType }

// Gated reports whether a PreEnqueue plugin holds one of the group's pods.
func (pgqi *QueuedPodGroupInfo) Gated() bool { return pgqi.GatingPlugin != "" }

// GetPriority returns the PodGroup's spec.priority; unset counts as 0, as
// for pods created before any PriorityClass existed.
func (pgqi *QueuedPodGroupInfo) GetPriority() int32 {
	if pgqi.PodGroup != nil && pgqi.PodGroup.Spec.Priority != nil {
		return *pgqi.PodGroup.Spec.Priority
	}
	return 0
}

// Size returns the number of queued pods.
func (pgqi *QueuedPodGroupInfo) Size() int {
	size := 0
	for _, pInfos := range pgqi.QueuedPodInfos {
		size += len(pInfos)
	}
	return size
}

// HasQueuedPodInfos reports whether any pod of the group is queued.
func (pgqi *QueuedPodGroupInfo) HasQueuedPodInfos() bool {
	for _, pInfos := range pgqi.QueuedPodInfos {
		if len(pInfos) > 0 {
			return true
		}
	}
	return false
}

// ForEachPodInfo calls fn for each queued pod until fn returns false.
func (pgqi *QueuedPodGroupInfo) ForEachPodInfo(fn func(pInfo *QueuedPodInfo) bool) {
	for _, pInfos := range pgqi.QueuedPodInfos {
		for _, pInfo := range pInfos {
			if !fn(pInfo) {
				return
			}
		}
	}
}

// leafFor returns the leaf pod group pod belongs to, or nil when pod is not
// a member of this group. Only leaf groups (PodGroups) exist here, so the
// group itself is the only candidate.
func (pgqi *QueuedPodGroupInfo) leafFor(pod *v1.Pod) *PodGroupInfo {
	name, ok := PodGroupNameOf(pod)
	if !ok || pod.Namespace != pgqi.Namespace || name != pgqi.Name || pgqi.PodGroup == nil {
		return nil
	}
	return pgqi.PodGroupInfo
}

// AddPod queues pInfo in the group, in PodGroupMemberPodsOrderingFunc's
// order, if its pod is a member; otherwise it does nothing.
func (pgqi *QueuedPodGroupInfo) AddPod(pInfo *QueuedPodInfo) {
	leaf := pgqi.leafFor(pInfo.Pod)
	if leaf == nil {
		return
	}
	if pgqi.QueuedPodInfos == nil {
		pgqi.QueuedPodInfos = make(map[EntityKey][]*QueuedPodInfo)
	}
	key := PodGroupKey(leaf.Namespace, leaf.Name)
	i, _ := slices.BinarySearchFunc(pgqi.QueuedPodInfos[key], pInfo, PodGroupMemberPodsOrderingFunc)
	pgqi.QueuedPodInfos[key] = slices.Insert(pgqi.QueuedPodInfos[key], i, pInfo)
	leaf.UnscheduledPods = slices.Insert(leaf.UnscheduledPods, i, pInfo.Pod)
}

// RemovePod removes pod from the group and returns its queued info, or nil
// when it was not queued in the group.
func (pgqi *QueuedPodGroupInfo) RemovePod(pod *v1.Pod) *QueuedPodInfo {
	leaf := pgqi.leafFor(pod)
	if leaf == nil {
		return nil
	}
	key := PodGroupKey(leaf.Namespace, leaf.Name)
	pInfos := pgqi.QueuedPodInfos[key]
	i := slices.IndexFunc(pInfos, func(p *QueuedPodInfo) bool { return p.Pod.Name == pod.Name })
	if i < 0 {
		return nil
	}
	removed := pInfos[i]
	if pgqi.QueuedPodInfos[key] = slices.Delete(pInfos, i, i+1); len(pgqi.QueuedPodInfos[key]) == 0 {
		delete(pgqi.QueuedPodInfos, key)
	}
	if j := slices.IndexFunc(leaf.UnscheduledPods, func(p *v1.Pod) bool { return p.Name == pod.Name }); j >= 0 {
		leaf.UnscheduledPods = slices.Delete(leaf.UnscheduledPods, j, j+1)
	}
	return removed
}

// Update replaces the queued pod named as pod with pod and returns its
// queued info. The pod keeps its place in the group's order, as upstream.
// The PodInfo is replaced, never modified: the nominator hands PodInfos to
// Filter workers running concurrently. The error says the pod is not queued
// in the group, or that its affinity terms could not be parsed (the update
// is then applied anyway).
func (pgqi *QueuedPodGroupInfo) Update(pod *v1.Pod) (*QueuedPodInfo, error) {
	leaf := pgqi.leafFor(pod)
	if leaf == nil {
		return nil, fmt.Errorf("pod %s/%s to update not found in the queued group info", pod.Namespace, pod.Name)
	}
	pInfos := pgqi.QueuedPodInfos[PodGroupKey(leaf.Namespace, leaf.Name)]
	i := slices.IndexFunc(pInfos, func(p *QueuedPodInfo) bool { return p.Pod.Name == pod.Name })
	if i < 0 {
		return nil, fmt.Errorf("pod %s/%s to update not found in the queued group info", pod.Namespace, pod.Name)
	}
	pInfo := pInfos[i]
	pi, err := NewPodInfo(pod)
	pInfo.PodInfo = pi
	if j := slices.IndexFunc(leaf.UnscheduledPods, func(p *v1.Pod) bool { return p.Name == pod.Name }); j >= 0 {
		leaf.UnscheduledPods[j] = pod
	}
	return pInfo, err
}

// IncAttempts counts an attempt of the group and of each of its pods.
func (pgqi *QueuedPodGroupInfo) IncAttempts() {
	pgqi.Attempts++
	pgqi.ForEachPodInfo(func(pInfo *QueuedPodInfo) bool {
		pInfo.Attempts++
		return true
	})
}

// SetInitialAttemptTimestamp sets the group's and each pod's first attempt
// time, where not set yet: pods join a group after its first attempt.
func (pgqi *QueuedPodGroupInfo) SetInitialAttemptTimestamp(t time.Time) {
	if pgqi.InitialAttemptTimestamp == nil {
		pgqi.InitialAttemptTimestamp = &t
	}
	pgqi.ForEachPodInfo(func(pInfo *QueuedPodInfo) bool {
		if pInfo.InitialAttemptTimestamp == nil {
			pInfo.InitialAttemptTimestamp = &t
		}
		return true
	})
}

// UpdatePodGroup replaces the group's PodGroup object with pg, a newer
// version of it.
func (pgqi *QueuedPodGroupInfo) UpdatePodGroup(pg *schedulingv1beta1.PodGroup) {
	if pgqi.PodGroup != nil && pgqi.Name == pg.Name && pgqi.Namespace == pg.Namespace {
		pgqi.PodGroup = pg
	}
}

// RemovePodGroup removes the PodGroup pg from the group and returns the
// queued pods it held. The group is a single leaf, so removing it removes
// every pod.
func (pgqi *QueuedPodGroupInfo) RemovePodGroup(pg *schedulingv1beta1.PodGroup) []*QueuedPodInfo {
	if pgqi.Name != pg.Name || pgqi.Namespace != pg.Namespace {
		return nil
	}
	key := PodGroupKey(pgqi.Namespace, pgqi.Name)
	removed := pgqi.QueuedPodInfos[key]
	delete(pgqi.QueuedPodInfos, key)
	pgqi.UnscheduledPods = nil
	return removed
}

// PodGroupMemberPodsOrderingFunc orders a group's pods by priority
// (descending), attempts (descending: timestamps are renewed after each
// attempt, so older pods have more), timestamp (ascending), then name, so
// the order is deterministic, as upstream.
func PodGroupMemberPodsOrderingFunc(a, b *QueuedPodInfo) int {
	if pa, pb := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod); pa != pb {
		if pa > pb {
			return -1
		}
		return 1
	}
	if a.Attempts != b.Attempts {
		if a.Attempts > b.Attempts {
			return -1
		}
		return 1
	}
	if c := a.Timestamp.Compare(b.Timestamp); c != 0 {
		return c
	}
	switch {
	case a.Pod.Name < b.Pod.Name:
		return -1
	case a.Pod.Name > b.Pod.Name:
		return 1
	}
	return 0
}
