package noderesources_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/noderesources"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	gpu       = "example.com/gpu"
	gpuDriver = "gpu.example.com"
)

// newDRA returns the scheduler's DRA manager over objs.
func newDRA(tb testing.TB, objs ...k8sruntime.Object) *dynamicresources.Manager {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	m, err := dynamicresources.NewManager(ctx, client, f)
	if err != nil {
		tb.Fatal(err)
	}
	f.Start(ctx.Done())
	tb.Cleanup(func() { cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.ClaimEvents().HasSynced, m.SliceEvents().HasSynced, m.DeviceClassEvents().HasSynced) {
		tb.Fatal("DRA manager did not sync")
	}
	return m
}

// gpuClass provides gpu with the devices of gpuDriver.
func gpuClass(extendedResourceName string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-class"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", gpuDriver),
		}}}},
	}
	if extendedResourceName != "" {
		c.Spec.ExtendedResourceName = ptr.To(extendedResourceName)
	}
	return c
}

// gpuSlice publishes count devices of driver on node.
func gpuSlice(node, driver string, count int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec:       resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for i := range count {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

// allocatedClaim holds device gpu-0 of node.
func allocatedClaim(node string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "taken", UID: "taken-uid", ResourceVersion: "1"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: gpuDriver, Pool: node, Device: "gpu-0"}},
		}}},
	}
}

// TestFitFilterDRAExtendedResource: a resource a DeviceClass provides is
// left to DynamicResources on nodes without it as allocatable (missing
// or 0), and checked as usual where a device plugin has it.
func TestFitFilterDRAExtendedResource(t *testing.T) {
	status := func(code framework.Code, reasons ...string) *framework.Status {
		return framework.NewStatus(code, reasons...).WithPlugin(noderesources.Name)
	}
	nodes := []*v1.Node{
		st.MakeNode().Name("device-plugin").Capacity(res{v1.ResourceCPU: "4", gpu: "4"}).Obj(),
		st.MakeNode().Name("zero").Capacity(res{v1.ResourceCPU: "4", gpu: "0"}).Obj(),
		st.MakeNode().Name("none").Capacity(res{v1.ResourceCPU: "4"}).Obj(),
	}
	tests := []struct {
		name  string
		class *resourceapi.DeviceClass
		pod   *v1.Pod
		want  map[string]*framework.Status
	}{
		{
			name:  "backed by DRA",
			class: gpuClass(gpu),
			pod:   st.MakePod().Name("p").Req(res{gpu: "2"}).Obj(),
			want:  map[string]*framework.Status{"device-plugin": nil, "zero": nil, "none": nil},
		},
		{
			name:  "backed by DRA, more than the device plugin has",
			class: gpuClass(gpu),
			pod:   st.MakePod().Name("p").Req(res{gpu: "5"}).Obj(),
			want: map[string]*framework.Status{
				"device-plugin": status(framework.UnschedulableAndUnresolvable, "Insufficient example.com/gpu"),
				"zero":          nil,
				"none":          nil,
			},
		},
		{
			name:  "implicit name of the class",
			class: gpuClass(""),
			pod:   st.MakePod().Name("p").Req(res{v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "gpu-class"): "1"}).Obj(),
			want:  map[string]*framework.Status{"device-plugin": nil, "zero": nil, "none": nil},
		},
		{
			name:  "no class provides it",
			class: gpuClass("example.com/other"),
			pod:   st.MakePod().Name("p").Req(res{gpu: "2"}).Obj(),
			want: map[string]*framework.Status{
				"device-plugin": nil,
				"zero":          status(framework.UnschedulableAndUnresolvable, "Insufficient example.com/gpu"),
				"none":          status(framework.UnschedulableAndUnresolvable, "Insufficient example.com/gpu"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			fwk := newFramework(t, snapshot, nil, runtime.WithSharedDRAManager(newDRA(t, tt.class)))
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if diff := cmp.Diff(tt.want, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFitScoreDRAExtendedResource: a scored resource backed by DRA counts,
// on a node without it as allocatable, the node's devices of the class as
// allocatable and those allocated as in use (upstream's
// calculateDRAResourceTotals); other drivers' devices do not count.
func TestFitScoreDRAExtendedResource(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("device-plugin").Capacity(res{gpu: "4"}).Obj(),
		st.MakeNode().Name("dra").Capacity(nil).Obj(),
		st.MakeNode().Name("other-driver").Capacity(nil).Obj(),
		st.MakeNode().Name("none").Capacity(nil).Obj(),
	}
	snapshot := st.NewSnapshot(nil, nodes)
	m := newDRA(t, gpuClass(gpu), gpuSlice("dra", gpuDriver, 4), gpuSlice("other-driver", "other.example.com", 4), allocatedClaim("dra"))
	args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{
		Type: configv1.LeastAllocated, Resources: []configv1.ResourceSpec{{Name: gpu, Weight: 1}},
	}}
	fwk := newFramework(t, snapshot, args, runtime.WithSharedDRAManager(m))
	got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").Req(res{gpu: "1"}).Obj())
	// device-plugin: (4-1)*100/4; dra: 1 of 4 devices taken, (4-2)*100/4;
	// no devices of the class: nothing to rate.
	want := map[string]int64{"device-plugin": 75, "dra": 50, "other-driver": 0, "none": 0}
	if diff := cmp.Diff(want, got.Scores); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestFitEventsDRAExtendedResource: a DeviceClass added or updated queues
// the pod when it may now provide a resource the pod requests.
func TestFitEventsDRAExtendedResource(t *testing.T) {
	fwk := newFramework(t, nil, nil, runtime.WithSharedDRAManager(newDRA(t)))
	pod := st.MakePod().Name("p").Req(res{gpu: "1", v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "fpga"): "1"}).Obj()
	add := framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Add}
	update := framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Update}
	named := func(name, extendedResourceName string) *resourceapi.DeviceClass {
		c := gpuClass(extendedResourceName)
		c.Name = name
		return c
	}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{"class providing the resource added", add, nil, named("gpu-class", gpu), framework.Queue},
		{"class of the implicit name added", add, nil, named("fpga", ""), framework.Queue},
		{"unrelated class added", add, nil, named("nic", "example.com/nic"), framework.QueueSkip},
		{"class starts providing the resource", update, named("gpu-class", ""), named("gpu-class", gpu), framework.Queue},
		{"extended resource name unchanged", update, named("gpu-class", gpu), named("gpu-class", gpu), framework.QueueSkip},
		{"class stops providing the resource", update, named("gpu-class", gpu), named("gpu-class", ""), framework.QueueSkip},
		{"deletion is not registered", framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Delete}, named("gpu-class", gpu), nil, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, noderesources.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkFitDRAExtendedResource: Filter and Score of a pod asking for an
// extended resource backed by DRA, scored over the nodes' devices.
func BenchmarkFitDRAExtendedResource(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Capacity(res{v1.ResourceCPU: "32", v1.ResourceMemory: "128Gi"}).Obj()
	})
	objs := []k8sruntime.Object{gpuClass(gpu)}
	for _, n := range nodes {
		objs = append(objs, gpuSlice(n.Name, gpuDriver, 8))
	}
	snapshot := st.NewSnapshot(nil, nodes)
	m := newDRA(b, objs...)
	pod := st.MakePod().Name("p").Req(res{v1.ResourceCPU: "2", v1.ResourceMemory: "4Gi", gpu: "1"}).Obj()
	args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: configv1.LeastAllocated,
		Resources: []configv1.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}, {Name: gpu, Weight: 3}}}}
	fwk := newFramework(b, snapshot, args, runtime.WithParallelism(1), runtime.WithSharedDRAManager(m))
	b.Run("Filter", func(b *testing.B) { st.BenchmarkFilter(b, fwk, snapshot, pod) })
	b.Run("Score", func(b *testing.B) { st.BenchmarkScore(b, fwk, snapshot, pod) })
}
