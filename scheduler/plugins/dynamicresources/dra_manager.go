package dynamicresources

import (
	"context"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/assumecache"
)

// ClaimCache is the assume cache of ResourceClaims the manager reads
// claims through.
type ClaimCache = assumecache.Cache[*resourceapi.ResourceClaim]

// Manager is the scheduler's SharedDRAManager (upstream's
// DefaultDRAManager): claims through an assume cache and a map of
// in-flight allocations, slices through the ResourceSlice tracker, which
// applies DeviceTaintRules, classes through their informer, and the
// extended resources classes provide through upstream's extended resource
// cache (DRAExtendedResource, on by default in 1.37).
type Manager struct {
	claims          *claimTracker
	slices          *resourceSliceLister
	classes         *deviceClassLister
	extendedClasses *extendedresourcecache.ExtendedResourceCache
	classEvents     *DeviceClassEvents
}

var _ framework.SharedDRAManager = (*Manager)(nil)

// NewManager builds the manager over f's ResourceClaim, ResourceSlice,
// DeviceTaintRule and DeviceClass informers, as kube-scheduler 1.37 does
// with its default gates (DRADeviceTaintRules and DRAConsumableCapacity
// on). Call it before f starts: it follows claims for the devices they
// hold. The ResourceSlice tracker stops when ctx ends; client records its
// events about DeviceTaintRules whose selectors fail.
func NewManager(ctx context.Context, client kubernetes.Interface, f informers.SharedInformerFactory) (*Manager, error) {
	logger := klog.FromContext(ctx)
	resource := f.Resource().V1()
	claims, err := assumecache.New[*resourceapi.ResourceClaim](logger, resource.ResourceClaims().Informer(), resourceapi.Resource("resourceclaims"))
	if err != nil {
		return nil, err
	}
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: true,
		SliceInformer:            resource.ResourceSlices(),
		TaintInformer:            resource.DeviceTaintRules(),
		KubeClient:               client,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the ResourceSlice tracker: %w", err)
	}
	context.AfterFunc(ctx, slices.Stop)
	m := &Manager{
		claims: &claimTracker{
			cache:               claims,
			inFlightAllocations: make(map[types.UID]inFlightAllocation),
			allocatedDevices:    newAllocatedDevices(logger),
			logger:              logger,
		},
		slices:      &resourceSliceLister{tracker: slices},
		classes:     &deviceClassLister{classLister: resource.DeviceClasses().Lister()},
		classEvents: &DeviceClassEvents{},
	}
	// Reacting to events is more efficient than iterating over the list
	// repeatedly in PreFilter.
	if _, err := claims.AddEventHandler(m.claims.allocatedDevices.handlers()); err != nil {
		slices.Stop()
		return nil, err
	}
	// The cache hands each DeviceClass event on once it has applied it,
	// so that a pod the event requeues finds the class it waited for.
	m.extendedClasses = extendedresourcecache.NewExtendedResourceCache(logger, m.classEvents)
	if m.classEvents.registration, err = resource.DeviceClasses().Informer().AddEventHandler(m.extendedClasses); err != nil {
		slices.Stop()
		return nil, err
	}
	return m, nil
}

// ClaimEvents is where the queue hears of ResourceClaim changes, as in
// upstream: the claim assume cache, so that allocations PreBind wrote are
// reported before the informer has them.
func (m *Manager) ClaimEvents() *ClaimCache { return m.claims.cache }

// SliceEvents is where the queue hears of ResourceSlice changes: the
// tracker, which reports a DeviceTaintRule's change as updates of the
// slices it taints.
func (m *Manager) SliceEvents() *resourceslicetracker.Tracker { return m.slices.tracker }

// DeviceClassEvents is where the queue hears of DeviceClass changes, as
// in upstream: after the extended resource cache has applied them.
func (m *Manager) DeviceClassEvents() *DeviceClassEvents { return m.classEvents }

// DeviceClassEvents relays the DeviceClass events the extended resource
// cache has applied to the handlers added since. Handlers added after the
// informer started miss the objects already there, which the queue does
// not need: no pod waits for a class before the scheduler starts.
type DeviceClassEvents struct {
	// registration is the cache's with the informer, set once in
	// NewManager: it has synced once the cache saw the initial classes.
	registration cache.ResourceEventHandlerRegistration

	// mutex guards handlers, appended to while events may be relayed.
	mutex    sync.RWMutex
	handlers []cache.ResourceEventHandler
}

// AddEventHandler adds a handler of the events to come. The registration
// returned is the cache's with the informer.
func (e *DeviceClassEvents) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.mutex.Lock()
	defer e.mutex.Unlock()
	e.handlers = append(e.handlers, handler)
	return e.registration, nil
}

// HasSynced reports whether the cache saw the initial classes.
func (e *DeviceClassEvents) HasSynced() bool { return e.registration.HasSynced() }

func (e *DeviceClassEvents) current() []cache.ResourceEventHandler {
	e.mutex.RLock()
	defer e.mutex.RUnlock()
	return e.handlers
}

// OnAdd implements cache.ResourceEventHandler.
func (e *DeviceClassEvents) OnAdd(obj any, isInInitialList bool) {
	for _, h := range e.current() {
		h.OnAdd(obj, isInInitialList)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (e *DeviceClassEvents) OnUpdate(oldObj, newObj any) {
	for _, h := range e.current() {
		h.OnUpdate(oldObj, newObj)
	}
}

// OnDelete implements cache.ResourceEventHandler.
func (e *DeviceClassEvents) OnDelete(obj any) {
	for _, h := range e.current() {
		h.OnDelete(obj)
	}
}

// DeviceClassResolver implements framework.SharedDRAManager.
func (m *Manager) DeviceClassResolver() framework.DeviceClassResolver { return m.extendedClasses }

// ResourceClaims implements framework.SharedDRAManager.
func (m *Manager) ResourceClaims() framework.ResourceClaimTracker { return m.claims }

// ResourceSlices implements framework.SharedDRAManager.
func (m *Manager) ResourceSlices() framework.ResourceSliceLister { return m.slices }

// DeviceClasses implements framework.SharedDRAManager.
func (m *Manager) DeviceClasses() framework.DeviceClassLister { return m.classes }

type resourceSliceLister struct {
	tracker *resourceslicetracker.Tracker
}

func (l *resourceSliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return l.tracker.ListPatchedResourceSlices()
}

type deviceClassLister struct {
	classLister resourcelisters.DeviceClassLister
}

func (l *deviceClassLister) Get(className string) (*resourceapi.DeviceClass, error) {
	return l.classLister.Get(className)
}

func (l *deviceClassLister) List() ([]*resourceapi.DeviceClass, error) {
	return l.classLister.List(labels.Everything())
}

// claimTracker is upstream's: the assume cache holds claims PreBind has
// written until the informer has them, so that reconstructing the devices
// in use at the start of a cycle does not hand out those of a claim whose
// write the informer has not delivered yet; inFlightAllocations holds the
// allocations Reserve decided and PreBind has not written yet.
//
// An in-flight claim makes other pods that share it wait ("is in the
// process of being allocated"), which avoids this problem: pod A triggers
// allocation of claim X; pod B, sharing X, is scheduled because X is
// assumed allocated; B's PreBind runs first and fails to add itself to
// reservedFor because X is not really allocated yet. Pods of one
// pod-group cycle are the exception: they share the in-flight allocation,
// PreBind writes it for the first of them to get there, and the
// allocation stays in flight until every one of them was unreserved, so
// that a failed PreBind of one does not free devices another still holds.
type claimTracker struct {
	cache *ClaimCache
	// inFlightMutex guards inFlightAllocations.
	inFlightMutex       sync.RWMutex
	inFlightAllocations map[types.UID]inFlightAllocation
	allocatedDevices    *allocatedDevices
	logger              klog.Logger
}

// inFlightAllocation is an allocation decided in Reserve and not written
// yet. sharers counts the pods of a pod-group cycle using it; it is 1 for
// a pod alone.
type inFlightAllocation struct {
	claim   *resourceapi.ResourceClaim
	sharers int
}

func (c *claimTracker) GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult {
	c.inFlightMutex.RLock()
	defer c.inFlightMutex.RUnlock()
	inFlight, found := c.inFlightAllocations[claimUID]
	if !found || inFlight.claim == nil {
		return nil
	}
	return inFlight.claim.Status.Allocation
}

func (c *claimTracker) SignalClaimPendingAllocation(claimUID types.UID, allocatedClaim *resourceapi.ResourceClaim) error {
	c.inFlightMutex.Lock()
	defer c.inFlightMutex.Unlock()

	if inFlight, found := c.inFlightAllocations[claimUID]; found {
		inFlight.sharers++
		c.inFlightAllocations[claimUID] = inFlight
		c.logger.V(5).Info("Added share for in-flight claim", "claim", klog.KObj(inFlight.claim), "uid", claimUID, "version", inFlight.claim.ResourceVersion, "sharers", inFlight.sharers)
		return nil
	}

	// The pod's CycleState may be stale: the claim may have been
	// allocated since PreFilter. The special claim of extended resources
	// is not in the cache yet and cannot be shared: nothing to look up.
	if !isSpecialClaimName(allocatedClaim.Name) {
		assumedClaim, err := c.Get(allocatedClaim.Namespace, allocatedClaim.Name)
		if err != nil {
			return fmt.Errorf("look up assumed claim %s/%s, UID=%s: %w", allocatedClaim.Namespace, allocatedClaim.Name, claimUID, err)
		}
		if assumedClaim.UID == claimUID && assumedClaim.Status.Allocation != nil {
			c.logger.V(6).Info("Claim is already allocated, not creating in-flight", "claim", klog.KObj(assumedClaim), "uid", claimUID, "version", assumedClaim.ResourceVersion)
			return nil
		}
	}

	c.inFlightAllocations[claimUID] = inFlightAllocation{claim: allocatedClaim, sharers: 1}
	c.logger.V(5).Info("Added in-flight claim", "claim", klog.KObj(allocatedClaim), "uid", claimUID, "version", allocatedClaim.ResourceVersion)
	return nil
}

func (c *claimTracker) MaybeRemoveClaimPendingAllocation(claimUID types.UID, forceRemove bool) (deleted bool) {
	c.inFlightMutex.Lock()
	defer c.inFlightMutex.Unlock()

	inFlight, found := c.inFlightAllocations[claimUID]
	if !found {
		c.logger.V(5).Info("Redundant remove of in-flight claim, not found", "uid", claimUID)
		return false
	}
	claim := inFlight.claim
	if forceRemove || inFlight.sharers == 1 {
		delete(c.inFlightAllocations, claimUID)
		c.logger.V(5).Info("Removed in-flight claim", "claim", klog.KObj(claim), "uid", claimUID, "version", claim.ResourceVersion)
		return true
	}
	inFlight.sharers--
	c.inFlightAllocations[claimUID] = inFlight
	c.logger.V(5).Info("Claim is still shared by other pods, not removing in-flight claim", "claim", klog.KObj(claim), "uid", claimUID, "version", claim.ResourceVersion, "sharers", inFlight.sharers)
	return false
}

func (c *claimTracker) PendingExtendedResourceClaim(podUID types.UID) *resourceapi.ResourceClaim {
	c.inFlightMutex.RLock()
	defer c.inFlightMutex.RUnlock()
	for _, inFlight := range c.inFlightAllocations {
		claim := inFlight.claim
		if claim == nil || claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		if owner := metav1.GetControllerOfNoCopy(claim); owner != nil && owner.UID == podUID {
			return claim
		}
	}
	return nil
}

func (c *claimTracker) Get(namespace, claimName string) (*resourceapi.ResourceClaim, error) {
	key := namespace + "/" + claimName
	claim, err := c.cache.Get(key)
	if apierrors.IsNotFound(err) {
		return nil, claimNotFoundError{key: key, err: err}
	}
	return claim, err
}

// claimNotFoundError says what upstream's assume cache says of a missing
// claim, the reason pods waiting for it show.
type claimNotFoundError struct {
	key string
	err error
}

func (e claimNotFoundError) Error() string {
	return fmt.Sprintf("could not find ResourceClaim %q", e.key)
}

func (e claimNotFoundError) Unwrap() error { return e.err }

func (c *claimTracker) List() ([]*resourceapi.ResourceClaim, error) {
	return c.cache.List(), nil
}

// concurrentModificationError is returned when GatherAllocatedState must
// be retried, because of this rare race while a claim is in flight: the
// allocated devices are read (claim not there yet); PreBind removes the
// claim from the in-flight claims and assumes it; the in-flight claims are
// read (claim not there anymore). A change of the allocated devices'
// revision in between tells. A type rather than a package variable: its
// values are equal, so errors.Is finds it.
type concurrentModificationError struct{}

func (concurrentModificationError) Error() string { return "conflicting concurrent modification" }

// GatherAllocatedState returns the devices, shared devices and consumed
// capacity in use, from the claims the cache shows and the in-flight
// allocations. DRAConsumableCapacity is on by default in 1.37.
func (c *claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	allocated, revision1 := c.allocatedDevices.Get()
	allocatedSharedDeviceIDs, revision2 := c.allocatedDevices.GetSharedDeviceIDs()
	aggregatedCapacity, revision3 := c.allocatedDevices.Capacities()
	if revision1 != revision2 || revision2 != revision3 {
		return nil, concurrentModificationError{}
	}

	c.inFlightMutex.RLock()
	for _, inFlight := range c.inFlightAllocations {
		claim := inFlight.claim
		foreachAllocatedDevice(claim,
			func(deviceID structured.DeviceID) {
				c.logger.V(6).Info("Device is in flight for allocation", "device", deviceID, "claim", klog.KObj(claim))
				allocated.Insert(deviceID)
			},
			func(sharedDeviceID structured.SharedDeviceID) {
				c.logger.V(6).Info("Device is in flight for allocation", "shared device", sharedDeviceID, "claim", klog.KObj(claim))
				allocatedSharedDeviceIDs.Insert(sharedDeviceID)
			},
			func(capacity structured.DeviceConsumedCapacity) {
				c.logger.V(6).Info("Device is in flight for allocation", "consumed capacity", capacity, "claim", klog.KObj(claim))
				aggregatedCapacity.Insert(capacity)
			})
	}
	c.inFlightMutex.RUnlock()

	if revision1 != c.allocatedDevices.Revision() {
		return nil, concurrentModificationError{}
	}
	return &structured.AllocatedState{
		AllocatedDevices:         allocated,
		AllocatedSharedDeviceIDs: allocatedSharedDeviceIDs,
		AggregatedCapacity:       aggregatedCapacity,
	}, nil
}

func (c *claimTracker) AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error {
	return c.cache.AssumeWritten(claim)
}

func (c *claimTracker) AssumedClaimRestore(namespace, claimName string) {
	c.cache.RestoreKey(namespace + "/" + claimName)
}
