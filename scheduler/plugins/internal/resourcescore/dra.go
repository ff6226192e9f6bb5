package resourcescore

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
)

// DRA counts, for scoring, a node's devices of the DeviceClass behind an
// extended resource backed by DRA (DRAExtendedResource, on by default in
// 1.37) as its allocatable amount and those in use as allocated, where
// the node does not have the resource as allocatable: upstream's
// draPreScoreState and calculateDRAResourceTotals. It is gathered once per
// cycle in PreScore and read-only afterwards.
type DRA struct {
	resolver  framework.DeviceClassResolver
	allocated *structured.AllocatedState
	matches   *MatchCache
	// byNode holds the slices of one node (spec.nodeName), others the
	// slices that may match any node: counting a node's devices looks at
	// both, where upstream looks at every slice, with the same result.
	byNode map[string][]*resourceapi.ResourceSlice
	others []*resourceapi.ResourceSlice
}

// MatchCache remembers, across cycles, which devices of a ResourceSlice
// match a DeviceClass's selectors, so that scoring evaluates CEL once per
// slice and class rather than once per pod. Slices and classes come from
// informer stores, where a change replaces the object: a pair seen before
// has the same answer. Upstream caches by device name and expression
// instead, which keeps a stale answer when a device's attributes change.
// Only pairs of current slices and classes are kept.
type MatchCache struct {
	celCache *cel.Cache
	// mutex guards matches, read and written by parallel Score calls and
	// pruned in PreScore.
	mutex   sync.Mutex
	matches map[matchKey][]bool
}

type matchKey struct {
	slice *resourceapi.ResourceSlice
	class *resourceapi.DeviceClass
}

// NewMatchCache returns an empty cache compiling selectors as upstream's
// NodeResourcesFit does.
func NewMatchCache() *MatchCache {
	return &MatchCache{celCache: cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}), matches: map[matchKey][]bool{}}
}

// prune forgets the pairs of slices no longer listed or of classes no
// longer current (a changed DeviceClass is a new object).
func (c *MatchCache) prune(slices []*resourceapi.ResourceSlice, classes map[*resourceapi.DeviceClass]bool) {
	current := make(map[*resourceapi.ResourceSlice]bool, len(slices))
	for _, s := range slices {
		current[s] = true
	}
	c.mutex.Lock()
	defer c.mutex.Unlock()
	for k := range c.matches {
		if !current[k.slice] || !classes[k.class] {
			delete(c.matches, k)
		}
	}
}

// deviceMatches returns, per device of slice, whether it matches class.
func (c *MatchCache) deviceMatches(ctx context.Context, slice *resourceapi.ResourceSlice, class *resourceapi.DeviceClass) ([]bool, error) {
	key := matchKey{slice: slice, class: class}
	c.mutex.Lock()
	matches, ok := c.matches[key]
	c.mutex.Unlock()
	if ok {
		return matches, nil
	}
	matches = make([]bool, len(slice.Spec.Devices))
	for i := range slice.Spec.Devices {
		match, err := c.deviceMatchesClass(ctx, &slice.Spec.Devices[i], class, slice.Spec.Driver)
		if err != nil {
			return nil, err
		}
		matches[i] = match
	}
	c.mutex.Lock()
	c.matches[key] = matches
	c.mutex.Unlock()
	return matches, nil
}

// NewDRA returns what scoring resources needs of DRA, or nil when none of
// them is an extended resource some DeviceClass provides (or m is nil),
// so that ordinary profiles gather nothing. matches is the plugin's
// cache of class selector results.
func NewDRA(m framework.SharedDRAManager, resources []Resource, matches *MatchCache) (*DRA, error) {
	if m == nil {
		return nil, nil
	}
	resolver := m.DeviceClassResolver()
	classes := map[*resourceapi.DeviceClass]bool{}
	for i := range resources {
		if !framework.IsDRAExtendedResourceName(resources[i].Name) {
			continue
		}
		if class := resolver.GetDeviceClass(resources[i].Name); class != nil {
			classes[class] = true
		}
	}
	if len(classes) == 0 {
		return nil, nil
	}
	allocated, err := m.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, err
	}
	slices, err := m.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	matches.prune(slices, classes)
	d := &DRA{resolver: resolver, allocated: allocated, matches: matches, byNode: map[string][]*resourceapi.ResourceSlice{}}
	for _, slice := range slices {
		if name := ptr.Deref(slice.Spec.NodeName, ""); name != "" && !ptr.Deref(slice.Spec.PerDeviceNodeSelection, false) && !ptr.Deref(slice.Spec.AllNodes, false) && slice.Spec.NodeSelector == nil {
			d.byNode[name] = append(d.byNode[name], slice)
			continue
		}
		d.others = append(d.others, slice)
	}
	return d, nil
}

// amounts returns the node's devices of the class behind name and how
// many of them are allocated; 0, 0 if no class provides name or counting
// fails (logged, as upstream).
func (d *DRA) amounts(ctx context.Context, node *v1.Node, name v1.ResourceName) (capacity, allocated int64) {
	logger := klog.FromContext(ctx)
	class := d.resolver.GetDeviceClass(name)
	if class == nil {
		logger.V(7).Info("Extended resource not found in device class mapping", "resource", name)
		return 0, 0
	}
	for _, slices := range [][]*resourceapi.ResourceSlice{d.byNode[node.Name], d.others} {
		for _, slice := range slices {
			c, a, err := d.sliceAmounts(ctx, node, class, slice)
			if err != nil {
				logger.Error(err, "Failed to calculate DRA resource capacity and allocated", "node", node.Name, "resource", name, "deviceClass", class.Name)
				return 0, 0
			}
			capacity += c
			allocated += a
		}
	}
	logger.V(7).Info("DRA extended resource calculation", "node", node.Name, "resource", name, "deviceClass", class.Name, "capacity", capacity, "allocated", allocated)
	return capacity, allocated
}

// sliceAmounts counts the devices of slice available to node that match
// class, and how many of them are allocated.
func (d *DRA) sliceAmounts(ctx context.Context, node *v1.Node, class *resourceapi.DeviceClass, slice *resourceapi.ResourceSlice) (capacity, allocated int64, err error) {
	perDevice := ptr.Deref(slice.Spec.PerDeviceNodeSelection, false)
	if !perDevice {
		nodeName, allNodes := ptr.Deref(slice.Spec.NodeName, ""), ptr.Deref(slice.Spec.AllNodes, false)
		switch {
		case !allNodes && nodeName != node.Name && slice.Spec.NodeSelector != nil:
			matches, err := structured.NodeMatches(feature.AllocatorFeatures(), node, nodeName, allNodes, slice.Spec.NodeSelector)
			if err != nil {
				return 0, 0, err
			}
			if !matches {
				return 0, 0, nil
			}
		case !allNodes && nodeName != "" && nodeName != node.Name:
			return 0, 0, nil
		}
	}
	var matches []bool
	if len(class.Spec.Selectors) > 0 {
		var err error
		if matches, err = d.matches.deviceMatches(ctx, slice, class); err != nil {
			return 0, 0, err
		}
	}
	driver, pool := slice.Spec.Driver, slice.Spec.Pool.Name
	for i := range slice.Spec.Devices {
		device := &slice.Spec.Devices[i]
		if perDevice {
			available, err := deviceAvailableOn(node, device)
			if err != nil {
				return 0, 0, err
			}
			if !available {
				continue
			}
		}
		if matches != nil && !matches[i] {
			continue
		}
		capacity++
		if structured.IsDeviceAllocated(structured.MakeDeviceID(driver, pool, device.Name), d.allocated) {
			allocated++
		}
	}
	return capacity, allocated, nil
}

// deviceAvailableOn reports whether a device of a slice with per-device
// node selection is available on node.
func deviceAvailableOn(node *v1.Node, device *resourceapi.Device) (bool, error) {
	nodeName, allNodes := ptr.Deref(device.NodeName, ""), ptr.Deref(device.AllNodes, false)
	if allNodes || (nodeName != "" && nodeName == node.Name) {
		return true, nil
	}
	if device.NodeSelector == nil {
		return false, nil
	}
	return structured.NodeMatches(feature.AllocatorFeatures(), node, nodeName, allNodes, device.NodeSelector)
}

// deviceMatchesClass reports whether device satisfies every CEL selector
// of class (all devices do for a class without selectors, whatever their
// driver, as upstream).
func (c *MatchCache) deviceMatchesClass(ctx context.Context, device *resourceapi.Device, class *resourceapi.DeviceClass, driver string) (bool, error) {
	for _, selector := range class.Spec.Selectors {
		if selector.CEL == nil {
			continue
		}
		result := c.celCache.GetOrCompile(selector.CEL.Expression)
		if result.Error != nil {
			return false, result.Error
		}
		matches, _, err := result.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: device.Attributes, Capacity: device.Capacity})
		if err != nil || !matches {
			return false, err
		}
	}
	return true, nil
}
