package volumebinding

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
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
	c, err := newAssumeCache[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	pv := st.MakePV("pv").Capacity("1Gi").ResourceVersion("5").Obj()
	inf.add(pv)

	version := func(want *v1.PersistentVolume, step string) {
		t.Helper()
		got, err := c.get("pv")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: get (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff([]*v1.PersistentVolume{want}, c.list()); diff != "" {
			t.Errorf("%s: list (-want +got):\n%s", step, diff)
		}
	}
	version(pv, "informer object")

	bound := pv.DeepCopy()
	bound.Spec.ClaimRef = &v1.ObjectReference{Namespace: "default", Name: "c", UID: "c"}
	if err := c.assume(bound); err != nil {
		t.Fatal(err)
	}
	version(bound, "assumed")
	if got, _ := c.getAPIObj("pv"); got != pv {
		t.Errorf("getAPIObj returned %v, want the informer's object", got)
	}

	// A resync (same version) keeps the assumption.
	inf.update(pv, pv)
	version(bound, "after a resync")

	// Restoring another version is a no-op; restoring the assumed one reverts.
	other := bound.DeepCopy()
	other.ResourceVersion = "4"
	c.restore(other)
	version(bound, "after restoring another version")
	c.restore(bound)
	version(pv, "restored")

	// Assuming on top of a version the informer no longer has is refused.
	stale := pv.DeepCopy()
	stale.ResourceVersion = "4"
	if err := c.assume(stale); err == nil || err.Error() != `"pv" is out of sync (stored: 5, assume: 4)` {
		t.Errorf("assume stale: %v", err)
	}

	// A newer informer version supersedes the assumption for good.
	if err := c.assume(bound); err != nil {
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
	if err := c.assume(func() *v1.PersistentVolume { p := bound.DeepCopy(); p.ResourceVersion = "6"; return p }()); err != nil {
		t.Fatal(err)
	}
	inf.delete(newer)
	if _, err := c.get("pv"); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if len(c.assumed) != 0 {
		t.Errorf("assumed = %v, want it dropped", c.assumed)
	}
	if err := c.assume(bound); !apierrors.IsNotFound(err) {
		t.Errorf("assume after delete: %v, want NotFound", err)
	}

	if err := c.close(); err != nil || inf.handler != nil {
		t.Errorf("close: err %v, handler still registered: %v", err, inf.handler != nil)
	}
}

// TestAssumeCacheConcurrent is meant for -race: readers, assumptions and
// informer events at once.
func TestAssumeCacheConcurrent(t *testing.T) {
	inf := &fakeInformer{Indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	c, err := newAssumeCache[*v1.PersistentVolume](klog.Background(), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		t.Fatal(err)
	}
	pv := st.MakePV("pv").Obj()
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
					_ = c.assume(p)
					c.restore(p)
				case 1:
					inf.update(pv, pv)
				default:
					_, _ = c.get("pv")
					_ = c.list()
				}
			}
		}()
	}
	wg.Wait()
}
