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
	// podGroupCycleState is the state of the pod-group cycle this pod is
	// placed in; nil once the pod passed it, or when it has no group.
	podGroupCycleState PodGroupCycleState
	// placementCycleState is the state of the placement this pod is tried
	// in, nil outside one. A CycleState that is itself a pod group's state
	// keeps its parent's placement state here (GetParentPlacementCycleState):
	// the two uses never meet in one CycleState.
	placementCycleState PlacementCycleState
}

// PodGroupCycleState is the state of one pod-group scheduling cycle, shared by
// the plugins that act on the group (PlacementGenerate, NormalizePlacementScore,
// PodGroupPostFilter). A *CycleState implements it.
type PodGroupCycleState interface {
	// ShouldRecordPluginMetrics reports whether per-plugin durations are observed.
	ShouldRecordPluginMetrics() bool
	// Read returns the data stored under key, or ErrNotFound.
	Read(key StateKey) (StateData, error)
	// Write stores val under key.
	Write(key StateKey, val StateData)
	// Delete removes key.
	Delete(key StateKey)
	// GetParentPlacementCycleState returns the placement state of the
	// group's parent; nil for a group without one (every leaf PodGroup
	// today).
	GetParentPlacementCycleState() PlacementCycleState
}

// PlacementCycleState is the state of one placement tried in a pod-group
// cycle: shared by every pod tried in it, and given to ScorePlacement and
// PlacementFeasible for it. A *CycleState implements it.
type PlacementCycleState interface {
	// ShouldRecordPluginMetrics reports whether per-plugin durations are observed.
	ShouldRecordPluginMetrics() bool
	// Read returns the data stored under key, or ErrNotFound.
	Read(key StateKey) (StateData, error)
	// Write stores val under key.
	Write(key StateKey, val StateData)
	// Delete removes key.
	Delete(key StateKey)
	// GetPodGroupSchedulingCycle returns the state of the pod-group cycle
	// the placement belongs to.
	GetPodGroupSchedulingCycle() PodGroupCycleState
}

var (
	_ PodGroupCycleState  = (*CycleState)(nil)
	_ PlacementCycleState = (*CycleState)(nil)
)

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

// IsPodGroupSchedulingCycle reports whether the pod is being placed in a
// pod-group cycle; false once it passed it, or when it has no group.
func (c *CycleState) IsPodGroupSchedulingCycle() bool { return c.podGroupCycleState != nil }

// SetPodGroupSchedulingCycle is for the scheduler: it ties the pod's state to
// its group's cycle, or unties it with nil.
func (c *CycleState) SetPodGroupSchedulingCycle(state PodGroupCycleState) {
	c.podGroupCycleState = state
}

// GetPodGroupSchedulingCycle returns the state of the pod's pod-group cycle, or nil.
func (c *CycleState) GetPodGroupSchedulingCycle() PodGroupCycleState { return c.podGroupCycleState }

// GetPlacementCycleState returns the state of the placement the pod is tried in, or nil.
func (c *CycleState) GetPlacementCycleState() PlacementCycleState { return c.placementCycleState }

// GetParentPlacementCycleState returns, for a pod group's state, the
// placement state of its parent group, or nil.
func (c *CycleState) GetParentPlacementCycleState() PlacementCycleState {
	return c.placementCycleState
}

// SetPlacementCycleState is for the scheduler: it sets the placement the pod is tried in.
func (c *CycleState) SetPlacementCycleState(state PlacementCycleState) {
	c.placementCycleState = state
}

// Clone returns a copy in which every StateData is replaced by its Clone().
// The skip sets and flags are shared, not copied: they are written only
// between extension points of the original cycle and never mutated in place.
// The pod-group and placement states are shared too: they belong to the
// group's cycle, not to the pod's, so a clone (a preemption candidate) sees
// the same group. Clone of nil is nil.
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
	out.podGroupCycleState = c.podGroupCycleState
	out.placementCycleState = c.placementCycleState
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

// StateReader is what ReadAs reads from: a *CycleState, a
// PodGroupCycleState or a PlacementCycleState.
type StateReader interface {
	Read(key StateKey) (StateData, error)
}

// ReadAs reads key and asserts its type, so a plugin gets its own state type
// back without repeating the assertion and its error message everywhere.
// A missing key wraps ErrNotFound.
func ReadAs[T StateData](c StateReader, key StateKey) (T, error) {
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
