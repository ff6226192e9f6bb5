package assumecache

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// fakeInformer is an indexer whose event handler the test drives, so the
// order of store changes and notifications is explicit.
type fakeInformer struct {
	cache.Indexer
	handler cache.ResourceEventHandler
}

func (f *fakeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return nil, nil
}

func (f *fakeInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	f.handler = nil
	return nil
}

func (f *fakeInformer) GetIndexer() cache.Indexer { return f.Indexer }

func (f *fakeInformer) add(obj any) {
	_ = f.Add(obj)
	f.handler.OnAdd(obj, false)
}

func (f *fakeInformer) update(old, obj any) {
	_ = f.Update(obj)
	f.handler.OnUpdate(old, obj)
}

func (f *fakeInformer) delete(obj any) {
	_ = f.Delete(obj)
	f.handler.OnDelete(obj)
}

func TestAssumeCache(t *testing.T) {
	inf := &fakeInformer{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c, err := New[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", UID: "pv-uid", ResourceVersion: "5"}}
	inf.add(pv)

	version := func(want *v1.PersistentVolume, step string) {
		t.Helper()
		got, err := c.Get("pv")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: get (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff([]*v1.PersistentVolume{want}, c.List()); diff != "" {
			t.Errorf("%s: list (-want +got):\n%s", step, diff)
		}
	}
	version(pv, "informer object")

	bound := pv.DeepCopy()
	bound.Spec.ClaimRef = &v1.ObjectReference{Namespace: "default", Name: "c", UID: "c"}
	if err := c.Assume(bound); err != nil {
		t.Fatal(err)
	}
	version(bound, "assumed")
	if got, _ := c.GetAPIObj("pv"); got != pv {
		t.Errorf("getAPIObj returned %v, want the informer's object", got)
	}

	// A resync (same version) keeps the assumption.
	inf.update(pv, pv)
	version(bound, "after a resync")

	// Restoring another version is a no-op; restoring the assumed one reverts.
	other := bound.DeepCopy()
	other.ResourceVersion = "4"
	c.Restore(other)
	version(bound, "after restoring another version")
	c.Restore(bound)
	version(pv, "restored")

	// Assuming on top of a version the informer no longer has is refused.
	stale := pv.DeepCopy()
	stale.ResourceVersion = "4"
	if err := c.Assume(stale); err == nil || err.Error() != `"pv" is out of sync (stored: 5, assume: 4)` {
		t.Errorf("assume stale: %v", err)
	}

	// A newer informer version supersedes the assumption for good.
	if err := c.Assume(bound); err != nil {
		t.Fatal(err)
	}
	newer := pv.DeepCopy()
	newer.ResourceVersion = "6"
	inf.update(pv, newer)
	version(newer, "superseded")
	if len(c.assumed) != 0 {
		t.Errorf("assumed = %v, want it dropped", c.assumed)
	}

	// Deletion drops both.
	if err := c.Assume(func() *v1.PersistentVolume { p := bound.DeepCopy(); p.ResourceVersion = "6"; return p }()); err != nil {
		t.Fatal(err)
	}
	inf.delete(newer)
	if _, err := c.Get("pv"); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if len(c.assumed) != 0 {
		t.Errorf("assumed = %v, want it dropped", c.assumed)
	}
	if err := c.Assume(bound); !apierrors.IsNotFound(err) {
		t.Errorf("assume after delete: %v, want NotFound", err)
	}

	if err := c.Close(); err != nil || inf.handler != nil {
		t.Errorf("close: err %v, handler still registered: %v", err, inf.handler != nil)
	}
}

// TestAssumeCacheConcurrent is meant for -race: readers, assumptions and
// informer events at once.
func TestAssumeCacheConcurrent(t *testing.T) {
	inf := &fakeInformer{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c, err := New[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}}
	inf.add(pv)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				switch i {
				case 0:
					p := pv.DeepCopy()
					p.Spec.StorageClassName = "x"
					_ = c.Assume(p)
					c.Restore(p)
				case 1:
					inf.update(pv, pv)
				default:
					_, _ = c.Get("pv")
					_ = c.List()
				}
			}
		}()
	}
	wg.Wait()
}

// TestAssumeWritten follows an object written to the API server: it is
// shown, and reported to handlers, before the informer sees the write, and
// the informer's events that follow report no change of what is shown.
func TestAssumeWritten(t *testing.T) {
	inf := &fakeInformer{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c, err := New[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	_, _ = c.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { events = append(events, "add "+obj.(*v1.PersistentVolume).ResourceVersion) },
		UpdateFunc: func(old, obj any) {
			events = append(events, "update "+old.(*v1.PersistentVolume).ResourceVersion+"->"+obj.(*v1.PersistentVolume).ResourceVersion)
		},
		DeleteFunc: func(obj any) { events = append(events, "delete "+obj.(*v1.PersistentVolume).ResourceVersion) },
	})
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", UID: "pv-uid", ResourceVersion: "5"}}
	inf.add(pv)

	written := pv.DeepCopy()
	written.ResourceVersion = "6"
	written.Spec.StorageClassName = "written"
	if err := c.AssumeWritten(written); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get("pv"); got != written {
		t.Errorf("Get after AssumeWritten = %v, want the written object", got)
	}
	// A resync of the replaced version keeps it.
	inf.update(pv, pv)
	if got, _ := c.Get("pv"); got != written {
		t.Errorf("Get after a resync = %v, want the written object", got)
	}
	// The informer catching up drops it.
	inf.update(pv, written)
	if len(c.assumed) != 0 {
		t.Errorf("assumed = %v, want it dropped", c.assumed)
	}
	// Nothing to assume once the informer has the version.
	if err := c.AssumeWritten(written); err != nil || len(c.assumed) != 0 {
		t.Errorf("AssumeWritten of the stored version: err %v, assumed %v", err, c.assumed)
	}
	// A write of an object that was replaced meanwhile is refused.
	other := written.DeepCopy()
	other.UID, other.ResourceVersion = "other", "9"
	if err := c.AssumeWritten(other); err == nil {
		t.Error("AssumeWritten of a replaced object succeeded")
	}

	// Restoring by key shows the informer's object again.
	again := written.DeepCopy()
	again.ResourceVersion = "7"
	if err := c.AssumeWritten(again); err != nil {
		t.Fatal(err)
	}
	c.RestoreKey("pv")
	if got, _ := c.Get("pv"); got != written {
		t.Errorf("Get after RestoreKey = %v, want the informer's object", got)
	}
	inf.delete(written)

	want := []string{"add 5", "update 5->6", "update 6->6", "update 6->6", "update 6->7", "update 7->6", "delete 6"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestHandlerReadsCache checks that handlers may read the cache, as the
// scheduling queue's does (its queueing hints and PreEnqueue plugins look
// claims up), and see the change they are told of: each change of the
// informer, Assume, AssumeWritten and Restore is delivered without the
// cache's lock held.
func TestHandlerReadsCache(t *testing.T) {
	inf := &fakeInformer{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c, err := New[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	read := func() {
		pv, err := c.Get("pv")
		if err != nil {
			seen = append(seen, "gone")
			return
		}
		seen = append(seen, pv.ResourceVersion+pv.Spec.StorageClassName)
	}
	_, _ = c.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { read() },
		UpdateFunc: func(any, any) { read() },
		DeleteFunc: func(any) { read() },
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", UID: "pv-uid", ResourceVersion: "5"}}
		inf.add(pv)
		assumed := pv.DeepCopy()
		assumed.Spec.StorageClassName = "-assumed"
		_ = c.Assume(assumed)
		c.Restore(assumed)
		written := pv.DeepCopy()
		written.ResourceVersion = "6"
		_ = c.AssumeWritten(written)
		c.RestoreKey("pv")
		inf.delete(pv)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a handler reading the cache deadlocked")
	}
	want := []string{"5", "5-assumed", "5", "6", "5", "gone"}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("what handlers read (-want +got):\n%s", diff)
	}
}
