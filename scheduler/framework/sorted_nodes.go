package framework

import "container/heap"

// SortedScoredNodes hands out scored nodes best first: highest TotalScore,
// ties to the larger Randomizer. It is upstream's max-heap
// (pkg/scheduler/framework/sorted_nodes.go), so that the node chosen and
// the order of the rest, which opportunistic batching reuses, are
// upstream's. Not safe for concurrent use.
type SortedScoredNodes struct {
	nodes nodeScoreHeap
}

// NewSortedScoredNodes takes ownership of scores and orders them.
func NewSortedScoredNodes(scores []NodePluginScores) *SortedScoredNodes {
	h := nodeScoreHeap(scores)
	heap.Init(&h)
	return &SortedScoredNodes{nodes: h}
}

// Pop removes and returns the best node; Len must be positive.
func (s *SortedScoredNodes) Pop() NodePluginScores {
	return heap.Pop(&s.nodes).(NodePluginScores)
}

// Len is the number of nodes left.
func (s *SortedScoredNodes) Len() int {
	if s == nil {
		return 0
	}
	return s.nodes.Len()
}

// UnorderedList returns a copy of the remaining entries in heap order (not
// sorted). The entries' score slices are shared: do not modify them.
func (s *SortedScoredNodes) UnorderedList() []NodePluginScores {
	return append([]NodePluginScores(nil), s.nodes...)
}

type nodeScoreHeap []NodePluginScores

var _ heap.Interface = (*nodeScoreHeap)(nil)

func (h nodeScoreHeap) Len() int { return len(h) }
func (h nodeScoreHeap) Less(i, j int) bool {
	return h[i].TotalScore > h[j].TotalScore ||
		(h[i].TotalScore == h[j].TotalScore && h[i].Randomizer > h[j].Randomizer)
}
func (h nodeScoreHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *nodeScoreHeap) Push(x any)   { *h = append(*h, x.(NodePluginScores)) }
func (h *nodeScoreHeap) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}
