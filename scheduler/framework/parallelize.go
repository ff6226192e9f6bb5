package framework

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	chunkSize := chunkSizeFor(pieces, p.parallelism)
	r := &untilRun{
		pieces:      pieces,
		chunkSize:   chunkSize,
		chunks:      (pieces + chunkSize - 1) / chunkSize,
		done:        ctx.Done(),
		doWorkPiece: doWorkPiece,
	}
	workers := min(p.parallelism, r.chunks)
	r.wg.Add(workers - 1)
	for range workers - 1 {
		go func() {
			defer r.wg.Done()
			defer utilruntime.HandleCrashWithContext(ctx)
			r.work()
		}()
	}
	r.work()
	r.wg.Wait()
}

// untilRun is one call of Until. It works like workqueue.ParallelizeUntil,
// which upstream uses, with the same chunks, except that workers take
// chunks from a counter rather than a channel filled up front and the
// calling goroutine is one of them: Until runs several times per
// scheduling cycle, and this saves most of its allocations and a goroutine.
type untilRun struct {
	next        atomic.Int64
	wg          sync.WaitGroup
	pieces      int
	chunkSize   int
	chunks      int
	done        <-chan struct{}
	doWorkPiece func(piece int)
}

func (r *untilRun) work() {
	for {
		chunk := int(r.next.Add(1) - 1)
		if chunk >= r.chunks {
			return
		}
		start := chunk * r.chunkSize
		end := min(start+r.chunkSize, r.pieces)
		for piece := start; piece < end; piece++ {
			select {
			case <-r.done:
				return
			default:
				r.doWorkPiece(piece)
			}
		}
	}
}
