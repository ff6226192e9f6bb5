package upstreamdiff

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The DRA features kube-scheduler 1.37.2 has on by default beyond plain
// devices: partitionable devices (DRAPartitionableDevices: counters
// shared by the partitions of a device, devices that pick their nodes
// one by one), binding conditions (DRADeviceBindingConditions: devices
// that must be attached before the pod binds) and admin access
// (DRAAdminAccess: requests for devices already in use).
const (
	partDriver   = "part.example.com"
	fpgaDriver   = "fpga.example.com"
	attachDriver = "attach.example.com"

	classPart   = "gpu-partition"
	classFPGA   = "fpga"
	classAttach = "attached-gpu"

	// attachedCondition is the binding condition of the attachable
	// devices, attachFailedCondition their binding failure condition.
	attachedCondition     = "Attached"
	attachFailedCondition = "AttachFailed"
)

// Attachable devices' states, in their "state" attribute and their name:
// the simulated driver of newFakeClient answers an allocation of a
// "ready" device with its binding condition true, of a "failing" one with
// its failure condition true, and of a "slow" one not at all, so PreBind
// waits until its context ends.
const (
	attachReady   = "ready"
	attachFailing = "failing"
	attachSlow    = "slow"
	// attachHeld devices are allocated to claims from before the run.
	attachHeld = "held"
)

// conditionTime is the time of every condition the generator and the
// simulated driver write: the same on both sides.
var conditionTime = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// draFeatures returns the objects of those features: DeviceClasses; per
// some nodes a pool of a GPU's partitions (whole, halves, quarters)
// consuming one counter set of a separate slice; a pool of FPGAs whose
// devices name their nodes (a node, a zone, all nodes); a pool of
// attachable GPUs on all nodes, some bound to the node they are attached
// to, with binding and binding failure conditions; per namespace claims
// of partitions, FPGAs, attachable GPUs and admin access (to a GPU and to
// all NICs, in use or not), and claims allocated before the run to an
// attachable GPU whose binding failed, timed out or succeeded.
func (g *generator) draFeatures() []k8sruntime.Object {
	class := func(name, driver string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", driver),
			}}}},
		}
	}
	objs := []k8sruntime.Object{class(classPart, partDriver), class(classFPGA, fpgaDriver), class(classAttach, attachDriver)}
	objs = append(objs, g.partitions()...)
	objs = append(objs, g.fpgas(), g.attachable())
	for i, ns := range namespaces {
		objs = append(objs, g.featureClaims(ns, i)...)
	}
	return objs
}

// partitions returns, for some nodes, a pool of two slices: one with the
// counters of a GPU's memory and compute slices, one with the partitions
// that consume them.
func (g *generator) partitions() []k8sruntime.Object {
	var objs []k8sruntime.Object
	counters := func(memory string, slices int64) map[string]resourceapi.Counter {
		return map[string]resourceapi.Counter{
			"memory": {Value: resource.MustParse(memory)},
			"slices": {Value: *resource.NewQuantity(slices, resource.DecimalSI)},
		}
	}
	for _, n := range g.nodes {
		if !g.chance(0.3) {
			continue
		}
		pool := resourceapi.ResourcePool{Name: n.Name + "-part", Generation: 1, ResourceSliceCount: 2}
		part := func(name, size, memory string, slices int64) resourceapi.Device {
			return resourceapi.Device{
				Name:             name,
				Attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"size": {StringValue: ptr.To(size)}},
				Capacity:         map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}},
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: counters(memory, slices)}},
			}
		}
		devices := []resourceapi.Device{
			part("gpu-0", "whole", "80Gi", 8),
			part("gpu-0-half-0", "half", "40Gi", 4), part("gpu-0-half-1", "half", "40Gi", 4),
		}
		for i := range 1 + g.pick(4) {
			devices = append(devices, part(fmt.Sprintf("gpu-0-quarter-%d", i), "quarter", "20Gi", 2))
		}
		objs = append(objs,
			&resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-part-counters"},
				Spec: resourceapi.ResourceSliceSpec{
					Driver: partDriver, Pool: pool, NodeName: ptr.To(n.Name),
					SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: counters(g.one([]string{"80Gi", "60Gi"}), 8)}},
				},
			},
			&resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-part-devices"},
				Spec:       resourceapi.ResourceSliceSpec{Driver: partDriver, Pool: pool, NodeName: ptr.To(n.Name), Devices: devices},
			})
	}
	return objs
}

// fpgas returns a slice whose devices each say which nodes reach them
// (perDeviceNodeSelection).
func (g *generator) fpgas() *resourceapi.ResourceSlice {
	devices := []resourceapi.Device{
		{Name: "fpga-all", AllNodes: ptr.To(true)},
		{Name: "fpga-zone-b", NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-b"}},
		}}}}},
	}
	for i := range 3 {
		devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("fpga-%d", i), NodeName: ptr.To(g.nodes[g.pick(len(g.nodes))].Name)})
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fpgas"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: fpgaDriver, Pool: resourceapi.ResourcePool{Name: "fpgas", Generation: 1, ResourceSliceCount: 1},
			PerDeviceNodeSelection: ptr.To(true), Devices: devices,
		},
	}
}

// attachable returns a slice of GPUs any node can attach, each with
// binding conditions; some bind to the node they get attached to.
func (g *generator) attachable() *resourceapi.ResourceSlice {
	var devices []resourceapi.Device
	states := []string{attachReady, attachFailing, attachSlow, attachReady}
	for range len(namespaces) * len(heldOutcomes) {
		states = append(states, attachHeld)
	}
	for i, state := range states {
		devices = append(devices, resourceapi.Device{
			Name:                     fmt.Sprintf("%s-%d", state, i),
			Attributes:               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"state": {StringValue: ptr.To(state)}},
			BindsToNode:              ptr.To(g.chance(0.5)),
			BindingConditions:        []string{attachedCondition},
			BindingFailureConditions: []string{attachFailedCondition},
		})
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "attachable"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: attachDriver, Pool: resourceapi.ResourcePool{Name: "attachable", Generation: 1, ResourceSliceCount: 1},
			AllNodes: ptr.To(true), Devices: devices,
		},
	}
}

// featureClaims returns ns's claims of the features, which its pending
// pods may use; the ith namespace holds the ith len(heldOutcomes)
// attachHeld devices.
func (g *generator) featureClaims(ns string, i int) []k8sruntime.Object {
	request := func(class string, count int64, expr string) resourceapi.DeviceRequest {
		r := resourceapi.DeviceRequest{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
		}}
		if expr != "" {
			r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
		}
		return r
	}
	attr := func(driver, name, value string) string {
		return fmt.Sprintf("device.attributes[%q].%s == %q", driver, name, value)
	}
	adminGPU := request(classGPU, 1, "")
	adminGPU.Exactly.AdminAccess = ptr.To(true)
	adminNICs := request(classNIC, 0, "")
	adminNICs.Exactly.AllocationMode, adminNICs.Exactly.Count, adminNICs.Exactly.AdminAccess = resourceapi.DeviceAllocationModeAll, 0, ptr.To(true)
	var objs []k8sruntime.Object
	for _, c := range []struct {
		name     string
		requests []resourceapi.DeviceRequest
	}{
		{"half-gpu", []resourceapi.DeviceRequest{request(classPart, 1, attr(partDriver, "size", "half"))}},
		{"two-quarters", []resourceapi.DeviceRequest{request(classPart, 2, attr(partDriver, "size", "quarter"))}},
		{"whole-partitioned-gpu", []resourceapi.DeviceRequest{request(classPart, 1, attr(partDriver, "size", "whole"))}},
		{"any-partition", []resourceapi.DeviceRequest{request(classPart, 1, "")}},
		{"fpga", []resourceapi.DeviceRequest{request(classFPGA, 1, "")}},
		{"two-fpgas", []resourceapi.DeviceRequest{request(classFPGA, 2, "")}},
		{"attached-gpu", []resourceapi.DeviceRequest{request(classAttach, 1, "")}},
		{"attached-gpu-" + attachFailing, []resourceapi.DeviceRequest{request(classAttach, 1, attr(attachDriver, "state", attachFailing))}},
		{"attached-gpu-" + attachSlow, []resourceapi.DeviceRequest{request(classAttach, 1, attr(attachDriver, "state", attachSlow))}},
		{"admin-gpu", []resourceapi.DeviceRequest{adminGPU}},
		{"admin-all-nics", []resourceapi.DeviceRequest{adminNICs}},
	} {
		objs = append(objs, g.claim(ns, c.name, c.requests...))
	}
	for j, outcome := range heldOutcomes {
		device := fmt.Sprintf("%s-%d", attachHeld, 4+i*len(heldOutcomes)+j)
		objs = append(objs, g.heldAttachedClaim(ns, device, outcome))
	}
	return objs
}

// heldOutcomes are the outcomes of the binding of the claims allocated
// before the run: failed, timed out (allocated longer ago than the
// binding timeout, conditions unknown), or attached. Filter finds the
// first two unavailable everywhere and PostFilter deallocates them.
var heldOutcomes = []string{"failed", "timed-out", "attached"}

// heldAttachedClaim returns a claim allocated before the run to device,
// an attachable GPU set aside for it, reserved by no pod, whose binding
// had outcome (one of heldOutcomes).
func (g *generator) heldAttachedClaim(ns, device, outcome string) *resourceapi.ResourceClaim {
	c := g.claim(ns, "held-"+outcome, resourceapi.DeviceRequest{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: classAttach, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}})
	allocated := metav1.NewTime(time.Now().Add(-time.Minute))
	if outcome == "timed-out" {
		allocated = metav1.NewTime(time.Now().Add(-time.Hour))
	}
	c.Finalizers = []string{resourceapi.Finalizer}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "req", Driver: attachDriver, Pool: "attachable", Device: device,
			BindingConditions: []string{attachedCondition}, BindingFailureConditions: []string{attachFailedCondition},
		}}},
		AllocationTimestamp: &allocated,
	}
	switch outcome {
	case "failed":
		c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus(attachDriver, "attachable", device, attachFailing)}
	case "attached":
		c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus(attachDriver, "attachable", device, attachReady)}
	}
	return c
}

// deviceStatus is the status a driver reports for an attachable device
// in state attachReady or attachFailing.
func deviceStatus(driver, pool, device, state string) resourceapi.AllocatedDeviceStatus {
	cond := metav1.Condition{Type: attachedCondition, Status: metav1.ConditionTrue, Reason: "Attached", LastTransitionTime: conditionTime}
	if state == attachFailing {
		cond = metav1.Condition{Type: attachFailedCondition, Status: metav1.ConditionTrue, Reason: "FabricError", Message: "no path to " + device, LastTransitionTime: conditionTime}
	}
	return resourceapi.AllocatedDeviceStatus{Driver: driver, Pool: pool, Device: device, Conditions: []metav1.Condition{cond}}
}

// attachDevices is the simulated driver of the attachable GPUs: given a
// claim status an update is about to store, it reports the binding
// outcome of each newly allocated device that waits for one, as its name
// says (attachReady, attachFailing; attachSlow never).
func attachDevices(status *resourceapi.ResourceClaimStatus) {
	if status.Allocation == nil {
		return
	}
	for _, r := range status.Allocation.Devices.Results {
		if len(r.BindingConditions) == 0 || r.Driver != attachDriver {
			continue
		}
		reported := false
		for _, d := range status.Devices {
			reported = reported || (d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device)
		}
		state, _, _ := strings.Cut(r.Device, "-")
		if reported || (state != attachReady && state != attachFailing) {
			continue
		}
		status.Devices = append(status.Devices, deviceStatus(r.Driver, r.Pool, r.Device, state))
	}
}
