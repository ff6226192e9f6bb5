// Package coalesce writes the latest wanted state of objects off the
// scheduling cycle. A cycle that decides what an object's status should
// say (a pod's PodScheduled condition and nominated node, a PodGroup's
// PodGroupInitiallyScheduled condition) hands it to a Writer and goes on:
// it never waits for the API server. The Writer's workers send it later.
//
// What is coalesced, and why: while a write for an object is pending, a
// newer wish for the same object is merged into it (by default it simply
// replaces it), so the API server sees one write carrying the latest state
// rather than one per cycle. A pod that fails a hundred cycles in a row
// while the writer is behind costs one patch, not a hundred, and never a
// stale one after a fresh one.
//
// Ordering: keys are written in the order they were first asked for since
// their last write, at most Workers at a time, and a key is never written
// by two workers at once. A wish made while its key is being written is
// written after that write. A failed write is retried after the key's
// rate-limited backoff, with any wish made meanwhile merged over it.
//
// Locking: a Writer's mutex guards only its pending wishes and is never
// held while writing or while calling the work queue, so Write and Merge
// may take their own locks and Add may be called from anywhere, a Write
// included.
//
// Shutdown: Run returns when its context ends and its workers have
// stopped. A write in flight sees the ended context; wishes still pending
// are dropped, not retried: the next leader's cycles ask for them again.
package coalesce

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// Config says what a Writer writes and how.
type Config[K comparable, V any] struct {
	// Name names the work queue in the workqueue metrics.
	Name string
	// Workers is how many keys may be written at once; zero means one.
	Workers int
	// Write sends v for key. It is called without the Writer's lock held;
	// an error has the write retried, unless the context has ended.
	Write func(ctx context.Context, key K, v V) error
	// Merge is what is wanted when newer is asked for while older is
	// still pending for the same key, or when older failed to be written;
	// nil means newer replaces older.
	Merge func(newer, older V) V
	// Failed, if set, is told of each failed write that will be retried.
	Failed func(ctx context.Context, key K, err error)
}

// Writer is a keyed work queue that writes the latest wish per key. See
// the package documentation.
type Writer[K comparable, V any] struct {
	cfg   Config[K, V]
	queue workqueue.TypedRateLimitingInterface[K]

	// mu guards pending, the latest wish per key not yet taken by a
	// worker. A key added to pending is added to the queue right after,
	// outside the lock; a worker that takes a key whose wish another turn
	// already wrote finds nothing pending and skips it.
	mu      sync.Mutex
	pending map[K]V
}

// New returns a Writer for cfg; it writes once Run is called.
func New[K comparable, V any](cfg Config[K, V]) *Writer[K, V] {
	return &Writer[K, V]{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[K](),
			workqueue.TypedRateLimitingQueueConfig[K]{Name: cfg.Name}),
		pending: make(map[K]V),
	}
}

// Add asks for v to be written for key, merged over a wish for key still
// pending. It never blocks on a write.
func (w *Writer[K, V]) Add(key K, v V) {
	w.mu.Lock()
	w.put(key, v)
	w.mu.Unlock()
	w.queue.Add(key)
}

// put records v for key, merged over what is pending; w.mu is held.
func (w *Writer[K, V]) put(key K, v V) {
	if w.cfg.Merge != nil {
		if older, ok := w.pending[key]; ok {
			v = w.cfg.Merge(v, older)
		}
	}
	w.pending[key] = v
}

// Run writes until ctx ends, then shuts the queue down and returns once
// every worker has stopped.
func (w *Writer[K, V]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(w.cfg.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for w.processNext(ctx) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

// processNext writes the next key's wish and reports whether the worker
// should go on.
func (w *Writer[K, V]) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	w.mu.Lock()
	v, ok := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	if !ok {
		// Written already, by the turn a newer wish's Add or a
		// retry put it in the queue again for.
		w.queue.Forget(key)
		return true
	}
	err := w.cfg.Write(ctx, key, v)
	if ctx.Err() != nil {
		return false
	}
	if err == nil {
		w.queue.Forget(key)
		return true
	}
	if w.cfg.Failed != nil {
		w.cfg.Failed(ctx, key, err)
	}
	w.mu.Lock()
	newer, ok := w.pending[key]
	w.pending[key] = v
	if ok {
		w.put(key, newer)
	}
	w.mu.Unlock()
	w.queue.AddRateLimited(key)
	return true
}
