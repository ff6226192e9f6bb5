package queue

import (
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
// entity can be found, updated or removed in O(log n). Every pod passes
// through it, so it allocates nothing in a steady state: items are
// pointers that know their position, which a swap updates without touching
// the index, and removed items are reused. It is not safe for concurrent
// use; the PriorityQueue's lock guards it.
type entityHeap struct {
	items []*heapItem
	// index maps an entity's key to its item.
	index map[entityKey]*heapItem
	less  framework.LessFunc
	// free holds removed items for reuse.
	free []*heapItem
	// pods counts the pods of the entities in the heap.
	pods int
}

func newEntityHeap(less framework.LessFunc) *entityHeap {
	return &entityHeap{index: make(map[entityKey]*heapItem), less: less}
}

// maxFreeHeapItems bounds the removed items a heap keeps for reuse: enough
// for a steady stream of pods, not the peak of a burst.
const maxFreeHeapItems = 256

// heapItem is an entity with the key it is filed under, what the less
// function compares, the pod count it was added with, and its position in
// items.
type heapItem struct {
	entity   framework.QueuedEntityInfo
	key      entityKey
	sortInfo *framework.QueuedPodInfo
	size     int
	pos      int
}

func (h *entityHeap) len() int { return len(h.items) }

func (h *entityHeap) lessAt(i, j int) bool { return h.less(h.items[i].sortInfo, h.items[j].sortInfo) }

func (h *entityHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].pos = i
	h.items[j].pos = j
}

// up and down are container/heap's, on items.
func (h *entityHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.lessAt(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *entityHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.lessAt(j2, j1) {
			j = j2 // right child
		}
		if !h.lessAt(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

func (h *entityHeap) fix(i int) {
	if !h.down(i, len(h.items)) {
		h.up(i)
	}
}

// addOrUpdate inserts e, or replaces the entry with the same key and
// restores the order (its sort key may have changed).
func (h *entityHeap) addOrUpdate(e framework.QueuedEntityInfo) {
	key, size := keyOf(e), e.Size()
	h.pods += size
	if it, ok := h.index[key]; ok {
		h.pods -= it.size
		it.entity, it.sortInfo, it.size = e, sortInfoOf(e), size
		h.fix(it.pos)
		return
	}
	var it *heapItem
	if n := len(h.free); n > 0 {
		it = h.free[n-1]
		h.free[n-1] = nil
		h.free = h.free[:n-1]
	} else {
		it = &heapItem{}
	}
	*it = heapItem{entity: e, key: key, sortInfo: sortInfoOf(e), size: size, pos: len(h.items)}
	h.index[key] = it
	h.items = append(h.items, it)
	h.up(it.pos)
}

func (h *entityHeap) get(key entityKey) framework.QueuedEntityInfo {
	if it, ok := h.index[key]; ok {
		return it.entity
	}
	return nil
}

func (h *entityHeap) has(key entityKey) bool {
	_, ok := h.index[key]
	return ok
}

// removeAt removes the item at position i and returns its entity.
func (h *entityHeap) removeAt(i int) framework.QueuedEntityInfo {
	n := len(h.items) - 1
	if n != i {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	it := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	delete(h.index, it.key)
	h.pods -= it.size
	e := it.entity
	*it = heapItem{}
	if len(h.free) < maxFreeHeapItems {
		h.free = append(h.free, it)
	}
	return e
}

// delete removes the entity with key and returns it, or nil if it was not there.
func (h *entityHeap) delete(key entityKey) framework.QueuedEntityInfo {
	it, ok := h.index[key]
	if !ok {
		return nil
	}
	return h.removeAt(it.pos)
}

func (h *entityHeap) peek() framework.QueuedEntityInfo {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0].entity
}

func (h *entityHeap) pop() framework.QueuedEntityInfo {
	if len(h.items) == 0 {
		return nil
	}
	return h.removeAt(0)
}

// list returns the entities in no particular order.
func (h *entityHeap) list() []framework.QueuedEntityInfo {
	out := make([]framework.QueuedEntityInfo, len(h.items))
	for i, it := range h.items {
		out[i] = it.entity
	}
	return out
}

// reorder switches to a new order (a profile's new QueueSort plugin).
func (h *entityHeap) reorder(less framework.LessFunc) {
	h.less = less
	n := len(h.items)
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i, n)
	}
}
