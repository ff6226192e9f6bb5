package localcluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The simulated GPUs: the DRA driver that publishes them, the DeviceClass
// that selects them and the extended resource that class backs.
const (
	// SimulatedDRADriverName is the driver of the simulated GPUs' devices.
	SimulatedDRADriverName = "gpu.example.com"
	// SimulatedGPUClassName is the DeviceClass of every simulated GPU.
	SimulatedGPUClassName = "gpu.example.com"
	// SimulatedGPUExtendedResource is the extended resource the class
	// backs: a pod asking for example.com/gpu gets simulated GPUs through
	// a claim the scheduler makes for it.
	SimulatedGPUExtendedResource corev1.ResourceName = "example.com/gpu"
)

// Node labels saying which simulated GPUs a node has, as GPU feature
// discovery labels nodes with the count, product and memory of their GPUs:
// the simulated DRA driver publishes the devices they describe.
const (
	LabelSimulatedGPUCount  = "gpu.example.com/count"
	LabelSimulatedGPUModel  = "gpu.example.com/model"
	LabelSimulatedGPUMemory = "gpu.example.com/memory"
)

// The attributes and capacity of each simulated GPU device, in the
// driver's domain: a CEL selector reads them as
// device.attributes["gpu.example.com"].model and
// device.capacity["gpu.example.com"].memory.
const (
	GPUAttributeModel = "model"
	GPUAttributeIndex = "index"
	GPUCapacityMemory = "memory"
)

// SimulatedGPUs describes the GPUs of a simulated node.
type SimulatedGPUs struct {
	Count int
	// Model is the model attribute of each device.
	Model string
	// Memory is each device's memory capacity, a quantity such as "80Gi".
	Memory string
}

// StandardGPUs are the GPUs of the local run's GPU nodes.
func StandardGPUs() SimulatedGPUs {
	return SimulatedGPUs{Count: 4, Model: "sim-80g", Memory: "80Gi"}
}

// AddSimulatedGPUs labels node as having gpus, for the simulated DRA driver.
func AddSimulatedGPUs(node *corev1.Node, gpus SimulatedGPUs) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[LabelSimulatedGPUCount] = strconv.Itoa(gpus.Count)
	node.Labels[LabelSimulatedGPUModel] = gpus.Model
	node.Labels[LabelSimulatedGPUMemory] = gpus.Memory
}

// nodeGPUs reads the simulated GPUs of node from its labels; false when it
// has none or the labels do not describe any.
func nodeGPUs(node *corev1.Node) (SimulatedGPUs, bool) {
	count, err := strconv.Atoi(node.Labels[LabelSimulatedGPUCount])
	if err != nil || count <= 0 || count > resourcev1.ResourceSliceMaxDevices {
		return SimulatedGPUs{}, false
	}
	gpus := SimulatedGPUs{Count: count, Model: node.Labels[LabelSimulatedGPUModel], Memory: node.Labels[LabelSimulatedGPUMemory]}
	if _, err := resource.ParseQuantity(gpus.Memory); err != nil {
		return SimulatedGPUs{}, false
	}
	return gpus, true
}

// SimulatedGPUClass is the DeviceClass of the simulated GPUs: every device
// of SimulatedDRADriverName, backing SimulatedGPUExtendedResource.
func SimulatedGPUClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: SimulatedGPUClassName},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", SimulatedDRADriverName),
			}}},
			ExtendedResourceName: ptr.To(string(SimulatedGPUExtendedResource)),
		},
	}
}

// SimulatedGPUSlice is the ResourceSlice the simulated driver publishes for
// node: one pool named after the node, of one slice, with a device gpu-0,
// gpu-1, … per GPU its labels declare, owned by the node so that the
// garbage collector removes it with the node, as a kubelet plugin's slices
// are. False when the node has no simulated GPUs.
func SimulatedGPUSlice(node *corev1.Node) (*resourcev1.ResourceSlice, bool) {
	gpus, ok := nodeGPUs(node)
	if !ok {
		return nil, false
	}
	memory := resource.MustParse(gpus.Memory)
	devices := make([]resourcev1.Device, 0, gpus.Count)
	for i := range gpus.Count {
		devices = append(devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				GPUAttributeModel: {StringValue: ptr.To(gpus.Model)},
				GPUAttributeIndex: {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				GPUCapacityMemory: {Value: memory.DeepCopy()},
			},
		})
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: simulatedGPUSliceName(node.Name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   SimulatedDRADriverName,
			Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node.Name),
			Devices:  devices,
		},
	}, true
}

func simulatedGPUSliceName(node string) string { return node + "-" + SimulatedDRADriverName }

// sliceNodeIndex indexes the driver's ResourceSlices by node.
const sliceNodeIndex = "simulatedDRANode"

// SimulatedDRADriver stands in for the kubelet plugins of a DRA driver on
// the simulated nodes, the way Kubelet stands in for the kubelets: no
// device exists anywhere. It installs the SimulatedGPUClass DeviceClass
// and keeps one ResourceSlice per node that has simulated GPUs (its
// LabelSimulatedGPUCount, model and memory labels) in step with the
// nodes: a slice is published when such a node appears or gains GPUs,
// rewritten when its GPUs change or someone changed the slice, and
// deleted when the node loses its GPUs or goes.
type SimulatedDRADriver struct {
	client kubernetes.Interface
	nodes  listersv1.NodeLister
	slices cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
	synced []cache.InformerSynced
}

// NewSimulatedDRADriver returns a simulated DRA driver; factory must not be
// started yet.
func NewSimulatedDRADriver(client kubernetes.Interface, factory informers.SharedInformerFactory) (*SimulatedDRADriver, error) {
	nodes := factory.Core().V1().Nodes()
	slices := factory.Resource().V1().ResourceSlices()
	if err := slices.Informer().AddIndexers(cache.Indexers{sliceNodeIndex: func(obj any) ([]string, error) {
		if s, ok := obj.(*resourcev1.ResourceSlice); ok && s.Spec.Driver == SimulatedDRADriverName && s.Spec.NodeName != nil {
			return []string{*s.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	d := &SimulatedDRADriver{
		client: client,
		nodes:  nodes.Lister(),
		slices: slices.Informer().GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "simulated-dra-driver"}),
		synced: []cache.InformerSynced{nodes.Informer().HasSynced, slices.Informer().HasSynced},
	}
	enqueueNode := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if node, ok := obj.(*corev1.Node); ok {
			d.queue.Add(node.Name)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNode,
		UpdateFunc: func(_, obj any) { enqueueNode(obj) },
		DeleteFunc: enqueueNode,
	}); err != nil {
		return nil, err
	}
	enqueueSlice := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if s, ok := obj.(*resourcev1.ResourceSlice); ok && s.Spec.Driver == SimulatedDRADriverName && s.Spec.NodeName != nil {
			d.queue.Add(*s.Spec.NodeName)
		}
	}
	if _, err := slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueSlice,
		UpdateFunc: func(_, obj any) { enqueueSlice(obj) },
		DeleteFunc: enqueueSlice,
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// Run installs the DeviceClass and keeps the slices in step until ctx
// ends; start the informer factory first.
func (d *SimulatedDRADriver) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("simulated-dra-driver")
	ctx = klog.NewContext(ctx, logger)
	go func() {
		<-ctx.Done()
		d.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return
	}
	// The class goes through the queue too, under a key no node can have
	// (node names are DNS subdomains), so that it is retried like a slice.
	d.queue.Add("")
	for {
		key, quit := d.queue.Get()
		if quit {
			return
		}
		var err error
		if key == "" {
			err = d.installClass(ctx)
		} else {
			err = d.sync(ctx, key)
		}
		if err != nil && ctx.Err() == nil {
			logger.V(2).Info("Retrying", "node", key, "err", err)
			d.queue.AddRateLimited(key)
		} else {
			d.queue.Forget(key)
		}
		d.queue.Done(key)
	}
}

// installClass creates the DeviceClass unless it exists; one changed by
// hand is left as it is.
func (d *SimulatedDRADriver) installClass(ctx context.Context) error {
	_, err := d.client.ResourceV1().DeviceClasses().Create(ctx, SimulatedGPUClass(), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Installed the DeviceClass of the simulated GPUs", "deviceClass", SimulatedGPUClassName)
	}
	return err
}

// sync makes the driver's slices of node what the node's labels say.
func (d *SimulatedDRADriver) sync(ctx context.Context, nodeName string) error {
	var want *resourcev1.ResourceSlice
	node, err := d.nodes.Get(nodeName)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case node.DeletionTimestamp == nil:
		want, _ = SimulatedGPUSlice(node)
	}
	objs, err := d.slices.ByIndex(sliceNodeIndex, nodeName)
	if err != nil {
		return err
	}
	var have *resourcev1.ResourceSlice
	for _, obj := range objs {
		slice := obj.(*resourcev1.ResourceSlice)
		if want != nil && slice.Name == want.Name {
			have = slice
			continue
		}
		if err := d.deleteSlice(ctx, slice); err != nil {
			return err
		}
	}
	switch {
	case want == nil:
		return nil
	case have == nil:
		_, err := d.client.ResourceV1().ResourceSlices().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Not yet in the informer's cache: its event brings the
			// node back.
			return nil
		}
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Published the simulated GPUs of a node", "node", nodeName, "devices", len(want.Spec.Devices))
		}
		return err
	case publishedAsWanted(have, want):
		return nil
	}
	updated := have.DeepCopy()
	updated.OwnerReferences = want.OwnerReferences
	updated.Spec = want.Spec
	// A new generation of the pool, so that consumers drop what they
	// saw of the old one.
	updated.Spec.Pool.Generation = have.Spec.Pool.Generation + 1
	_, err = d.client.ResourceV1().ResourceSlices().Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Its event brings the node back.
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Published the simulated GPUs of a node again", "node", nodeName, "devices", len(want.Spec.Devices),
			"generation", updated.Spec.Pool.Generation)
	}
	return err
}

// publishedAsWanted says whether the slice have publishes what want
// describes, whatever the pool's generation.
func publishedAsWanted(have, want *resourcev1.ResourceSlice) bool {
	spec := have.Spec.DeepCopy()
	spec.Pool.Generation = want.Spec.Pool.Generation
	return equality.Semantic.DeepEqual(*spec, want.Spec) && equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)
}

func (d *SimulatedDRADriver) deleteSlice(ctx context.Context, slice *resourcev1.ResourceSlice) error {
	err := d.client.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &slice.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Withdrew the simulated GPUs of a node", "node", ptr.Deref(slice.Spec.NodeName, ""), "resourceSlice", slice.Name)
	}
	return err
}
