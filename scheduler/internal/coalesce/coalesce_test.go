package coalesce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// write is one call of Write.
type write struct{ Key, Value string }

// recorder is a Write that records its calls and, for keys in block,
// waits for the test to say what the write returns.
type recorder struct {
	mu     sync.Mutex
	writes []write
	block  map[string]chan error
	// started gets the key of each write that blocks, once it has begun.
	started chan string
	// inFlight counts the writes under way per key; overlapped records a
	// key written by two workers at once.
	inFlight   map[string]int
	overlapped []string
}

func newRecorder(block ...string) *recorder {
	r := &recorder{block: map[string]chan error{}, started: make(chan string, 10), inFlight: map[string]int{}}
	for _, k := range block {
		r.block[k] = make(chan error)
	}
	return r
}

func (r *recorder) write(ctx context.Context, key, v string) error {
	r.mu.Lock()
	r.writes = append(r.writes, write{key, v})
	r.inFlight[key]++
	if r.inFlight[key] > 1 {
		r.overlapped = append(r.overlapped, key)
	}
	done := r.block[key]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[key]--
		r.mu.Unlock()
	}()
	if done == nil {
		return nil
	}
	r.started <- key
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits until n writes were made and returns them.
func (r *recorder) wait(t *testing.T, n int) []write {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := append([]write(nil), r.writes...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for %d writes, got %v", n, got)
		}
		time.Sleep(time.Millisecond)
	}
}

// chain merges by listing the newer wish first.
func chain(newer, older string) string { return newer + "<" + older }

// start runs w until the test ends.
func start[K comparable, V any](t *testing.T, w *Writer[K, V]) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// TestWriterCoalesces: wishes for a key not written yet make one write of
// what Merge makes of them (the latest without Merge), and keys are
// written in the order they were first asked for.
func TestWriterCoalesces(t *testing.T) {
	for _, tc := range []struct {
		name  string
		merge func(newer, older string) string
		want  []write
	}{
		{name: "latest wins", want: []write{{"a", "a3"}, {"b", "b1"}, {"c", "c1"}}},
		{name: "merged", merge: chain, want: []write{{"a", "a3<a2<a1"}, {"b", "b1"}, {"c", "c1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			w := New(Config[string, string]{Name: "test", Workers: 1, Write: r.write, Merge: tc.merge})
			for _, wish := range []write{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"a", "a3"}} {
				w.Add(wish.Key, wish.Value)
			}
			start(t, w)
			r.wait(t, len(tc.want))
			// Give an extra write the time to show.
			time.Sleep(50 * time.Millisecond)
			got := r.wait(t, len(tc.want))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriterWritesAfterWrite: a wish made while its key is being written
// is written after that write, by one worker at a time, even with several.
func TestWriterWritesAfterWrite(t *testing.T) {
	r := newRecorder("a")
	w := New(Config[string, string]{Name: "test", Workers: 4, Write: r.write, Merge: chain})
	start(t, w)
	w.Add("a", "a1")
	<-r.started
	w.Add("a", "a2")
	w.Add("a", "a3")
	w.Add("b", "b1")
	r.wait(t, 2) // b is not held up by a.
	r.block["a"] <- nil
	<-r.started
	r.block["a"] <- nil
	got := r.wait(t, 3)
	want := []write{{"a", "a1"}, {"b", "b1"}, {"a", "a3<a2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.overlapped) != 0 {
		t.Errorf("keys written by two workers at once: %v", r.overlapped)
	}
}

// TestWriterRetries: a failed write is told to Failed and retried, with a
// wish made meanwhile merged over it (or replacing it, without Merge).
func TestWriterRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		merge     func(newer, older string) string
		wantRetry string
	}{
		{name: "latest wins", wantRetry: "a2"},
		{name: "merged", merge: chain, wantRetry: "a2<a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder("a")
			var failed []error
			w := New(Config[string, string]{Name: "test", Write: r.write, Merge: tc.merge,
				Failed: func(_ context.Context, key string, err error) { failed = append(failed, err) }})
			start(t, w)
			w.Add("a", "a1")
			<-r.started
			w.Add("a", "a2")
			errConflict := errors.New("conflict")
			r.block["a"] <- errConflict
			<-r.started
			r.block["a"] <- nil
			got := r.wait(t, 2)
			if diff := cmp.Diff([]write{{"a", "a1"}, {"a", tc.wantRetry}}, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]error{errConflict}, failed, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("failures told (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriterRetriesAlone: a failed write with no newer wish is retried
// with its own value.
func TestWriterRetriesAlone(t *testing.T) {
	r := newRecorder("a")
	w := New(Config[string, string]{Name: "test", Write: r.write, Merge: chain})
	start(t, w)
	w.Add("a", "a1")
	<-r.started
	r.block["a"] <- errors.New("unavailable")
	<-r.started
	r.block["a"] <- nil
	if diff := cmp.Diff([]write{{"a", "a1"}, {"a", "a1"}}, r.wait(t, 2)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// TestWriterShutdown: when the context ends, the write in flight is not
// retried nor told as failed, pending wishes are dropped, and Run returns.
func TestWriterShutdown(t *testing.T) {
	r := newRecorder("a")
	failed := 0
	w := New(Config[string, string]{Name: "test", Write: r.write,
		Failed: func(context.Context, string, error) { failed++ }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	w.Add("a", "a1")
	<-r.started
	w.Add("b", "b1")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if diff := cmp.Diff([]write{{"a", "a1"}}, r.wait(t, 1)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if failed != 0 {
		t.Errorf("Failed was told %d times of a write the shutdown ended", failed)
	}
}
