// Package assumecache overlays objects the scheduler has decided to write,
// or has just written, on top of an informer's store, so that later
// scheduling cycles see them before the informer catches up. VolumeBinding
// uses it for PersistentVolumes and PersistentVolumeClaims, DynamicResources
// for ResourceClaims.
package assumecache

import (
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Informer is the part of a SharedIndexInformer the cache needs.
type Informer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error
	GetIndexer() cache.Indexer
}

// Cache overlays assumed objects on an informer's store.
//
// It keeps no copy of the informer's data: the informer's indexer is read
// directly. An assumed object overlays one version of the informer's
// object, its base: the same version with local changes (Assume, before a
// write), or the version a write just replaced (AssumeWritten, after it).
// As soon as the informer holds another version (the write landed, or
// someone else changed the object) the assumed one is stale and the
// informer's version wins. That makes an unreverted assumption harmless
// once the informer moves on, and it is also dropped then to free memory.
type Cache[T metav1.Object] struct {
	logger klog.Logger
	gr     schema.GroupResource
	store  cache.Indexer
	// inf and registration let Close unhook the cache: informers are
	// shared and may outlive the cache.
	inf          Informer
	registration cache.ResourceEventHandlerRegistration

	// mu guards assumed, handlers, events and emitting. Readers take it
	// shared so that the Filter goroutines of one cycle never wait on each
	// other; Assume, Restore and the informer's handler take it
	// exclusively. The informer's indexer has its own lock, always taken
	// after mu and never held while waiting for mu, so the order mu →
	// indexer cannot deadlock.
	mu       sync.RWMutex
	assumed  map[string]entry[T]
	handlers []cache.ResourceEventHandler

	// events holds the handler calls of changes made under mu, delivered
	// in order by emit once mu is released: a handler may read the cache
	// (the scheduling queue's handler runs queueing hints and PreEnqueue
	// plugins, which look claims up), so calling it under mu would
	// deadlock, as upstream's assume cache explains. emitting is true
	// while one goroutine delivers; others wait on emitDone (whose
	// locker is mu) and then deliver what is left, so every change is
	// delivered before the call that made it returns.
	events   []func()
	emitting bool
	emitDone *sync.Cond
}

type entry[T metav1.Object] struct {
	obj T
	// base is the informer's resourceVersion obj overlays.
	base string
}

// New follows inf. gr names the resource in errors and logs.
func New[T metav1.Object](logger klog.Logger, inf Informer, gr schema.GroupResource) (*Cache[T], error) {
	c := &Cache[T]{logger: logger, gr: gr, store: inf.GetIndexer(), inf: inf, assumed: map[string]entry[T]{}}
	c.emitDone = sync.NewCond(&c.mu)
	var err error
	c.registration, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.informerChanged(nil, obj) },
		UpdateFunc: func(old, obj any) { c.informerChanged(old, obj) },
		DeleteFunc: func(obj any) { c.informerChanged(obj, nil) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", gr.Resource, err)
	}
	return c, nil
}

// Close stops following the informer.
func (c *Cache[T]) Close() error {
	return c.inf.RemoveEventHandler(c.registration)
}

// AddEventHandler reports changes of what the cache shows (informer
// objects with assumptions applied), in order: the informer's changes,
// Assume, AssumeWritten and Restore. Handlers are called one at a time,
// without the cache's lock held, so they may read the cache. Add them
// before the informer starts: objects already in the store are not
// replayed. The registration returned is the cache's own with the
// informer: it has synced once every handler saw the initial objects.
func (c *Cache[T]) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers = append(c.handlers, h)
	return c.registration, nil
}

// HasSynced reports whether the informer synced and the cache saw its
// initial objects.
func (c *Cache[T]) HasSynced() bool {
	return c.registration.HasSynced()
}

// informerChanged drops the assumed object of the changed key unless the
// informer still holds its base (a resync), and reports the change as
// seen through the overlay. old is nil for an add, obj nil for a delete.
func (c *Cache[T]) informerChanged(old, obj any) {
	if t, ok := old.(cache.DeletedFinalStateUnknown); ok {
		old = t.Obj
	}
	keyObj := obj
	if keyObj == nil {
		keyObj = old
	}
	key, err := cache.MetaNamespaceKeyFunc(keyObj)
	if err != nil {
		c.logger.Error(err, "Cannot get the key of an informer object", "resource", c.gr.Resource)
		return
	}
	defer c.emit()
	c.mu.Lock()
	defer c.mu.Unlock()
	oldShown, newShown := c.shown(key, old), c.shown(key, obj)
	if e, ok := c.assumed[key]; ok && (obj == nil || resourceVersion(obj) != e.base) {
		c.logger.V(4).Info("Assumed object superseded by the informer", "resource", c.gr.Resource, "key", key, "version", e.obj.GetResourceVersion())
		delete(c.assumed, key)
		newShown = obj
	}
	c.notify(oldShown, newShown)
}

// shown returns what the cache shows for obj, an informer object of key (nil stays nil).
func (c *Cache[T]) shown(key string, obj any) any {
	if obj == nil {
		return nil
	}
	if e, ok := c.assumed[key]; ok && resourceVersion(obj) == e.base {
		return e.obj
	}
	return obj
}

// notify queues the handlers' calls for a change from old to obj; the
// caller delivers them with emit once it released mu. Callers hold mu.
func (c *Cache[T]) notify(old, obj any) {
	for _, h := range c.handlers {
		switch {
		case old == nil && obj != nil:
			c.events = append(c.events, func() { h.OnAdd(obj, false) })
		case old != nil && obj == nil:
			c.events = append(c.events, func() { h.OnDelete(old) })
		case old != nil:
			c.events = append(c.events, func() { h.OnUpdate(old, obj) })
		}
	}
}

// emit delivers the queued handler calls in order, without holding mu. One
// goroutine delivers at a time, so each handler sees the changes in the
// order they were made; a caller that finds another delivering waits for
// it, then delivers what is left. Callers must not hold mu.
func (c *Cache[T]) emit() {
	c.mu.Lock()
	for c.emitting {
		c.emitDone.Wait()
	}
	c.emitting = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.emitting = false
		c.emitDone.Signal()
		c.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		if len(c.events) == 0 {
			c.events = nil
			c.mu.Unlock()
			return
		}
		deliver := c.events[0]
		c.events[0] = nil
		c.events = c.events[1:]
		c.mu.Unlock()
		deliver()
	}
}

func resourceVersion(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// GetAPIObj returns the informer's object, ignoring assumptions.
func (c *Cache[T]) GetAPIObj(key string) (T, error) {
	var zero T
	obj, ok, err := c.store.GetByKey(key)
	if err != nil {
		return zero, err
	}
	if !ok {
		return zero, apierrors.NewNotFound(c.gr, key)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("object %q is a %T, not a %T", key, obj, zero)
	}
	return t, nil
}

// Get returns the assumed object of key if it is still current, else the
// informer's. key is "namespace/name", or "name" for cluster objects.
func (c *Cache[T]) Get(key string) (T, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	obj, err := c.GetAPIObj(key)
	if err != nil {
		return obj, err
	}
	return c.overlay(key, obj), nil
}

// overlay returns the assumed version of obj when it overlays obj's
// version. Callers hold mu.
func (c *Cache[T]) overlay(key string, obj T) T {
	if e, ok := c.assumed[key]; ok && e.base == obj.GetResourceVersion() {
		return e.obj
	}
	return obj
}

// ByIndex lists the informer's objects of an index value, with assumptions applied.
func (c *Cache[T]) ByIndex(index, value string) ([]T, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	objs, err := c.store.ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	return c.overlayAll(objs), nil
}

// List lists all the informer's objects, with assumptions applied.
func (c *Cache[T]) List() []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.overlayAll(c.store.List())
}

func (c *Cache[T]) overlayAll(objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, ok := o.(T)
		if !ok {
			continue
		}
		out = append(out, c.overlay(cache.MetaObjectToName(t).String(), t))
	}
	return out
}

// Assume records obj as the version the scheduler is about to write. obj
// must carry the resourceVersion the informer holds: assuming on top of a
// version the informer no longer has would hide a newer write.
func (c *Cache[T]) Assume(obj T) error {
	key := cache.MetaObjectToName(obj).String()
	defer c.emit()
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := c.GetAPIObj(key)
	if err != nil {
		return err
	}
	if stored.GetResourceVersion() != obj.GetResourceVersion() {
		return fmt.Errorf("%q is out of sync (stored: %s, assume: %s)", key, stored.GetResourceVersion(), obj.GetResourceVersion())
	}
	c.set(key, entry[T]{obj: obj, base: stored.GetResourceVersion()}, stored)
	return nil
}

// AssumeWritten records obj, just returned by a write to the API server,
// until the informer sees it: it overlays the version the informer holds
// now, which the write replaced. When the informer already holds obj's
// version there is nothing to assume.
func (c *Cache[T]) AssumeWritten(obj T) error {
	key := cache.MetaObjectToName(obj).String()
	defer c.emit()
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := c.GetAPIObj(key)
	if err != nil {
		return err
	}
	if stored.GetUID() != obj.GetUID() {
		return fmt.Errorf("%q was replaced (stored UID: %s, written: %s)", key, stored.GetUID(), obj.GetUID())
	}
	if stored.GetResourceVersion() == obj.GetResourceVersion() {
		return nil
	}
	c.set(key, entry[T]{obj: obj, base: stored.GetResourceVersion()}, stored)
	return nil
}

// set records e for key and reports the change. Callers hold mu.
func (c *Cache[T]) set(key string, e entry[T], stored T) {
	old := c.overlay(key, stored)
	c.assumed[key] = e
	c.logger.V(4).Info("Assumed object", "resource", c.gr.Resource, "key", key, "version", e.obj.GetResourceVersion(), "base", e.base)
	c.notify(old, e.obj)
}

// Restore forgets the assumption made with obj. An assumption of another
// version (made since by another pod) is kept.
func (c *Cache[T]) Restore(obj T) {
	key := cache.MetaObjectToName(obj).String()
	defer c.emit()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.assumed[key]; ok && e.obj.GetResourceVersion() == obj.GetResourceVersion() {
		c.restoreLocked(key, e)
	}
}

// RestoreKey forgets any assumption for key.
func (c *Cache[T]) RestoreKey(key string) {
	defer c.emit()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.assumed[key]; ok {
		c.restoreLocked(key, e)
	}
}

func (c *Cache[T]) restoreLocked(key string, e entry[T]) {
	delete(c.assumed, key)
	c.logger.V(4).Info("Restored object", "resource", c.gr.Resource, "key", key, "version", e.obj.GetResourceVersion())
	if stored, err := c.GetAPIObj(key); err == nil && stored.GetResourceVersion() == e.base {
		c.notify(e.obj, stored)
	}
}
