package dynamicresources

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/internal/podutil"
)

// Extended resources backed by DRA (DRAExtendedResource, on by default in
// 1.37), as upstream serves them. A pod asking for example.com/gpu: 2 in
// its containers, where a DeviceClass has spec.extendedResourceName
// example.com/gpu (or is named gpu and the pod asks for
// deviceclass.resource.kubernetes.io/gpu), gets its devices through one
// special ResourceClaim per pod on nodes that do not have the resource as
// allocatable (a device plugin's); NodeResourcesFit leaves such requests
// to this plugin there.
//
//   - PreFilter finds the special claim a previous cycle created, or makes
//     one in memory, named specialClaimInMemName, with no requests.
//   - Filter refuses every node while a claim from a previous cycle exists
//     (PostFilter deletes it, and the next attempt starts anew), and on a
//     node without the resource as allocatable gives the claim one device
//     request per container and resource (node-specific) and allocates it
//     with the pod's own claims.
//   - Reserve records the allocation in flight under the in-memory UID.
//   - PreBind creates the claim (generateName <pod>-extended-resources-,
//     owned by the pod, annotated resource.kubernetes.io/extended-resource-claim),
//     writes its allocation and the pod in reservedFor, and records in
//     pod.status.extendedResourceClaimStatus which device request serves
//     which container's resource.
//   - Unreserve deletes a claim PreBind created.

const (
	// specialClaimInMemName names the special claim while it only exists
	// in memory; it gets a generated name when PreBind creates it. It is
	// not a valid name, so it cannot be that of a real claim.
	specialClaimInMemName = "<extended-resources>"

	// assumeExtendedResourceTimeout bounds how long PreBind waits for the
	// informer to deliver the claim it created, as upstream.
	assumeExtendedResourceTimeout = 120 * time.Second
)

// draExtendedResource is what PreFilter learnt of the pod's extended
// resources backed by DRA.
type draExtendedResource struct {
	// podScalarResources are the pod's scalar requests, some of which
	// may be backed by DRA.
	podScalarResources map[v1.ResourceName]int64
}

// findExtendedResourceClaim returns the special claim of pod among claims
// (all claims in the cluster): annotated as such and controlled by the pod.
// Unlike upstream's, it looks only in the pod's namespace, where the claim
// is always created and where alone an owner reference can name the pod:
// otherwise anyone who may create claims in some namespace could plant one
// naming a pod of another, which Filter would then refuse on every node
// and PostFilter delete, again and again.
func findExtendedResourceClaim(pod *v1.Pod, claims []*resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	for _, c := range claims {
		if c.Namespace != pod.Namespace || c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
			continue
		}
		for _, or := range c.OwnerReferences {
			if or.Name == pod.Name && ptr.Deref(or.Controller, false) && or.UID == pod.UID {
				return c
			}
		}
	}
	return nil
}

// preFilterExtendedResources returns the pod's special claim, or nil when
// the pod requests no extended resource backed by DRA. It is the claim a
// previous cycle created (Filter refuses it and PostFilter deletes it:
// whether its allocation still holds is hard to tell, and this only
// follows a failed binding), else a new one in memory, with a made-up UID
// for the in-flight allocation and no requests yet.
func (pl *dynamicResources) preFilterExtendedResources(pod *v1.Pod, logger klog.Logger, s *stateData) (*resourceapi.ResourceClaim, *framework.Status) {
	if pl.draManager == nil || !framework.RequestsDRAExtendedResource(pod, pl.draManager.DeviceClassResolver()) {
		return nil, nil
	}
	s.draExtendedResource.podScalarResources = framework.NewResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})).ScalarResources

	claims, err := pl.draManager.ResourceClaims().List()
	if err != nil {
		return nil, statusError(logger, err, "listing ResourceClaims")
	}
	if claim := findExtendedResourceClaim(pod, claims); claim != nil {
		return claim, nil
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    pod.Namespace,
			Name:         specialClaimInMemName,
			UID:          uuid.NewUUID(),
			GenerateName: pod.Name + "-extended-resources-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       pod.Name,
				UID:        pod.UID,
				Controller: ptr.To(true),
			}},
			Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		},
	}, nil
}

// filterExtendedResources returns the special claim with the device
// requests the node must satisfy through DRA and which request serves
// which container, or nil when there is nothing to allocate on the node
// (no special claim, or every such resource is the node's allocatable,
// which NodeResourcesFit checks). It refuses the node when a request is
// neither allocatable there nor backed by DRA, and every node while the
// claim of a previous cycle exists.
func (pl *dynamicResources) filterExtendedResources(state *stateData, pod *v1.Pod, nodeInfo *framework.NodeInfo, logger klog.Logger) (*resourceapi.ResourceClaim, []v1.ContainerExtendedResourceRequest, *framework.Status) {
	extendedResourceClaim := state.claims.extendedResourceClaim()
	if extendedResourceClaim == nil {
		return nil, nil, nil
	}
	// From a previous cycle: PostFilter deletes it and the pod is tried anew.
	if extendedResourceClaim.Spec.Devices.Requests != nil {
		return nil, nil, statusUnschedulable(logger, "cannot schedule extended resource claim", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "claim", klog.KObj(extendedResourceClaim))
	}

	resolver := pl.draManager.DeviceClassResolver()
	extendedResources := make(map[v1.ResourceName]int64)
	for name, quantity := range state.draExtendedResource.podScalarResources {
		if quantity == 0 || !framework.IsDRAExtendedResourceName(name) {
			continue
		}
		allocatable, isScalar := nodeInfo.Allocatable.ScalarResources[name]
		if resolver.GetDeviceClass(name) != nil && allocatable == 0 {
			// The node must provide it through DRA.
			extendedResources[name] = quantity
		} else if !isScalar {
			// Neither a device plugin's nor backed by DRA.
			return nil, nil, statusUnschedulable(logger, "cannot fit resource", "pod", klog.KObj(pod), "node", klog.KObj(nodeInfo.Node()), "resource", name)
		}
	}
	if len(extendedResources) == 0 && state.claims.noUserClaim() {
		// All from device plugins, which NodeResourcesFit checked.
		return nil, nil, nil
	}
	if extendedResourceClaim.Status.Allocation != nil {
		// Cannot happen: a claim from a previous cycle was refused above.
		return nil, nil, nil
	}
	// Each node gets its own variant of the claim.
	nodeClaim := extendedResourceClaim.DeepCopy()
	requests, mappings := createRequestsAndMappings(pod, extendedResources, resolver)
	nodeClaim.Spec.Devices.Requests = requests
	return nodeClaim, mappings, nil
}

// isSpecialClaimName reports whether name is that of a special claim
// which exists only in memory.
func isSpecialClaimName(name string) bool {
	return name == specialClaimInMemName
}

// deleteClaim removes the allocation finalizer from claim, then deletes it.
func (pl *dynamicResources) deleteClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	refreshClaim := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if refreshClaim {
			updated, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get resourceclaim %s/%s: %w", claim.Namespace, claim.Name, err)
			}
			claim = updated
		} else {
			refreshClaim = true
		}
		// Without the finalizer first, the deletion would wait for it.
		if i := slices.Index(claim.Finalizers, resourceapi.Finalizer); i >= 0 {
			claim.Finalizers = slices.Delete(claim.Finalizers, i, i+1)
		}
		if _, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update resourceclaim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(5).Info("Delete", "resourceclaim", klog.KObj(claim))
	if err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// partitionContainerIndices splits the indices of containers (init
// containers first, numInitContainers of them) into long-lived ones
// (sidecars and regular containers), which run together, and short-lived
// init containers, which run one at a time before them.
func partitionContainerIndices(containers []v1.Container, numInitContainers int) (longLived, shortLivedInit []int) {
	longLived = make([]int, 0, len(containers))
	shortLivedInit = make([]int, 0, numInitContainers)
	for i, c := range containers {
		isSidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		if i < numInitContainers && !isSidecar {
			shortLivedInit = append(shortLivedInit, i)
			continue
		}
		longLived = append(longLived, i)
	}
	return longLived, shortLivedInit
}

// createResourceRequestAndMappings returns the device request container
// (at containerIndex among init containers then containers) needs for
// name, and its mappings. reusable are requests of later long-lived
// containers a short-lived init container can use first (entries may be
// nil); the request returned is nil when they suffice or the container
// does not ask for name, the mappings empty in the latter case.
func createResourceRequestAndMappings(containerIndex int, container *v1.Container, name v1.ResourceName, className string, reusable []*resourceapi.DeviceRequest) (*resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	requests := container.Resources.Requests
	quantity, ok := requests[name]
	if !ok {
		return nil, nil
	}
	count, ok := quantity.AsInt64()
	if !ok || count == 0 {
		return nil, nil
	}
	var mappings []v1.ContainerExtendedResourceRequest
	var sum int64
	for _, r := range reusable {
		if r == nil {
			continue
		}
		sum += r.Exactly.Count
		mappings = append(mappings, v1.ContainerExtendedResourceRequest{ContainerName: container.Name, ResourceName: name.String(), RequestName: r.Name})
		if sum >= count {
			return nil, mappings
		}
	}
	// The request is named after the container's index and the index of
	// the resource among the container's requests, sorted by name.
	names := make([]string, 0, len(requests))
	for n := range requests {
		names = append(names, n.String())
	}
	slices.Sort(names)
	resourceIndex := max(slices.Index(names, name.String()), 0)
	requestName := fmt.Sprintf("container-%d-request-%d", containerIndex, resourceIndex)
	mappings = append(mappings, v1.ContainerExtendedResourceRequest{ContainerName: container.Name, ResourceName: name.String(), RequestName: requestName})
	return &resourceapi.DeviceRequest{
		Name: requestName,
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: className,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           count - sum,
		},
	}, mappings
}

// createRequestsAndMappings returns the special claim's device requests,
// sorted by name, for the extended resources the node must provide
// through DRA, and which request serves which container's resource.
// Long-lived containers get a request each; short-lived init containers,
// which run one at a time, reuse the requests of the long-lived containers
// after them and share one request, the largest, for the rest.
func createRequestsAndMappings(pod *v1.Pod, extendedResources map[v1.ResourceName]int64, resolver framework.DeviceClassResolver) ([]resourceapi.DeviceRequest, []v1.ContainerExtendedResourceRequest) {
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	longLived, shortLivedInit := partitionContainerIndices(containers, len(pod.Spec.InitContainers))

	var deviceRequests []resourceapi.DeviceRequest
	var mappings []v1.ContainerExtendedResourceRequest
	// Sorted for a deterministic order of requests and mappings.
	for _, name := range slices.Sorted(maps.Keys(extendedResources)) {
		class := resolver.GetDeviceClass(name)
		if class == nil {
			continue
		}
		var longLivedMappings, shortLivedMappings []v1.ContainerExtendedResourceRequest
		// One entry per container, nil where a container made no request;
		// a short-lived init container may reuse those at later indices.
		longLivedRequests := make([]*resourceapi.DeviceRequest, len(containers))
		for _, i := range longLived {
			request, m := createResourceRequestAndMappings(i, &containers[i], name, class.Name, nil)
			longLivedRequests[i] = request
			longLivedMappings = append(longLivedMappings, m...)
		}

		var maxShortLived *resourceapi.DeviceRequest
		shortLivedNames := sets.New[string]()
		for _, i := range shortLivedInit {
			request, m := createResourceRequestAndMappings(i, &containers[i], name, class.Name, longLivedRequests[i:])
			if request != nil {
				shortLivedNames.Insert(request.Name)
				if maxShortLived == nil || maxShortLived.Exactly.Count < request.Exactly.Count {
					maxShortLived = request
				}
			}
			shortLivedMappings = append(shortLivedMappings, m...)
		}
		// Short-lived init containers all use the largest of their requests.
		if maxShortLived != nil && len(shortLivedNames) > 1 {
			shortLivedNames.Delete(maxShortLived.Name)
			for i := range shortLivedMappings {
				if shortLivedNames.Has(shortLivedMappings[i].RequestName) {
					shortLivedMappings[i].RequestName = maxShortLived.Name
				}
			}
		}

		if maxShortLived != nil {
			deviceRequests = append(deviceRequests, *maxShortLived)
		}
		for _, request := range longLivedRequests {
			if request != nil {
				deviceRequests = append(deviceRequests, *request)
			}
		}
		mappings = append(mappings, longLivedMappings...)
		mappings = append(mappings, shortLivedMappings...)
	}
	slices.SortFunc(deviceRequests, func(a, b resourceapi.DeviceRequest) int { return cmp.Compare(a.Name, b.Name) })
	return deviceRequests, mappings
}

// waitForExtendedClaimInAssumeCache assumes claim, just written, once the
// informer has delivered its creation, polling for up to
// assumeExtendedResourceTimeout. Failing only costs the next cycles the
// allocation not being seen until the informer has it: logged, not
// returned, as upstream.
func (pl *dynamicResources) waitForExtendedClaimInAssumeCache(ctx context.Context, claim *resourceapi.ResourceClaim) {
	logger := klog.FromContext(ctx)
	err := wait.PollUntilContextTimeout(ctx, time.Second, assumeExtendedResourceTimeout, true, func(context.Context) (bool, error) {
		if err := pl.draManager.ResourceClaims().AssumeClaimAfterAPICall(claim); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			logger.V(5).Info("Claim not stored in assume cache", "claim", klog.KObj(claim), "err", err)
			return false, err
		}
		return true, nil
	})
	if err != nil {
		logger.V(5).Info("Claim not stored in assume cache after retries", "claim", klog.KObj(claim), "err", err)
	}
}

// createExtendedResourceClaimInAPI creates the node's variant of the
// special claim, which Filter prepared, without its allocation (PreBind
// writes that to the status next).
func (pl *dynamicResources) createExtendedResourceClaimInAPI(ctx context.Context, pod *v1.Pod, nodeName string, state *stateData) (*resourceapi.ResourceClaim, error) {
	logger := klog.FromContext(ctx)
	logger.V(5).Info("preparing to create claim for extended resources", "pod", klog.KObj(pod), "node", nodeName)
	nodeAllocation, ok := state.nodeAllocations[nodeName]
	if !ok || nodeAllocation.extendedResourceClaim == nil {
		return nil, fmt.Errorf("extended resource claim not found for node %s", nodeName)
	}
	claim := nodeAllocation.extendedResourceClaim.DeepCopy()
	logger.V(5).Info("create claim for extended resources", "pod", klog.KObj(pod), "node", nodeName, "resourceclaim", klog.Format(claim))
	claim.Status.Allocation = nil
	claim.Name = ""
	claim.UID = ""
	created, err := pl.clientset.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		pl.fh.Metrics().ResourceClaimCreates.WithLabelValues("failure", "false", "", "Pod").Inc()
		return nil, fmt.Errorf("create claim for extended resources %v: %w", klog.KObj(claim), err)
	}
	pl.fh.Metrics().ResourceClaimCreates.WithLabelValues("success", "false", "", "Pod").Inc()
	logger.V(5).Info("created claim for extended resources", "pod", klog.KObj(pod), "node", nodeName, "resourceclaim", klog.Format(created))
	return created, nil
}

// patchPodExtendedResourceClaimStatus records in the pod's status the
// special claim and which of its requests serves which container's
// resource, for the kubelet.
func (pl *dynamicResources) patchPodExtendedResourceClaimStatus(ctx context.Context, pod *v1.Pod, claim *resourceapi.ResourceClaim, nodeName string, state *stateData) error {
	var mappings []v1.ContainerExtendedResourceRequest
	if nodeAllocation, ok := state.nodeAllocations[nodeName]; ok {
		mappings = nodeAllocation.containerResourceRequestMappings
	}
	if len(mappings) == 0 {
		return fmt.Errorf("nil or empty request mappings, no update of pod %s/%s ExtendedResourceClaimStatus", pod.Namespace, pod.Name)
	}
	newStatus := pod.Status.DeepCopy()
	newStatus.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
		RequestMappings:   mappings,
		ResourceClaimName: claim.Name,
	}
	if err := podutil.PatchPodStatus(ctx, pl.clientset, pod, newStatus); err != nil {
		return fmt.Errorf("update pod %s/%s ExtendedResourceClaimStatus: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// unreserveExtendedResourceClaim releases the special claim's in-flight
// allocation and deletes the claim if PreBind created it.
func (pl *dynamicResources) unreserveExtendedResourceClaim(ctx context.Context, pod *v1.Pod, state *stateData) {
	claim := state.claims.extendedResourceClaim()
	if claim == nil {
		return
	}
	if deleted := pl.draManager.ResourceClaims().MaybeRemoveClaimPendingAllocation(state.claims.initialExtendedResourceClaimUID, false); deleted {
		pl.draManager.ResourceClaims().AssumedClaimRestore(claim.Namespace, claim.Name)
	}
	if isSpecialClaimName(claim.Name) {
		// Only in memory: nothing to delete.
		return
	}
	logger := klog.FromContext(ctx)
	logger.V(5).Info("delete extended resource backed by DRA", "resourceclaim", klog.KObj(claim), "pod", klog.KObj(pod), "claim.UID", claim.UID)
	if err := pl.deleteClaim(ctx, claim.DeepCopy()); err != nil {
		logger.Error(err, "delete", "resourceclaim", klog.KObj(claim))
	}
}
