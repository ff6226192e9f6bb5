package upstreamdiff

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Drivers and DeviceClasses of the generated DRA objects.
const (
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"

	classGPU  = "gpu"
	classH100 = "gpu-h100"
	// classExtended provides gpuResource through DRA
	// (DRAExtendedResource), in some clusters only: nodes without the
	// resource as allocatable then serve it with their GPUs.
	classExtended = "gpu-extended"
	classNIC      = "nic"
	classMissing  = "no-such-class"

	unhealthyTaint   = gpuDriver + "/unhealthy"
	maintenanceTaint = "maintenance"
)

// draState is what the generator knows of the devices it drew: each
// node's GPUs not allocated yet, and the claims pending pods may use, by
// namespace.
type draState struct {
	freeGPUs map[string][]string
	claims   map[string][]string
}

// dra returns the DRA objects: the DeviceClasses, a ResourceSlice of GPUs
// with attributes and capacity on some nodes, a slice of NICs shared by
// the nodes of zone-a, and per namespace claims of every kind pending
// pods may ask for (ExactCount with and without a selector, All,
// firstAvailable, a missing class) and one allocated but unreserved
// claim, which PostFilter deallocates when its pod fits nowhere.
func (g *generator) dra() []k8sruntime.Object {
	g.devices = draState{freeGPUs: map[string][]string{}, claims: map[string][]string{}}
	class := func(name, expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}},
		}
	}
	objs := []k8sruntime.Object{
		class(classGPU, fmt.Sprintf("device.driver == %q", gpuDriver)),
		class(classH100, fmt.Sprintf("device.driver == %q && device.attributes[%q].model == \"h100\"", gpuDriver, gpuDriver)),
		class(classNIC, fmt.Sprintf("device.driver == %q", nicDriver)),
	}
	if g.chance(0.6) {
		extended := class(classExtended, fmt.Sprintf("device.driver == %q", gpuDriver))
		extended.Spec.ExtendedResourceName = ptr.To(gpuResource)
		objs = append(objs, extended)
	}
	for _, n := range g.nodes {
		if !g.chance(0.4) {
			continue
		}
		var devices []resourceapi.Device
		for i := range 1 + g.pick(4) {
			name := fmt.Sprintf("gpu-%d", i)
			devices = append(devices, resourceapi.Device{
				Name: name,
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"model": {StringValue: ptr.To(g.one([]string{"a100", "h100"}))},
					"index": {IntValue: ptr.To(int64(i))},
				},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
					"memory": {Value: resource.MustParse(g.one([]string{"40Gi", "80Gi"}))},
				},
			})
			if g.chance(0.15) {
				devices[i].Taints = []resourceapi.DeviceTaint{{
					Key:    unhealthyTaint,
					Effect: resourceapi.DeviceTaintEffect(g.one([]string{"NoSchedule", "NoExecute", "None"})),
				}}
			}
			g.devices.freeGPUs[n.Name] = append(g.devices.freeGPUs[n.Name], name)
		}
		objs = append(objs, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-gpu"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   gpuDriver,
				Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(n.Name),
				Devices:  devices,
			},
		})
	}
	objs = append(objs, &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric-zone-a"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: nicDriver,
			Pool:   resourceapi.ResourcePool{Name: "fabric-zone-a", Generation: 1, ResourceSliceCount: 1},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
				{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-a"}},
			}}}},
			Devices: []resourceapi.Device{{Name: "nic-0"}, {Name: "nic-1"}, {
				// Shared by claims up to its bandwidth (consumable capacity).
				Name:                     "nic-shared",
				AllowMultipleAllocations: ptr.To(true),
				Attributes:               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"shared": {BoolValue: ptr.To(true)}},
				Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {
					Value: resource.MustParse("100Gi"),
					RequestPolicy: &resourceapi.CapacityRequestPolicy{
						Default:    ptr.To(resource.MustParse("10Gi")),
						ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi"))},
					},
				}},
			}},
		},
	})
	if g.chance(0.5) {
		// Applied by both ResourceSlice trackers.
		objs = append(objs, &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: "nic-maintenance"},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(nicDriver), Pool: ptr.To("fabric-zone-a"), Device: ptr.To("nic-1")},
				Taint:          resourceapi.DeviceTaint{Key: maintenanceTaint, Effect: resourceapi.DeviceTaintEffectNoSchedule},
			},
		})
	}
	for _, ns := range namespaces {
		exact := func(class string, count int64, expr string) resourceapi.DeviceRequest {
			r := resourceapi.DeviceRequest{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
			}}
			if expr != "" {
				r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
			}
			return r
		}
		all := exact(classH100, 0, fmt.Sprintf("device.capacity[%q].memory.compareTo(quantity(\"80Gi\")) >= 0", gpuDriver))
		all.Exactly.AllocationMode, all.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
		firstAvailable := resourceapi.DeviceRequest{Name: "req", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "h100", DeviceClassName: classH100, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
			{Name: "any", DeviceClassName: classGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}
		gpuAndNIC := exact(classGPU, 1, fmt.Sprintf("device.attributes[%q].index == 0", gpuDriver))
		nic := exact(classNIC, 1, "")
		nic.Name = "nic"
		tolerantGPU := exact(classGPU, 1, "")
		tolerantGPU.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: unhealthyTaint, Operator: resourceapi.DeviceTolerationOpExists}}
		tolerantNIC := exact(classNIC, 2, "")
		tolerantNIC.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: maintenanceTaint, Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		sharedExpr := fmt.Sprintf("device.attributes[%q].?shared.orValue(false)", nicDriver)
		bandwidth := exact(classNIC, 1, sharedExpr)
		bandwidth.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"bandwidth": resource.MustParse(g.one([]string{"30Gi", "45Gi", "2500Mi"})),
		}}
		for _, c := range []struct {
			name     string
			requests []resourceapi.DeviceRequest
		}{
			{"one-gpu", []resourceapi.DeviceRequest{exact(classGPU, 1, "")}},
			{"two-gpus", []resourceapi.DeviceRequest{exact(classGPU, 2, "")}},
			{"three-a100s", []resourceapi.DeviceRequest{exact(classGPU, 3, fmt.Sprintf("device.attributes[%q].model == \"a100\"", gpuDriver))}},
			{"big-gpu", []resourceapi.DeviceRequest{exact(classGPU, 1, fmt.Sprintf("device.capacity[%q].memory.compareTo(quantity(\"80Gi\")) >= 0", gpuDriver))}},
			{"all-big-h100s", []resourceapi.DeviceRequest{all}},
			{"h100s-or-any", []resourceapi.DeviceRequest{firstAvailable}},
			{"nic", []resourceapi.DeviceRequest{exact(classNIC, 1, "")}},
			{"gpu-and-nic", []resourceapi.DeviceRequest{gpuAndNIC, nic}},
			{"missing-class", []resourceapi.DeviceRequest{exact(classMissing, 1, "")}},
			{"tolerant-gpu", []resourceapi.DeviceRequest{tolerantGPU}},
			{"both-nics", []resourceapi.DeviceRequest{tolerantNIC}},
			{"nic-bandwidth", []resourceapi.DeviceRequest{bandwidth}},
			{"nic-default-bandwidth", []resourceapi.DeviceRequest{exact(classNIC, 1, sharedExpr)}},
		} {
			objs = append(objs, g.claim(ns, c.name, c.requests...))
		}
		if stale := g.allocatedClaim(ns, "stale-gpu", nil); stale != nil {
			objs = append(objs, stale)
			g.devices.claims[ns] = append(g.devices.claims[ns], stale.Name)
		}
	}
	return objs
}

// claim returns a claim of requests that pending pods of ns may use.
func (g *generator) claim(ns, name string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	g.devices.claims[ns] = append(g.devices.claims[ns], name)
	return &resourceapi.ResourceClaim{
		// A resourceVersion, as the API server gives: upstream's assume
		// cache drops objects without one.
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: g.nextUID(), ResourceVersion: "1"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
}

// allocatedClaim returns a claim of one GPU allocated on a node that has
// one free, reserved for pod when it is not nil (and then on pod's node),
// or nil when there is no such node.
func (g *generator) allocatedClaim(ns, name string, pod *v1.Pod) *resourceapi.ResourceClaim {
	node := ""
	if pod != nil {
		node = pod.Spec.NodeName
	} else {
		for _, n := range g.nodes {
			if len(g.devices.freeGPUs[n.Name]) > 0 && g.chance(0.3) {
				node = n.Name
				break
			}
		}
	}
	free := g.devices.freeGPUs[node]
	if len(free) == 0 {
		return nil
	}
	device := free[0]
	g.devices.freeGPUs[node] = free[1:]
	c := g.claim(ns, name, resourceapi.DeviceRequest{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: classGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}})
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "req", Driver: gpuDriver, Pool: node, Device: device},
		}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}},
		}}}},
	}
	if pod != nil {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(c.Name)})
	}
	return c
}

// generatedClaim gives a pending pod a claim from a template: the claim
// the controller made for it, owned by the pod and named in its status,
// or, sometimes, not made yet.
func (g *generator) generatedClaim(p *v1.Pod) *resourceapi.ResourceClaim {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "generated", ResourceClaimTemplateName: ptr.To("gpu-template")})
	if g.chance(0.2) {
		return nil
	}
	c := g.claim(p.Namespace, p.Name+"-generated", resourceapi.DeviceRequest{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: g.one([]string{classGPU, classH100}), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}})
	// Only the pod may use it.
	g.devices.claims[p.Namespace] = slices.DeleteFunc(g.devices.claims[p.Namespace], func(n string) bool { return n == c.Name })
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: "generated", ResourceClaimName: ptr.To(c.Name)})
	return c
}

// podClaims gives a pending pod one or two distinct claims of its
// namespace, sometimes one that does not exist.
func (g *generator) podClaims(p *v1.Pod) {
	names := slices.Concat(g.devices.claims[p.Namespace], []string{"missing"})
	first := g.one(names)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "claim-0", ResourceClaimName: ptr.To(first)}}
	if second := g.one(names); second != first && g.chance(0.3) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "claim-1", ResourceClaimName: ptr.To(second)})
	}
}
