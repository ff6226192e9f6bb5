package volumebinding

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// informer is the part of a SharedIndexInformer the assume cache needs.
type informer interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error
	GetIndexer() cache.Indexer
}

// assumeCache overlays objects the scheduler has decided to write (in
// Reserve) on top of an informer's store, so that later scheduling cycles
// see a PV as taken, or a claim as having a selected node, before the API
// server and the informer catch up.
//
// It keeps no copy of the informer's data: the informer's indexer is read
// directly. An assumed object is only ever the informer's object of the
// same resourceVersion with local changes; as soon as the informer holds a
// different version (the write landed, or someone else changed the object)
// the assumed one is stale and the informer's version wins. That makes an
// unreverted assumption harmless once the informer moves on, and it is also
// dropped then to free memory.
type assumeCache[T metav1.Object] struct {
	logger klog.Logger
	gr     schema.GroupResource
	store  cache.Indexer
	// inf and registration let close unhook the cache: informers are
	// shared by all profiles and outlive this plugin instance.
	inf          informer
	registration cache.ResourceEventHandlerRegistration

	// mu guards assumed. Readers take it shared so that the Filter
	// goroutines of one cycle never wait on each other; Assume, Restore
	// and the informer's handlers take it exclusively. The informer's
	// indexer has its own lock, always taken after mu and never held while
	// waiting for mu, so the order mu → indexer cannot deadlock.
	mu      sync.RWMutex
	assumed map[string]T
}

func newAssumeCache[T metav1.Object](logger klog.Logger, inf informer, gr schema.GroupResource) (*assumeCache[T], error) {
	c := &assumeCache[T]{logger: logger, gr: gr, store: inf.GetIndexer(), inf: inf, assumed: map[string]T{}}
	var err error
	c.registration, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.informerChanged(obj) },
		UpdateFunc: func(_, obj any) { c.informerChanged(obj) },
		DeleteFunc: func(obj any) { c.informerChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", gr.Resource, err)
	}
	return c, nil
}

// close stops following the informer.
func (c *assumeCache[T]) close() error {
	return c.inf.RemoveEventHandler(c.registration)
}

// informerChanged drops the assumed object of obj's key unless the
// informer still holds the version it was assumed from (a resync).
func (c *assumeCache[T]) informerChanged(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.logger.Error(err, "Cannot get the key of an informer object", "resource", c.gr.Resource)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	assumed, ok := c.assumed[key]
	if !ok {
		return
	}
	if current, exists, err := c.store.GetByKey(key); err == nil && exists {
		if m, err := meta.Accessor(current); err == nil && m.GetResourceVersion() == assumed.GetResourceVersion() {
			return
		}
	}
	c.logger.V(4).Info("Assumed object superseded by the informer", "resource", c.gr.Resource, "key", key, "version", assumed.GetResourceVersion())
	delete(c.assumed, key)
}

// getAPIObj returns the informer's object, ignoring assumptions.
func (c *assumeCache[T]) getAPIObj(key string) (T, error) {
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

// get returns the assumed object of key if it is still current, else the informer's.
func (c *assumeCache[T]) get(key string) (T, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	obj, err := c.getAPIObj(key)
	if err != nil {
		return obj, err
	}
	return c.overlay(key, obj), nil
}

// overlay returns the assumed version of obj when it was assumed from
// obj's version. Callers hold mu.
func (c *assumeCache[T]) overlay(key string, obj T) T {
	if a, ok := c.assumed[key]; ok && a.GetResourceVersion() == obj.GetResourceVersion() {
		return a
	}
	return obj
}

// byIndex lists the informer's objects of an index value, with assumptions applied.
func (c *assumeCache[T]) byIndex(index, value string) ([]T, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	objs, err := c.store.ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	return c.overlayAll(objs), nil
}

// list lists all the informer's objects, with assumptions applied.
func (c *assumeCache[T]) list() []T {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.overlayAll(c.store.List())
}

func (c *assumeCache[T]) overlayAll(objs []any) []T {
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

// assume records obj as the version the scheduler is about to write. obj
// must carry the resourceVersion the informer holds: assuming on top of a
// version the informer no longer has would hide a newer write.
func (c *assumeCache[T]) assume(obj T) error {
	key := cache.MetaObjectToName(obj).String()
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, err := c.getAPIObj(key)
	if err != nil {
		return err
	}
	if stored.GetResourceVersion() != obj.GetResourceVersion() {
		return fmt.Errorf("%q is out of sync (stored: %s, assume: %s)", key, stored.GetResourceVersion(), obj.GetResourceVersion())
	}
	c.assumed[key] = obj
	c.logger.V(4).Info("Assumed object", "resource", c.gr.Resource, "key", key, "version", obj.GetResourceVersion())
	return nil
}

// restore forgets the assumption made with obj. An assumption of another
// version (made since by another pod) is kept.
func (c *assumeCache[T]) restore(obj T) {
	key := cache.MetaObjectToName(obj).String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.assumed[key]; ok && a.GetResourceVersion() == obj.GetResourceVersion() {
		delete(c.assumed, key)
		c.logger.V(4).Info("Restored object", "resource", c.gr.Resource, "key", key, "version", obj.GetResourceVersion())
	}
}

// storageClassIndex indexes PVs by storage class, so that matching a claim
// only looks at the PVs of its class.
const storageClassIndex = "volumebinding.storageclass"

// pvCache is the assume cache of PersistentVolumes.
type pvCache struct {
	*assumeCache[*v1.PersistentVolume]
	// indexed is false when the informer was already running when this
	// instance was built (another profile started it) and the index could
	// not be added; listing by class then filters the whole store.
	indexed bool
}

func newPVCache(logger klog.Logger, inf cache.SharedIndexInformer) (*pvCache, error) {
	indexed := true
	if inf.GetIndexer().GetIndexers()[storageClassIndex] == nil {
		err := inf.AddIndexers(cache.Indexers{storageClassIndex: func(obj any) ([]string, error) {
			pv, ok := obj.(*v1.PersistentVolume)
			if !ok {
				return nil, fmt.Errorf("want a PersistentVolume, got %T", obj)
			}
			return []string{storagehelpers.GetPersistentVolumeClass(pv)}, nil
		}})
		if err != nil {
			logger.V(2).Info("Cannot index PersistentVolumes by storage class; listing them all", "err", err)
			indexed = false
		}
	}
	c, err := newAssumeCache[*v1.PersistentVolume](klog.LoggerWithName(logger, "pv-cache"), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		return nil, err
	}
	return &pvCache{assumeCache: c, indexed: indexed}, nil
}

// listPVs returns the PVs of storage class className ("" for none).
func (c *pvCache) listPVs(className string) ([]*v1.PersistentVolume, error) {
	if c.indexed {
		return c.byIndex(storageClassIndex, className)
	}
	var out []*v1.PersistentVolume
	for _, pv := range c.list() {
		if storagehelpers.GetPersistentVolumeClass(pv) == className {
			out = append(out, pv)
		}
	}
	return out, nil
}

// pvcCache is the assume cache of PersistentVolumeClaims, keyed "namespace/name".
type pvcCache = assumeCache[*v1.PersistentVolumeClaim]

func newPVCCache(logger klog.Logger, inf informer) (*pvcCache, error) {
	return newAssumeCache[*v1.PersistentVolumeClaim](klog.LoggerWithName(logger, "pvc-cache"), inf, schema.GroupResource{Resource: "persistentvolumeclaims"})
}
