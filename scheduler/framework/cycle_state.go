package framework

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// ErrNotFound is returned by CycleState.Read for a key that was never written.
var ErrNotFound = errors.New("not found")

// StateData is data a plugin stores in CycleState.
type StateData interface {
	// Clone returns a copy for CycleState.Clone. Preemption clones the state
	// once per candidate node and then calls PreFilterExtensions AddPod /
	// RemovePod on the copy, so Clone must deep-copy whatever those
	// extensions mutate and may share everything else (read-only slices,
	// maps built in PreFilter). Data that is never mutated after it is
	// written may return itself.
	Clone() StateData
}

// StateKey names an entry in CycleState. Plugins use a key derived from their
// name (e.g. "PreFilter" + Name) so entries of different plugins never collide.
type StateKey string

// CycleState carries data between the extension points of one scheduling
// cycle (and its binding cycle). One CycleState is created per pod attempt.
//
// Concurrency: Read, Write and Delete are safe to call from many goroutines
// at once (Filter and Score run in parallel over nodes). The backing store is
// a sync.Map because the access pattern is write-once in PreFilter/PreScore,
// read-many in Filter/Score, which is the case sync.Map is built for: reads
// take no lock. The skip sets and the metrics flag are plain fields written
// only by the framework between extension points, when no plugin runs, and
// read concurrently afterwards.
type CycleState struct {
	storage sync.Map
	// recordPluginMetrics is decided once per cycle by the scheduler; plugin
	// durations are only observed on sampled cycles to keep time.Now() off
	// the per-node path most of the time.
	recordPluginMetrics bool
	// keepRawScores is set by the scheduler when opportunistic batching may
	// keep this cycle's scores (a batching instance signed the pod): only
	// then does Score fill each node's RawScores, nodes × plugins entries
	// no other cycle reads.
	keepRawScores bool
	// skipFilterPlugins are PreFilter plugins that returned Skip: their
	// Filter and PreFilterExtensions are not called this cycle.
	skipFilterPlugins sets.Set[string]
	// skipScorePlugins are PreScore plugins that returned Skip: their Score
	// is not called this cycle.
	skipScorePlugins sets.Set[string]
	// skipPreBindPlugins are PreBind plugins whose PreBindPreFlight returned Skip.
	skipPreBindPlugins sets.Set[string]
	// skipAllPostFilterPlugins lets a cycle opt out of preemption.
	skipAllPostFilterPlugins bool
}

// NewCycleState returns an empty CycleState.
func NewCycleState() *CycleState {
	return &CycleState{}
}

// ShouldRecordPluginMetrics reports whether per-plugin durations are observed this cycle.
func (c *CycleState) ShouldRecordPluginMetrics() bool {
	if c == nil {
		return false
	}
	return c.recordPluginMetrics
}

// SetRecordPluginMetrics sets whether per-plugin durations are observed this cycle.
func (c *CycleState) SetRecordPluginMetrics(flag bool) {
	if c == nil {
		return
	}
	c.recordPluginMetrics = flag
}

// ShouldKeepRawScores reports whether Score fills RawScores this cycle.
func (c *CycleState) ShouldKeepRawScores() bool { return c.keepRawScores }

// SetKeepRawScores sets whether Score fills RawScores this cycle.
func (c *CycleState) SetKeepRawScores(flag bool) { c.keepRawScores = flag }

// SetSkipFilterPlugins is for the framework runtime.
func (c *CycleState) SetSkipFilterPlugins(plugins sets.Set[string]) { c.skipFilterPlugins = plugins }

// GetSkipFilterPlugins is for the framework runtime.
func (c *CycleState) GetSkipFilterPlugins() sets.Set[string] { return c.skipFilterPlugins }

// SetSkipScorePlugins is for the framework runtime.
func (c *CycleState) SetSkipScorePlugins(plugins sets.Set[string]) { c.skipScorePlugins = plugins }

// GetSkipScorePlugins is for the framework runtime.
func (c *CycleState) GetSkipScorePlugins() sets.Set[string] { return c.skipScorePlugins }

// SetSkipPreBindPlugins is for the framework runtime.
func (c *CycleState) SetSkipPreBindPlugins(plugins sets.Set[string]) { c.skipPreBindPlugins = plugins }

// GetSkipPreBindPlugins is for the framework runtime.
func (c *CycleState) GetSkipPreBindPlugins() sets.Set[string] { return c.skipPreBindPlugins }

// SetSkipAllPostFilterPlugins makes RunPostFilterPlugins return Unschedulable without running plugins.
func (c *CycleState) SetSkipAllPostFilterPlugins(flag bool) { c.skipAllPostFilterPlugins = flag }

// ShouldSkipAllPostFilterPlugins is for the framework runtime.
func (c *CycleState) ShouldSkipAllPostFilterPlugins() bool { return c.skipAllPostFilterPlugins }

// Clone returns a copy in which every StateData is replaced by its Clone().
// The skip sets and flags are shared, not copied: they are written only
// between extension points of the original cycle and never mutated in place.
// Clone of nil is nil.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	out := NewCycleState()
	c.storage.Range(func(k, v any) bool {
		out.storage.Store(k, v.(StateData).Clone())
		return true
	})
	out.recordPluginMetrics = c.recordPluginMetrics
	out.keepRawScores = c.keepRawScores
	out.skipFilterPlugins = c.skipFilterPlugins
	out.skipScorePlugins = c.skipScorePlugins
	out.skipPreBindPlugins = c.skipPreBindPlugins
	out.skipAllPostFilterPlugins = c.skipAllPostFilterPlugins
	return out
}

// Read returns the data stored under key, or ErrNotFound.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	if v, ok := c.storage.Load(key); ok {
		return v.(StateData), nil
	}
	return nil, ErrNotFound
}

// Write stores val under key, replacing any previous value.
func (c *CycleState) Write(key StateKey, val StateData) {
	c.storage.Store(key, val)
}

// Delete removes key.
func (c *CycleState) Delete(key StateKey) {
	c.storage.Delete(key)
}

// ReadAs reads key and asserts its type, so a plugin gets its own state type
// back without repeating the assertion and its error message everywhere.
// A missing key wraps ErrNotFound.
func ReadAs[T StateData](c *CycleState, key StateKey) (T, error) {
	var zero T
	v, err := c.Read(key)
	if err != nil {
		return zero, fmt.Errorf("reading %q from cycleState: %w", key, err)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%+v convert to %T error", v, zero)
	}
	return t, nil
}
