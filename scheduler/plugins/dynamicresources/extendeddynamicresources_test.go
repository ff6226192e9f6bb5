package dynamicresources

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

const gpuResource v1.ResourceName = "example.com/gpu"

// fakeResolver maps extended resource names to classes.
type fakeResolver map[v1.ResourceName]*resourceapi.DeviceClass

func (r fakeResolver) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass { return r[name] }

func exact(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
}

// TestCreateRequestsAndMappings: the special claim's requests and the
// container mappings, named and shared as upstream names and shares them.
func TestCreateRequestsAndMappings(t *testing.T) {
	const fpga = v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "fpga")
	resolver := fakeResolver{gpuResource: class("gpu"), fpga: class("fpga")}
	mapping := func(container string, resource v1.ResourceName, request string) v1.ContainerExtendedResourceRequest {
		return v1.ContainerExtendedResourceRequest{ContainerName: container, ResourceName: string(resource), RequestName: request}
	}
	tests := []struct {
		name         string
		pod          *v1.Pod
		resources    map[v1.ResourceName]int64
		wantRequests []resourceapi.DeviceRequest
		wantMappings []v1.ContainerExtendedResourceRequest
	}{
		{
			name:         "request indexed among the container's sorted requests",
			pod:          st.MakePod().Req(map[v1.ResourceName]string{"cpu": "1", gpuResource: "2"}).Obj(),
			resources:    map[v1.ResourceName]int64{gpuResource: 2},
			wantRequests: []resourceapi.DeviceRequest{exact("container-0-request-1", "gpu", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{mapping("c0", gpuResource, "container-0-request-1")},
		},
		{
			name:      "implicit and explicit names in one container",
			pod:       st.MakePod().Req(map[v1.ResourceName]string{gpuResource: "1", fpga: "1"}).Obj(),
			resources: map[v1.ResourceName]int64{gpuResource: 1, fpga: 1},
			wantRequests: []resourceapi.DeviceRequest{
				exact("container-0-request-0", "fpga", 1),
				exact("container-0-request-1", "gpu", 1),
			},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapping("c0", fpga, "container-0-request-0"),
				mapping("c0", gpuResource, "container-0-request-1"),
			},
		},
		{
			name:         "init container reuses a later container's devices",
			pod:          st.MakePod().InitReq(map[v1.ResourceName]string{gpuResource: "1"}).Req(map[v1.ResourceName]string{gpuResource: "2"}).Obj(),
			resources:    map[v1.ResourceName]int64{gpuResource: 2},
			wantRequests: []resourceapi.DeviceRequest{exact("container-1-request-0", "gpu", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapping("c0", gpuResource, "container-1-request-0"),
				mapping("init0", gpuResource, "container-1-request-0"),
			},
		},
		{
			name: "init container needing more than later containers have asks for the rest",
			pod: st.MakePod().InitReq(map[v1.ResourceName]string{gpuResource: "3"}).InitReq(map[v1.ResourceName]string{gpuResource: "1"}).
				Req(map[v1.ResourceName]string{gpuResource: "1"}).Obj(),
			resources: map[v1.ResourceName]int64{gpuResource: 3},
			wantRequests: []resourceapi.DeviceRequest{
				exact("container-0-request-0", "gpu", 2),
				exact("container-2-request-0", "gpu", 1),
			},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapping("c0", gpuResource, "container-2-request-0"),
				mapping("init0", gpuResource, "container-2-request-0"),
				mapping("init0", gpuResource, "container-0-request-0"),
				mapping("init1", gpuResource, "container-2-request-0"),
			},
		},
		{
			name: "init containers running one at a time share the largest request",
			pod: st.MakePod().InitReq(map[v1.ResourceName]string{gpuResource: "1"}).InitReq(map[v1.ResourceName]string{gpuResource: "2"}).
				Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(),
			resources:    map[v1.ResourceName]int64{gpuResource: 2},
			wantRequests: []resourceapi.DeviceRequest{exact("container-1-request-0", "gpu", 2)},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapping("init0", gpuResource, "container-1-request-0"),
				mapping("init1", gpuResource, "container-1-request-0"),
			},
		},
		{
			name: "sidecar runs with the containers and gets its own devices",
			pod: st.MakePod().SidecarReq(map[v1.ResourceName]string{gpuResource: "1"}).
				Req(map[v1.ResourceName]string{gpuResource: "1"}).Obj(),
			resources: map[v1.ResourceName]int64{gpuResource: 2},
			wantRequests: []resourceapi.DeviceRequest{
				exact("container-0-request-0", "gpu", 1),
				exact("container-1-request-0", "gpu", 1),
			},
			wantMappings: []v1.ContainerExtendedResourceRequest{
				mapping("init0", gpuResource, "container-0-request-0"),
				mapping("c0", gpuResource, "container-1-request-0"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests, mappings := createRequestsAndMappings(tt.pod, tt.resources, resolver)
			if diff := cmp.Diff(tt.wantRequests, requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMappings, mappings); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
		})
	}
}

// extendedClass provides gpuResource with devices of driver.
func extendedClass() *resourceapi.DeviceClass {
	c := class(className)
	c.Spec.ExtendedResourceName = ptr.To(string(gpuResource))
	return c
}

func extendedResourcePod(name string, resources map[v1.ResourceName]string) *v1.Pod {
	return st.MakePod().Namespace(namespace).Name(name).UID(name + "-uid").Req(resources).Obj()
}

// staleClaim is a special claim a previous cycle created for pod.
func staleClaim(pod *v1.Pod) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: pod.Name + "-extended-resources-abcde", UID: "stale-uid", ResourceVersion: "1",
			Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}},
			Finalizers:      []string{resourceapi.Finalizer},
		},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exact("container-0-request-0", className, 1)}}},
	}
}

// TestFilterExtendedResources covers PreFilter and Filter for extended
// resources backed by DRA, with upstream's messages; NodeResourcesFit is
// not in the profile, so a node's allocatable is not checked here.
func TestFilterExtendedResources(t *testing.T) {
	devicePluginNode := st.MakeNode().Name("device-plugin").Capacity(map[v1.ResourceName]string{gpuResource: "4"}).Obj()
	nodes := []*v1.Node{node("node-1"), node("node-2"), devicePluginNode}
	pod := extendedResourcePod("p", map[v1.ResourceName]string{gpuResource: "2"})
	tests := []struct {
		name string
		objs []k8sruntime.Object
		pod  *v1.Pod
		want map[string]*framework.Status
	}{
		{
			name: "no class provides the resource",
			objs: []k8sruntime.Object{class(className), slice("node-1", "gpu-0", "gpu-1")},
			pod:  pod,
			want: map[string]*framework.Status{"node-1": nil, "node-2": nil, "device-plugin": nil},
		},
		{
			name: "devices of the class, or the node's device plugin",
			objs: []k8sruntime.Object{extendedClass(), slice("node-1", "gpu-0", "gpu-1"), slice("node-2", "gpu-0")},
			pod:  pod,
			want: map[string]*framework.Status{
				"node-1":        nil,
				"node-2":        status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
				"device-plugin": nil,
			},
		},
		{
			name: "implicit name of the class",
			objs: []k8sruntime.Object{class(className), slice("node-1", "gpu-0", "gpu-1"), slice("node-2", "gpu-0")},
			pod:  extendedResourcePod("p", map[v1.ResourceName]string{v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + className): "2"}),
			want: map[string]*framework.Status{
				"node-1":        nil,
				"node-2":        status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
				"device-plugin": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
			},
		},
		{
			name: "another extended resource neither allocatable nor backed by DRA",
			objs: []k8sruntime.Object{extendedClass(), slice("node-1", "gpu-0", "gpu-1")},
			pod:  extendedResourcePod("p", map[v1.ResourceName]string{gpuResource: "2", "example.com/nic": "1"}),
			want: map[string]*framework.Status{
				"node-1":        status(framework.UnschedulableAndUnresolvable, "cannot fit resource"),
				"node-2":        status(framework.UnschedulableAndUnresolvable, "cannot fit resource"),
				"device-plugin": status(framework.UnschedulableAndUnresolvable, "cannot fit resource"),
			},
		},
		{
			name: "special claim of a previous cycle",
			objs: []k8sruntime.Object{extendedClass(), slice("node-1", "gpu-0", "gpu-1"), staleClaim(pod)},
			pod:  pod,
			want: map[string]*framework.Status{
				"node-1":        status(framework.UnschedulableAndUnresolvable, "cannot schedule extended resource claim"),
				"node-2":        status(framework.UnschedulableAndUnresolvable, "cannot schedule extended resource claim"),
				"device-plugin": status(framework.UnschedulableAndUnresolvable, "cannot schedule extended resource claim"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nodes, tt.objs...)
			got := st.RunCycle(t.Context(), e.fwk, e.snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPostFilterDeletesStaleExtendedResourceClaim: the special claim of a
// previous cycle is deleted, finalizer first, so the next attempt starts anew.
func TestPostFilterDeletesStaleExtendedResourceClaim(t *testing.T) {
	pod := extendedResourcePod("p", map[v1.ResourceName]string{gpuResource: "1"})
	stale := staleClaim(pod)
	e := newEnv(t, []*v1.Node{node("node-1")}, extendedClass(), slice("node-1", "gpu-0"), stale)
	ctx := t.Context()
	state := framework.NewCycleState()
	if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	ni, _ := e.snapshot.NodeInfos().Get("node-1")
	if s := e.fwk.RunFilterPlugins(ctx, state, pod, ni); s.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("Filter: %v", s)
	}
	_, got := e.fwk.RunPostFilterPlugins(ctx, state, pod, framework.NewDefaultNodeToStatus())
	if diff := cmp.Diff(status(framework.Unschedulable, "deletion of ResourceClaim completed"), got); diff != "" {
		t.Errorf("PostFilter (-want +got):\n%s", diff)
	}
	if _, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, stale.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("stale claim after PostFilter: %v, want it deleted", err)
	}
}

// TestExtendedResourceClaimLifecycle follows the special claim from
// Reserve to PreBind, which creates it, writes its allocation and the
// pod's status, and to Unreserve, which deletes it.
func TestExtendedResourceClaimLifecycle(t *testing.T) {
	pod := extendedResourcePod("p", map[v1.ResourceName]string{gpuResource: "2"})
	e := newEnv(t, []*v1.Node{node("node-1")}, extendedClass(), slice("node-1", "gpu-0", "gpu-1", "gpu-2"), pod)
	// The API server generates names; the fake client does not.
	e.client.PrependReactor("create", "resourceclaims", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
		obj := action.(clienttesting.CreateAction).GetObject().(*resourceapi.ResourceClaim)
		if obj.Name == "" {
			obj.Name = obj.GenerateName + "abcde"
			obj.UID = "created-uid"
			obj.ResourceVersion = "1"
		}
		return false, nil, nil
	})
	ctx := t.Context()
	state := framework.NewCycleState()
	if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	ni, _ := e.snapshot.NodeInfos().Get("node-1")
	if s := e.fwk.RunFilterPlugins(ctx, state, pod, ni); !s.IsSuccess() {
		t.Fatalf("Filter: %v", s)
	}
	if s := e.fwk.RunReservePluginsReserve(ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("Reserve: %v", s)
	}
	// In flight: only one device is left for another pod.
	other := extendedResourcePod("other", map[v1.ResourceName]string{gpuResource: "2"})
	wantOther := map[string]*framework.Status{"node-1": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims")}
	if diff := cmp.Diff(wantOther, st.RunCycle(ctx, e.fwk, e.snapshot, other).Filter); diff != "" {
		t.Errorf("other pod while in flight (-want +got):\n%s", diff)
	}
	if _, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "p-extended-resources-abcde", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("claim before PreBind: %v, want none (no API call in the scheduling cycle)", err)
	}

	if s := e.fwk.RunPreBindPlugins(ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("PreBind: %v", s)
	}
	created, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "p-extended-resources-abcde", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := metav1.ObjectMeta{
		Namespace: namespace, Name: "p-extended-resources-abcde", GenerateName: "p-extended-resources-",
		Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p-uid", Controller: ptr.To(true)}},
		Finalizers:      []string{resourceapi.Finalizer},
	}
	gotMeta := created.ObjectMeta
	gotMeta.UID, gotMeta.ResourceVersion, gotMeta.ManagedFields = "", "", nil
	if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
		t.Errorf("claim metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]resourceapi.DeviceRequest{exact("container-0-request-0", className, 2)}, created.Spec.Devices.Requests); diff != "" {
		t.Errorf("claim requests (-want +got):\n%s", diff)
	}
	if created.Status.Allocation == nil || len(created.Status.Allocation.Devices.Results) != 2 {
		t.Errorf("claim allocation = %+v, want two devices", created.Status.Allocation)
	}
	if diff := cmp.Diff([]resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p-uid"}}, created.Status.ReservedFor); diff != "" {
		t.Errorf("reservedFor (-want +got):\n%s", diff)
	}
	gotPod, err := e.client.CoreV1().Pods(namespace).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "p-extended-resources-abcde",
		RequestMappings:   []v1.ContainerExtendedResourceRequest{{ContainerName: "c0", ResourceName: string(gpuResource), RequestName: "container-0-request-0"}},
	}
	if diff := cmp.Diff(wantStatus, gotPod.Status.ExtendedResourceClaimStatus); diff != "" {
		t.Errorf("pod.status.extendedResourceClaimStatus (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(e.fwk.Metrics().ResourceClaimCreates.WithLabelValues("success", "false", "", "Pod")); got != 1 {
		t.Errorf("resourceclaim_creates_total{status=success} = %v, want 1", got)
	}

	// Binding failed after PreBind: the claim goes.
	e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "node-1")
	if _, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "p-extended-resources-abcde", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim after Unreserve: %v, want it deleted", err)
	}
}

// TestFindExtendedResourceClaim: the special claim is the one annotated
// as such and controlled by the pod, in the pod's namespace.
func TestFindExtendedResourceClaim(t *testing.T) {
	pod := extendedResourcePod("p", nil)
	own := staleClaim(pod)
	notController := own.DeepCopy()
	notController.OwnerReferences[0].Controller = nil
	otherPod := own.DeepCopy()
	otherPod.OwnerReferences[0].UID = "other-uid"
	notAnnotated := own.DeepCopy()
	notAnnotated.Annotations = nil
	planted := own.DeepCopy()
	planted.Namespace = "elsewhere"
	tests := []struct {
		claims []*resourceapi.ResourceClaim
		want   *resourceapi.ResourceClaim
	}{
		{claims: []*resourceapi.ResourceClaim{notController, otherPod, notAnnotated, planted}},
		{claims: []*resourceapi.ResourceClaim{notAnnotated, own}, want: own},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, findExtendedResourceClaim(pod, tt.claims)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkPreFilterWithoutClaims: PreFilter of pods without claims, with
// and without an extended resource that no class provides (a device
// plugin's), in a cluster where a class provides another: such pods must
// cost no more than a look at their containers' requests.
func BenchmarkPreFilterWithoutClaims(b *testing.B) {
	other := class("fpga")
	other.Spec.ExtendedResourceName = ptr.To("example.com/fpga")
	e := newEnv(b, []*v1.Node{node("node-1")}, other)
	for name, pod := range map[string]*v1.Pod{
		"cpu and memory":         st.MakePod().Namespace(namespace).Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}).Obj(),
		"device plugin resource": st.MakePod().Namespace(namespace).Name("p").Req(map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi", gpuResource: "1"}).Obj(),
	} {
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, framework.NewCycleState(), pod); !s.IsSkip() && !s.IsSuccess() {
					b.Fatal(s)
				}
			}
		})
	}
}

// TestDeviceClassEventsAfterCache: the queue hears of a DeviceClass once
// the extended resource cache has it, so a pod the event requeues finds
// the class behind its extended resource.
func TestDeviceClassEventsAfterCache(t *testing.T) {
	e := newEnv(t, nil)
	seen := make(chan bool, 1)
	if _, err := e.manager.DeviceClassEvents().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { seen <- e.manager.DeviceClassResolver().GetDeviceClass(gpuResource) != nil },
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.ResourceV1().DeviceClasses().Create(t.Context(), extendedClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case resolved := <-seen:
		if !resolved {
			t.Error("the class was not resolvable when the event was relayed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no DeviceClass event relayed")
	}
}
