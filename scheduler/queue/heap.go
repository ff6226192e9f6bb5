package queue

import (
	"container/heap"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// entityKey identifies an entity in the queue's heaps and pool: a single
// pod by its UID, a pod group by its EntityKey.
type entityKey struct {
	uid   types.UID
	group framework.EntityKey
}

func podEntityKey(uid types.UID) entityKey { return entityKey{uid: uid} }

func groupEntityKey(namespace, name string) entityKey {
	return entityKey{group: framework.PodGroupKey(namespace, name)}
}

// keyOf returns the key of a *QueuedPodInfo or a *QueuedPodGroupInfo.
func keyOf(e framework.QueuedEntityInfo) entityKey {
	if pInfo, ok := e.(*framework.QueuedPodInfo); ok {
		return podEntityKey(pInfo.Pod.UID)
	}
	return groupEntityKey(e.GetNamespace(), e.GetName())
}

// sortInfoOf returns what the heaps' less functions compare for e. A
// QueueSort plugin orders pods; a pod group is compared through a pod
// standing in for it that carries what upstream's QueueSort reads of a
// group: its priority (the PodGroup's), its timestamp and its queueing
// history. The stand-in is taken when the group enters a heap: a group's
// sort keys do not change while it is in one (a new PodGroup object
// re-inserts it).
func sortInfoOf(e framework.QueuedEntityInfo) *framework.QueuedPodInfo {
	switch e := e.(type) {
	case *framework.QueuedPodInfo:
		return e
	case *framework.QueuedPodGroupInfo:
		priority := e.GetPriority()
		return &framework.QueuedPodInfo{
			PodInfo: &framework.PodInfo{Pod: &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
				Spec:       v1.PodSpec{Priority: &priority},
			}},
			Timestamp:               e.Timestamp,
			Attempts:                e.Attempts,
			BackoffExpiration:       e.BackoffExpiration,
			InitialAttemptTimestamp: e.InitialAttemptTimestamp,
		}
	}
	return nil
}

// entityHeap is a priority queue of entities keyed by entityKey, so an
// entity can be found, updated or removed in O(log n). It is not safe for
// concurrent use; the PriorityQueue's lock guards it.
type entityHeap struct {
	data heapData
	// pods counts the pods of the entities in the heap.
	pods int
}

func newEntityHeap(less framework.LessFunc) *entityHeap {
	return &entityHeap{data: heapData{index: make(map[entityKey]int), less: less}}
}

// heapItem is an entity with the key it is filed under, what the less
// function compares, and the pod count it was added with.
type heapItem struct {
	entity   framework.QueuedEntityInfo
	key      entityKey
	sortInfo *framework.QueuedPodInfo
	size     int
}

// heapData implements heap.Interface.
type heapData struct {
	items []heapItem
	// index maps an entity's key to its position in items.
	index map[entityKey]int
	less  framework.LessFunc
}

func (h *heapData) Len() int { return len(h.items) }
func (h *heapData) Less(i, j int) bool {
	return h.less(h.items[i].sortInfo, h.items[j].sortInfo)
}
func (h *heapData) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key] = i
	h.index[h.items[j].key] = j
}

func (h *heapData) Push(x any) {
	it := x.(heapItem)
	h.index[it.key] = len(h.items)
	h.items = append(h.items, it)
}

func (h *heapData) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items[n] = heapItem{}
	h.items = h.items[:n]
	delete(h.index, it.key)
	return it
}

func (h *entityHeap) len() int { return len(h.data.items) }

// addOrUpdate inserts e, or replaces the entry with the same key and
// restores the order (its sort key may have changed).
func (h *entityHeap) addOrUpdate(e framework.QueuedEntityInfo) {
	it := heapItem{entity: e, key: keyOf(e), sortInfo: sortInfoOf(e), size: e.Size()}
	h.pods += it.size
	if i, ok := h.data.index[it.key]; ok {
		h.pods -= h.data.items[i].size
		h.data.items[i] = it
		heap.Fix(&h.data, i)
		return
	}
	heap.Push(&h.data, it)
}

func (h *entityHeap) get(key entityKey) framework.QueuedEntityInfo {
	if i, ok := h.data.index[key]; ok {
		return h.data.items[i].entity
	}
	return nil
}

func (h *entityHeap) has(key entityKey) bool {
	_, ok := h.data.index[key]
	return ok
}

// delete removes the entity with key and returns it, or nil if it was not there.
func (h *entityHeap) delete(key entityKey) framework.QueuedEntityInfo {
	i, ok := h.data.index[key]
	if !ok {
		return nil
	}
	it := heap.Remove(&h.data, i).(heapItem)
	h.pods -= it.size
	return it.entity
}

func (h *entityHeap) peek() framework.QueuedEntityInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	return h.data.items[0].entity
}

func (h *entityHeap) pop() framework.QueuedEntityInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	it := heap.Pop(&h.data).(heapItem)
	h.pods -= it.size
	return it.entity
}

// list returns the entities in no particular order.
func (h *entityHeap) list() []framework.QueuedEntityInfo {
	out := make([]framework.QueuedEntityInfo, len(h.data.items))
	for i, it := range h.data.items {
		out[i] = it.entity
	}
	return out
}

// reorder switches to a new order (a profile's new QueueSort plugin).
func (h *entityHeap) reorder(less framework.LessFunc) {
	h.data.less = less
	heap.Init(&h.data)
}
