// Package profiles holds the live set of framework instances that the
// scheduling loop serves, keyed by schedulerName.
//
// Publishing replaces an instance atomically: a scheduling or binding cycle
// that started on the old instance finishes on it, and pods waiting at Permit
// in it stay approvable. The old instance is closed once the last cycle that
// uses it has released it. Removing a profile rejects the pods waiting in
// every instance of it, the serving one and those still retiring, so that
// none of them can be approved and bound after the profile is gone; they
// return to pending, and the instances are closed the same way.
//
// Lock order: changeMu, then mu, then an instance's own waiting-pods lock
// (GetWaitingPod calls into the instance under mu). Rejecting a waiting pod
// makes its binding cycle release its Ref, which takes mu, so pods are
// rejected with only changeMu held. OnRetired hooks run under mu and take
// no lock of the set's.
package profiles

import (
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Set is the live set of instances. The zero value is not usable; use NewSet.
type Set struct {
	// changeMu serializes Publish and Remove with the notification of
	// subscribers, so every subscriber sees changes in the order they were
	// made. Subscribers run with it held and must not publish or remove.
	// Taken before mu, never while holding it.
	changeMu sync.Mutex

	// mu guards serving and retiring. The scheduling loop takes it for
	// reading once per pod (Acquire); writers hold it only for a map update
	// or to list instances. Taken after changeMu; under it the only other
	// lock taken is an instance's waiting-pods lock (GetWaitingPod), and
	// no waiting pod is ever allowed or rejected.
	mu      sync.RWMutex
	serving map[string]*instance
	// retiring maps each replaced or removed instance still in use to the
	// schedulerName it served, so that Remove finds every generation.
	retiring map[*instance]string

	subscribers []func(name string, fwk framework.Framework)
	// retiredHooks is guarded by mu: release runs them under it.
	retiredHooks []func(name string)
	logger       klog.Logger
}

// instance is one framework instance and the count of its users. The set's
// own reference (while serving) counts as one, so refs reaches zero only
// after the instance was retired and every cycle released it.
type instance struct {
	fwk  framework.Framework
	refs atomic.Int64
	// permit lists the instance's Permit plugins, read from it the first
	// time they are asked for: they never change once it is built.
	permit func() []string
}

func newInstance(fwk framework.Framework) *instance {
	inst := &instance{fwk: fwk, permit: sync.OnceValue(func() []string {
		var names []string
		if plugins := fwk.ListPlugins(); plugins != nil {
			for _, p := range plugins.Permit.Enabled {
				names = append(names, p.Name)
			}
		}
		return names
	})}
	inst.refs.Store(1)
	return inst
}

// Ref is one use of an instance, taken by Acquire. The instance is not closed
// before the Ref is released; release it exactly once.
type Ref struct {
	set  *Set
	inst *instance
}

// NewSet returns an empty set.
func NewSet(logger klog.Logger) *Set {
	return &Set{
		serving:  map[string]*instance{},
		retiring: map[*instance]string{},
		logger:   logger,
	}
}

// Subscribe registers fn to be called after every change: with the new
// instance after Publish, with nil after Remove. fn runs synchronously, in
// change order, and must not call Publish or Remove.
func (s *Set) Subscribe(fn func(name string, fwk framework.Framework)) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.subscribers = append(s.subscribers, fn)
}

// OnRetired registers fn to be called when name is retired: it is not
// served and the last instance that served it, removed or replaced, was
// released by its last user (it is closed right after), so no cycle of it
// is left to report anything under that name (e.g. metrics labelled with
// the profile). A name published again later is retired again when it
// goes. fn runs with the set's lock held, so that a Publish of the same
// name waits for it; it must not call into the set.
func (s *Set) OnRetired(fn func(name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retiredHooks = append(s.retiredHooks, fn)
}

// Publish makes fwk serve name. An instance it replaces is retired: it is
// closed once released by every cycle that uses it.
func (s *Set) Publish(name string, fwk framework.Framework) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()

	inst := newInstance(fwk)
	s.mu.Lock()
	old := s.serving[name]
	s.serving[name] = inst
	if old != nil {
		s.retiring[old] = name
	}
	s.mu.Unlock()
	if old != nil {
		s.release(old)
	}
	s.notify(name, fwk)
}

// Remove stops serving name. Pods waiting at Permit in any instance of it,
// the serving one and every one still retiring after a Publish replaced it,
// are rejected with msg so they return to pending and their reservations
// are released by their binding cycles; cycles in flight finish. It reports
// whether name was served.
func (s *Set) Remove(name, msg string) bool {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()

	s.mu.Lock()
	old := s.serving[name]
	if old == nil {
		s.mu.Unlock()
		return false
	}
	delete(s.serving, name)
	s.retiring[old] = name
	var instances []*instance
	for inst, n := range s.retiring {
		if n == name {
			instances = append(instances, inst)
		}
	}
	s.mu.Unlock()
	// Without mu: a rejection makes the pod's binding cycle release its
	// Ref, which takes mu. A retiring instance may be closed meanwhile by
	// its last release; rejecting its pods again is then a no-op, as Close
	// rejects them itself. Collect before rejecting: IterateOverWaitingPods
	// holds the instance's lock, and a rejected pod's binding cycle removes
	// it from there.
	var waiting []framework.WaitingPod
	for _, inst := range instances {
		inst.fwk.IterateOverWaitingPods(func(wp framework.WaitingPod) { waiting = append(waiting, wp) })
	}
	for _, wp := range waiting {
		wp.Reject("", msg)
	}
	s.release(old)
	s.notify(name, nil)
	return true
}

// Acquire returns the instance serving name, held until the Ref is released.
func (s *Set) Acquire(name string) (Ref, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	inst := s.serving[name]
	if inst == nil {
		return Ref{}, false
	}
	// Safe under the read lock: a serving instance still holds the set's
	// reference, so refs cannot drop to zero before this increment.
	inst.refs.Add(1)
	return Ref{set: s, inst: inst}, true
}

// Get returns the instance serving name without holding it, for callers
// that only read its configuration.
func (s *Set) Get(name string) framework.Framework {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if inst := s.serving[name]; inst != nil {
		return inst.fwk
	}
	return nil
}

// Names returns the served schedulerNames, sorted.
func (s *Set) Names() []string {
	s.mu.RLock()
	names := make([]string, 0, len(s.serving))
	for name := range s.serving {
		names = append(names, name)
	}
	s.mu.RUnlock()
	slices.Sort(names)
	return names
}

// GetWaitingPod finds the pod with uid waiting at Permit in any instance,
// serving or retiring, and returns it with the schedulerName it belongs to.
func (s *Set) GetWaitingPod(uid types.UID) (framework.WaitingPod, string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for name, inst := range s.serving {
		if wp := inst.fwk.GetWaitingPod(uid); wp != nil {
			return wp, name
		}
	}
	for inst, name := range s.retiring {
		if wp := inst.fwk.GetWaitingPod(uid); wp != nil {
			return wp, name
		}
	}
	return nil, ""
}

// WaitingPodRunsPermit reports whether the instance in which the pod with
// uid waits at Permit, serving or retiring, runs plugin at Permit: what the
// pod's wait answers to comes from the instance holding it, not from
// whichever instance serves its profile's name now. False when no instance
// holds the pod.
func (s *Set) WaitingPodRunsPermit(uid types.UID, plugin string) bool {
	s.mu.RLock()
	var holder *instance
	for _, inst := range s.serving {
		if inst.fwk.GetWaitingPod(uid) != nil {
			holder = inst
			break
		}
	}
	for inst := range s.retiring {
		if holder == nil && inst.fwk.GetWaitingPod(uid) != nil {
			holder = inst
		}
	}
	s.mu.RUnlock()
	// The plugin list is read without mu: building it calls into the
	// instance, and the instance stays valid to read after it is closed.
	return holder != nil && slices.Contains(holder.permit(), plugin)
}

// WaitingInRetiring calls fn for each pod waiting at Permit in an instance
// that served name and was replaced or removed but is still in use, with
// that instance. fn runs without the set's locks and may reject the pod;
// subscribers may call it.
func (s *Set) WaitingInRetiring(name string, fn func(fwk framework.Framework, wp framework.WaitingPod)) {
	s.mu.RLock()
	var instances []*instance
	for inst, n := range s.retiring {
		if n == name {
			instances = append(instances, inst)
		}
	}
	s.mu.RUnlock()
	// Collected before fn runs, as in Remove: a rejected pod's binding
	// cycle removes it from its instance under the lock the iteration holds.
	type waiting struct {
		fwk framework.Framework
		wp  framework.WaitingPod
	}
	var pods []waiting
	for _, inst := range instances {
		inst.fwk.IterateOverWaitingPods(func(wp framework.WaitingPod) { pods = append(pods, waiting{inst.fwk, wp}) })
	}
	for _, w := range pods {
		fn(w.fwk, w.wp)
	}
}

// Retiring returns how many replaced or removed instances are still in use.
func (s *Set) Retiring() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.retiring)
}

// Framework returns the held instance.
func (r Ref) Framework() framework.Framework { return r.inst.fwk }

// Hold takes one more use of r's instance, released on its own, for work
// an attempt hands on (the binding cycles of a pod group's pods). r must
// not have been released yet.
func (r Ref) Hold() Ref {
	r.inst.refs.Add(1)
	return r
}

// Release ends this use of the instance.
func (r Ref) Release() { r.set.release(r.inst) }

func (s *Set) release(inst *instance) {
	if inst.refs.Add(-1) > 0 {
		return
	}
	s.mu.Lock()
	name := s.retiring[inst]
	delete(s.retiring, inst)
	if s.retiredLocked(name) {
		for _, fn := range s.retiredHooks {
			fn(name)
		}
	}
	s.mu.Unlock()
	if err := inst.fwk.Close(); err != nil {
		s.logger.Error(err, "Closing a retired framework instance", "profile", name)
	}
}

// retiredLocked reports whether no instance, serving or retiring, is left
// for name; the caller holds mu.
func (s *Set) retiredLocked(name string) bool {
	if _, ok := s.serving[name]; ok {
		return false
	}
	for _, n := range s.retiring {
		if n == name {
			return false
		}
	}
	return true
}

func (s *Set) notify(name string, fwk framework.Framework) {
	for _, fn := range s.subscribers {
		fn(name, fwk)
	}
}
