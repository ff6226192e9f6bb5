package queue

import (
	"container/heap"

	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// podHeap is a priority queue of pods keyed by UID, so a pod can be found,
// updated or removed in O(log n). It is not safe for concurrent use; the
// PriorityQueue's lock guards it.
type podHeap struct {
	data heapData
}

func newPodHeap(less framework.LessFunc) *podHeap {
	return &podHeap{data: heapData{index: make(map[types.UID]int), less: less}}
}

// heapData implements heap.Interface.
type heapData struct {
	items []*framework.QueuedPodInfo
	// index maps a pod's UID to its position in items.
	index map[types.UID]int
	less  framework.LessFunc
}

func (h *heapData) Len() int           { return len(h.items) }
func (h *heapData) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *heapData) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].Pod.UID] = i
	h.index[h.items[j].Pod.UID] = j
}

func (h *heapData) Push(x any) {
	pi := x.(*framework.QueuedPodInfo)
	h.index[pi.Pod.UID] = len(h.items)
	h.items = append(h.items, pi)
}

func (h *heapData) Pop() any {
	n := len(h.items) - 1
	pi := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	delete(h.index, pi.Pod.UID)
	return pi
}

func (h *podHeap) len() int { return len(h.data.items) }

// addOrUpdate inserts pi, or replaces the entry with the same UID and
// restores the order (its sort key may have changed).
func (h *podHeap) addOrUpdate(pi *framework.QueuedPodInfo) {
	if i, ok := h.data.index[pi.Pod.UID]; ok {
		h.data.items[i] = pi
		heap.Fix(&h.data, i)
		return
	}
	heap.Push(&h.data, pi)
}

func (h *podHeap) get(uid types.UID) *framework.QueuedPodInfo {
	if i, ok := h.data.index[uid]; ok {
		return h.data.items[i]
	}
	return nil
}

func (h *podHeap) has(uid types.UID) bool {
	_, ok := h.data.index[uid]
	return ok
}

// delete removes the pod with uid and reports whether it was there.
func (h *podHeap) delete(uid types.UID) bool {
	i, ok := h.data.index[uid]
	if !ok {
		return false
	}
	heap.Remove(&h.data, i)
	return true
}

func (h *podHeap) peek() *framework.QueuedPodInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	return h.data.items[0]
}

func (h *podHeap) pop() *framework.QueuedPodInfo {
	if len(h.data.items) == 0 {
		return nil
	}
	return heap.Pop(&h.data).(*framework.QueuedPodInfo)
}

// list returns the pods in no particular order.
func (h *podHeap) list() []*framework.QueuedPodInfo {
	return append([]*framework.QueuedPodInfo(nil), h.data.items...)
}

// reorder switches to a new order (a profile's new QueueSort plugin).
func (h *podHeap) reorder(less framework.LessFunc) {
	h.data.less = less
	heap.Init(&h.data)
}
