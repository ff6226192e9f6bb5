package volumebinding

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/assumecache"
)

// storageClassIndex indexes PVs by storage class, so that matching a claim
// only looks at the PVs of its class.
const storageClassIndex = "volumebinding.storageclass"

// pvCache is the assume cache of PersistentVolumes.
type pvCache struct {
	*assumecache.Cache[*v1.PersistentVolume]
	// indexed is false when the informer was already running when this
	// instance was built (another profile started it) and the index could
	// not be added; listing by class then filters the whole store.
	indexed bool
}

func newPVCache(logger klog.Logger, inf cache.SharedIndexInformer) (*pvCache, error) {
	indexed, err := framework.AddIndex(inf, storageClassIndex, func(obj any) ([]string, error) {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return nil, fmt.Errorf("want a PersistentVolume, got %T", obj)
		}
		return []string{storagehelpers.GetPersistentVolumeClass(pv)}, nil
	})
	if !indexed {
		logger.V(2).Info("Cannot index PersistentVolumes by storage class; listing them all", "err", err)
	}
	c, err := assumecache.New[*v1.PersistentVolume](klog.LoggerWithName(logger, "pv-cache"), inf, schema.GroupResource{Resource: "persistentvolumes"})
	if err != nil {
		return nil, err
	}
	return &pvCache{Cache: c, indexed: indexed}, nil
}

// listPVs returns the PVs of storage class className ("" for none).
func (c *pvCache) listPVs(className string) ([]*v1.PersistentVolume, error) {
	if c.indexed {
		return c.ByIndex(storageClassIndex, className)
	}
	var out []*v1.PersistentVolume
	for _, pv := range c.List() {
		if storagehelpers.GetPersistentVolumeClass(pv) == className {
			out = append(out, pv)
		}
	}
	return out, nil
}

// pvcCache is the assume cache of PersistentVolumeClaims, keyed "namespace/name".
type pvcCache = assumecache.Cache[*v1.PersistentVolumeClaim]

func newPVCCache(logger klog.Logger, inf assumecache.Informer) (*pvcCache, error) {
	return assumecache.New[*v1.PersistentVolumeClaim](klog.LoggerWithName(logger, "pvc-cache"), inf, schema.GroupResource{Resource: "persistentvolumeclaims"})
}
