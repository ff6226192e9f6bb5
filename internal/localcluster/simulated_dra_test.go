package localcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func gpuNode(name string, gpus *SimulatedGPUs) *corev1.Node {
	node := Node(name, Zones[0], Standard)
	node.UID = types.UID("uid-" + name)
	if gpus != nil {
		AddSimulatedGPUs(node, *gpus)
	}
	return node
}

func TestSimulatedGPUSlice(t *testing.T) {
	memory := resource.MustParse("40Gi")
	device := func(i int64) resourcev1.Device {
		return resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model": {StringValue: ptr.To("sim-40g")},
				"index": {IntValue: ptr.To(i)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: memory}},
		}
	}
	tests := []struct {
		name string
		node *corev1.Node
		want *resourcev1.ResourceSlice
	}{
		{
			name: "a node with two GPUs: one pool of its own, owned by the node",
			node: gpuNode("n1", &SimulatedGPUs{Count: 2, Model: "sim-40g", Memory: "40Gi"}),
			want: &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name:            "n1-gpu.example.com",
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1", Controller: ptr.To(true)}},
				},
				Spec: resourcev1.ResourceSliceSpec{
					Driver:   "gpu.example.com",
					Pool:     resourcev1.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1},
					NodeName: ptr.To("n1"),
					Devices:  []resourcev1.Device{device(0), device(1)},
				},
			},
		},
		{name: "a node without GPUs", node: gpuNode("n1", nil)},
		{name: "no GPUs", node: gpuNode("n1", &SimulatedGPUs{Count: 0, Model: "m", Memory: "40Gi"})},
		{name: "more GPUs than a slice holds", node: gpuNode("n1", &SimulatedGPUs{Count: resourcev1.ResourceSliceMaxDevices + 1, Model: "m", Memory: "40Gi"})},
		{name: "memory that is no quantity", node: gpuNode("n1", &SimulatedGPUs{Count: 1, Model: "m", Memory: "lots"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := SimulatedGPUSlice(tt.node)
			if ok != (tt.want != nil) {
				t.Fatalf("SimulatedGPUSlice published %v, want %v", ok, tt.want != nil)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SimulatedGPUSlice (-want +got):\n%s", diff)
			}
		})
	}
}

// publishedGPUs maps each slice of the simulated driver to the node it is
// for, its pool generation and its number of devices.
type publishedGPUs struct {
	Node       string
	Generation int64
	Devices    int
}

func TestSimulatedDRADriverFollowsTheNodes(t *testing.T) {
	four := StandardGPUs()
	two := SimulatedGPUs{Count: 2, Model: "sim-40g", Memory: "40Gi"}
	// A slice of the driver for a node that has no GPUs, left by an
	// earlier run.
	stray, _ := SimulatedGPUSlice(gpuNode("cpu-0", &two))
	client := fake.NewClientset(gpuNode("gpu-0", &four), gpuNode("cpu-0", nil), stray)
	factory := informers.NewSharedInformerFactory(client, 0)
	driver, err := NewSimulatedDRADriver(client, factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	go func() { defer close(done); driver.Run(ctx) }()

	steps := []struct {
		name   string
		change func(ctx context.Context) error
		want   map[string]publishedGPUs
	}{
		{
			name: "at start: the GPU node's slice, none for the other",
			want: map[string]publishedGPUs{"gpu-0-gpu.example.com": {Node: "gpu-0", Generation: 1, Devices: 4}},
		},
		{
			name: "a GPU node added",
			change: func(ctx context.Context) error {
				_, err := client.CoreV1().Nodes().Create(ctx, gpuNode("gpu-1", &two), metav1.CreateOptions{})
				return err
			},
			want: map[string]publishedGPUs{
				"gpu-0-gpu.example.com": {Node: "gpu-0", Generation: 1, Devices: 4},
				"gpu-1-gpu.example.com": {Node: "gpu-1", Generation: 1, Devices: 2},
			},
		},
		{
			name: "a node's GPUs changed: a new generation of its pool",
			change: func(ctx context.Context) error {
				_, err := client.CoreV1().Nodes().Update(ctx, gpuNode("gpu-0", &two), metav1.UpdateOptions{})
				return err
			},
			want: map[string]publishedGPUs{
				"gpu-0-gpu.example.com": {Node: "gpu-0", Generation: 2, Devices: 2},
				"gpu-1-gpu.example.com": {Node: "gpu-1", Generation: 1, Devices: 2},
			},
		},
		{
			name: "a slice changed by hand is published again",
			change: func(ctx context.Context) error {
				s, err := client.ResourceV1().ResourceSlices().Get(ctx, "gpu-1-gpu.example.com", metav1.GetOptions{})
				if err != nil {
					return err
				}
				s.Spec.Devices = s.Spec.Devices[:1]
				_, err = client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
				return err
			},
			want: map[string]publishedGPUs{
				"gpu-0-gpu.example.com": {Node: "gpu-0", Generation: 2, Devices: 2},
				"gpu-1-gpu.example.com": {Node: "gpu-1", Generation: 2, Devices: 2},
			},
		},
		{
			name: "a node that lost its GPUs",
			change: func(ctx context.Context) error {
				_, err := client.CoreV1().Nodes().Update(ctx, gpuNode("gpu-0", nil), metav1.UpdateOptions{})
				return err
			},
			want: map[string]publishedGPUs{"gpu-1-gpu.example.com": {Node: "gpu-1", Generation: 2, Devices: 2}},
		},
		{
			name: "a GPU node removed",
			change: func(ctx context.Context) error {
				return client.CoreV1().Nodes().Delete(ctx, "gpu-1", metav1.DeleteOptions{})
			},
			want: map[string]publishedGPUs{},
		},
	}
	for _, step := range steps {
		if step.change != nil {
			if err := step.change(ctx); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
		}
		var diff string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if diff = cmp.Diff(step.want, published(t, client)); diff == "" {
				break
			}
		}
		if diff != "" {
			t.Fatalf("%s: slices (-want +got):\n%s", step.name, diff)
		}
	}

	class, err := client.ResourceV1().DeviceClasses().Get(ctx, SimulatedGPUClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the DeviceClass was not installed: %v", err)
	}
	if diff := cmp.Diff(SimulatedGPUClass().Spec, class.Spec); diff != "" {
		t.Errorf("DeviceClass (-want +got):\n%s", diff)
	}
}

func published(t *testing.T, client *fake.Clientset) map[string]publishedGPUs {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]publishedGPUs{}
	for _, s := range list.Items {
		if s.Spec.Driver == SimulatedDRADriverName {
			out[s.Name] = publishedGPUs{Node: ptr.Deref(s.Spec.NodeName, ""), Generation: s.Spec.Pool.Generation, Devices: len(s.Spec.Devices)}
		}
	}
	return out
}
