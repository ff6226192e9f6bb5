package framework

import (
	"context"
	"math"
	"runtime"

	"k8s.io/client-go/util/workqueue"
)

// DefaultParallelism is the number of goroutines a Parallelizer uses when
// none is configured: one per CPU the Go runtime may use. Upstream defaults
// to 16; on small machines more goroutines than CPUs only add scheduling
// overhead to the filter loop.
func DefaultParallelism() int {
	return runtime.GOMAXPROCS(0)
}

type parallelizer struct {
	parallelism int
}

var _ Parallelizer = parallelizer{}

// NewParallelizer returns a Parallelizer running at most parallelism
// goroutines; parallelism <= 0 means DefaultParallelism().
func NewParallelizer(parallelism int) Parallelizer {
	if parallelism <= 0 {
		parallelism = DefaultParallelism()
	}
	return parallelizer{parallelism: parallelism}
}

// chunkSizeFor returns max(1, min(sqrt(n), n/parallelism+1)): big enough
// chunks to amortize the work-queue overhead, small enough to balance load.
func chunkSizeFor(n, parallelism int) int {
	s := int(math.Sqrt(float64(n)))
	if r := n/parallelism + 1; s > r {
		s = r
	} else if s < 1 {
		s = 1
	}
	return s
}

func (p parallelizer) Until(ctx context.Context, pieces int, doWorkPiece func(piece int), _ string) {
	if pieces <= 0 {
		return
	}
	if pieces == 1 || p.parallelism == 1 {
		// Not worth a goroutine.
		for i := 0; i < pieces; i++ {
			if ctx.Err() != nil {
				return
			}
			doWorkPiece(i)
		}
		return
	}
	workqueue.ParallelizeUntil(ctx, p.parallelism, pieces, doWorkPiece, workqueue.WithChunkSize(chunkSizeFor(pieces, p.parallelism)))
}
