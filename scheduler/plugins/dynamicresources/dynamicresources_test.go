package dynamicresources

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	namespace = "default"
	className = "gpu.example.com"
	driver    = "gpu.example.com"
)

// env is a DRA manager over a fake client holding the test's objects, and
// an instance of a profile running DynamicResources with it.
type env struct {
	client   *fake.Clientset
	manager  *Manager
	fwk      framework.Framework
	snapshot *st.Snapshot
}

func newEnv(t testing.TB, nodes []*v1.Node, objs ...k8sruntime.Object) *env {
	t.Helper()
	return newProfileEnv(t, nil, []configv1.Plugin{st.Plugin(Name, 2)}, nil, nodes, objs...)
}

// newProfileEnv is newEnv with the profile's plugins (multiPoint) and
// options: the plugins of extra are registered besides DynamicResources.
func newProfileEnv(t testing.TB, extra map[string]runtime.Factory, plugins []configv1.Plugin, opts []runtime.Option, nodes []*v1.Node, objs ...k8sruntime.Object) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	// The fake client keeps resourceVersions; the API server bumps them on
	// every write, which the claim assume cache relies on.
	client.PrependReactor("update", "resourceclaims", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
		obj := action.(clienttesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
		rv, _ := strconv.Atoi(obj.ResourceVersion)
		obj.ResourceVersion = strconv.Itoa(rv + 1)
		return false, nil, nil
	})
	f := informers.NewSharedInformerFactory(client, 0)
	m, err := NewManager(ctx, client, f)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), m.ClaimEvents().HasSynced, m.SliceEvents().HasSynced, m.DeviceClassEvents().HasSynced) {
		t.Fatal("DRA manager did not sync")
	}
	snapshot := st.NewSnapshot(nil, nodes)
	factories := map[string]runtime.Factory{Name: New}
	maps.Copy(factories, extra)
	fwk := st.NewFramework(t, registry.New(factories), st.PluginProfile(plugins...), snapshot,
		append([]runtime.Option{runtime.WithClientSet(client), runtime.WithInformerFactory(f), runtime.WithSharedDRAManager(m),
			// PreBind records an event while it waits for binding conditions.
			runtime.WithEventRecorder(&events.FakeRecorder{})}, opts...)...)
	return &env{client: client, manager: m, fwk: fwk, snapshot: snapshot}
}

// waitForClaim waits until the manager shows a claim for which ok holds.
func (e *env) waitForClaim(t *testing.T, name string, ok func(*resourceapi.ResourceClaim) bool) *resourceapi.ResourceClaim {
	t.Helper()
	var claim *resourceapi.ResourceClaim
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := e.manager.ResourceClaims().Get(namespace, name)
		if err == nil && ok(c) {
			return c
		}
		claim = c
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("claim %s never got as wanted; last seen %v", name, claim)
	return nil
}

func node(name string) *v1.Node {
	return st.MakeNode().Name(name).Label("kubernetes.io/hostname", name).Obj()
}

// slice publishes devices on nodeName, with a "model" attribute.
func slice(nodeName string, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-slice"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(nodeName),
			Pool:     resourceapi.ResourcePool{Name: nodeName, ResourceSliceCount: 1},
		},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:       d,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a100")}},
		})
	}
	return s
}

func class(name string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// claim asks for count devices of className under request "req-1".
func claim(name string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(name + "-uid"), ResourceVersion: "1"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name:    "req-1",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: className, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
		}}}},
	}
}

// allocated returns c allocated device on nodeName, reserved for pods.
func allocated(c *resourceapi.ResourceClaim, nodeName, device string, reservedFor ...*v1.Pod) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Finalizers = []string{resourceapi.Finalizer}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "req-1", Driver: driver, Pool: nodeName, Device: device,
		}}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{nodeName},
		}}}}},
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// podWithClaim references the claim by name (spec.resourceClaims[].resourceClaimName).
func podWithClaim(name string, claims ...string) *v1.Pod {
	p := st.MakePod().Namespace(namespace).Name(name).UID(name + "-uid").Obj()
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

func status(code framework.Code, msg string) *framework.Status {
	return framework.NewStatus(code, msg).WithPlugin(Name)
}

// TestFilter covers PreFilter and Filter with upstream's messages.
func TestFilter(t *testing.T) {
	nodes := []*v1.Node{node("node-1"), node("node-2")}
	deleting := claim("deleting", 1)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{resourceapi.Finalizer}
	other := podWithClaim("other")

	tests := []struct {
		name string
		objs []k8sruntime.Object
		pod  *v1.Pod
		want map[string]*framework.Status
	}{
		{
			name: "pod without claims",
			pod:  podWithClaim("p"),
			want: map[string]*framework.Status{"node-1": nil, "node-2": nil},
		},
		{
			name: "missing claim",
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": status(framework.UnschedulableAndUnresolvable, `could not find ResourceClaim "default/gpu"`),
				"node-2": status(framework.UnschedulableAndUnresolvable, `could not find ResourceClaim "default/gpu"`),
			},
		},
		{
			name: "claim being deleted",
			objs: []k8sruntime.Object{deleting},
			pod:  podWithClaim("p", "deleting"),
			want: map[string]*framework.Status{
				"node-1": status(framework.UnschedulableAndUnresolvable, `resourceclaim "deleting" is being deleted`),
				"node-2": status(framework.UnschedulableAndUnresolvable, `resourceclaim "deleting" is being deleted`),
			},
		},
		{
			name: "missing class",
			objs: []k8sruntime.Object{claim("gpu", 1)},
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": status(framework.UnschedulableAndUnresolvable, "request req-1: device class gpu.example.com does not exist"),
				"node-2": status(framework.UnschedulableAndUnresolvable, "request req-1: device class gpu.example.com does not exist"),
			},
		},
		{
			name: "devices on one node",
			objs: []k8sruntime.Object{class(className), claim("gpu", 2), slice("node-1", "gpu-0", "gpu-1"), slice("node-2", "gpu-0")},
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": nil,
				"node-2": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
			},
		},
		{
			name: "allocated claim pins the node",
			objs: []k8sruntime.Object{class(className), allocated(claim("gpu", 1), "node-2", "gpu-0"), slice("node-2", "gpu-0")},
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": status(framework.UnschedulableAndUnresolvable, "resourceclaim not available on the node"),
				"node-2": nil,
			},
		},
		{
			name: "claim shared with a running pod",
			objs: []k8sruntime.Object{class(className), allocated(claim("gpu", 1), "node-1", "gpu-0", other), slice("node-1", "gpu-0")},
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": nil,
				"node-2": status(framework.UnschedulableAndUnresolvable, "resourceclaim not available on the node"),
			},
		},
		{
			name: "devices taken by other claims",
			objs: []k8sruntime.Object{class(className), claim("gpu", 1), allocated(claim("taken", 1), "node-1", "gpu-0", other), slice("node-1", "gpu-0")},
			pod:  podWithClaim("p", "gpu"),
			want: map[string]*framework.Status{
				"node-1": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
				"node-2": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
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

// TestClaimLifecycle follows a claim from Reserve to PreBind, and a second
// pod competing for the only device, as upstream: the in-flight allocation
// takes the device before PreBind writes it, Unreserve gives it back.
func TestClaimLifecycle(t *testing.T) {
	nodes := []*v1.Node{node("node-1"), node("node-2")}
	e := newEnv(t, nodes, class(className), claim("gpu", 1), claim("gpu-b", 1), slice("node-1", "gpu-0"))
	ctx := t.Context()
	pod, podB := podWithClaim("p", "gpu"), podWithClaim("b", "gpu-b")

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
	if e.manager.ResourceClaims().GetPendingAllocation("gpu-uid") == nil {
		t.Fatal("no in-flight allocation after Reserve")
	}

	// The device is in flight: another claim cannot get it, and a pod
	// sharing the claim waits for the allocation to be written.
	want := map[string]*framework.Status{
		"node-1": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
		"node-2": status(framework.UnschedulableAndUnresolvable, "cannot allocate all claims"),
	}
	if diff := cmp.Diff(want, st.RunCycle(ctx, e.fwk, e.snapshot, podB).Filter); diff != "" {
		t.Errorf("second pod while in flight (-want +got):\n%s", diff)
	}
	sharing := podWithClaim("sharing", "gpu")
	inFlight := status(framework.UnschedulableAndUnresolvable, "resource claim default/gpu is in the process of being allocated")
	if diff := cmp.Diff(map[string]*framework.Status{"node-1": inFlight, "node-2": inFlight}, st.RunCycle(ctx, e.fwk, e.snapshot, sharing).Filter); diff != "" {
		t.Errorf("pod sharing the claim while in flight (-want +got):\n%s", diff)
	}

	// PreBind writes allocation and reservation.
	if s := e.fwk.RunPreBindPreFlights(ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("PreBindPreFlight: %v", s)
	}
	if s := e.fwk.RunPreBindPlugins(ctx, state, pod, "node-1"); !s.IsSuccess() {
		t.Fatalf("PreBind: %v", s)
	}
	written, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if written.Status.Allocation == nil || len(written.Status.Allocation.Devices.Results) != 1 || written.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Errorf("written allocation = %+v, want gpu-0", written.Status.Allocation)
	}
	wantReserved := []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p-uid"}}
	if diff := cmp.Diff(wantReserved, written.Status.ReservedFor); diff != "" {
		t.Errorf("reservedFor (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{resourceapi.Finalizer}, written.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if e.manager.ResourceClaims().GetPendingAllocation("gpu-uid") != nil {
		t.Error("allocation still in flight after PreBind")
	}
	// Seen at once, through the assume cache or the informer.
	if c, err := e.manager.ResourceClaims().Get(namespace, "gpu"); err != nil || c.Status.Allocation == nil {
		t.Errorf("claim after PreBind: %v, %v; want it allocated", c, err)
	}
	if diff := cmp.Diff(want, st.RunCycle(ctx, e.fwk, e.snapshot, podB).Filter); diff != "" {
		t.Errorf("second pod after PreBind (-want +got):\n%s", diff)
	}

	// A pod sharing the written claim goes to its node.
	e.waitForClaim(t, "gpu", func(c *resourceapi.ResourceClaim) bool { return c.Status.Allocation != nil })
	shared := map[string]*framework.Status{"node-1": nil, "node-2": status(framework.UnschedulableAndUnresolvable, "resourceclaim not available on the node")}
	if diff := cmp.Diff(shared, st.RunCycle(ctx, e.fwk, e.snapshot, sharing).Filter); diff != "" {
		t.Errorf("pod sharing the allocated claim (-want +got):\n%s", diff)
	}

	// Unreserve after PreBind (binding failed) removes the pod from reservedFor.
	e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "node-1")
	unreserved, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(unreserved.Status.ReservedFor) != 0 || unreserved.Status.Allocation == nil {
		t.Errorf("after Unreserve: reservedFor %v, allocation %v; want no reservation, allocation kept", unreserved.Status.ReservedFor, unreserved.Status.Allocation)
	}
}

// TestUnreserveReleasesInFlight: a pod whose binding cycle fails before
// PreBind gives its devices back.
func TestUnreserveReleasesInFlight(t *testing.T) {
	e := newEnv(t, []*v1.Node{node("node-1")}, class(className), claim("gpu", 1), claim("gpu-b", 1), slice("node-1", "gpu-0"))
	ctx := t.Context()
	pod, podB := podWithClaim("p", "gpu"), podWithClaim("b", "gpu-b")
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
	e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "node-1")
	if e.manager.ResourceClaims().GetPendingAllocation("gpu-uid") != nil {
		t.Error("allocation still in flight after Unreserve")
	}
	if got := st.RunCycle(ctx, e.fwk, e.snapshot, podB).Filter; got["node-1"] != nil {
		t.Errorf("second pod after Unreserve: %v, want the device free", got["node-1"])
	}
	if c, _ := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu", metav1.GetOptions{}); c.Status.Allocation != nil {
		t.Errorf("Unreserve before PreBind wrote %v", c.Status.Allocation)
	}
}

// TestPostFilter deallocates a claim allocated on a node the pod cannot
// use when no other pod uses it, as upstream.
func TestPostFilter(t *testing.T) {
	nodes := []*v1.Node{node("node-1")}
	other := podWithClaim("other")
	tests := []struct {
		name            string
		claim           *resourceapi.ResourceClaim
		want            *framework.Status
		wantDeallocated bool
	}{
		{
			name:            "unused claim on a gone node",
			claim:           allocated(claim("gpu", 1), "gone", "gpu-0"),
			want:            status(framework.Unschedulable, "deallocation of ResourceClaim completed"),
			wantDeallocated: true,
		},
		{
			name:  "claim used by another pod",
			claim: allocated(claim("gpu", 1), "gone", "gpu-0", other),
			want:  framework.NewStatus(framework.Unschedulable).WithPlugin(Name),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nodes, class(className), tt.claim)
			ctx := t.Context()
			pod := podWithClaim("p", "gpu")
			state := framework.NewCycleState()
			if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			ni, _ := e.snapshot.NodeInfos().Get("node-1")
			if s := e.fwk.RunFilterPlugins(ctx, state, pod, ni); s.Code() != framework.UnschedulableAndUnresolvable {
				t.Fatalf("Filter: %v", s)
			}
			_, got := e.fwk.RunPostFilterPlugins(ctx, state, pod, framework.NewDefaultNodeToStatus())
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PostFilter (-want +got):\n%s", diff)
			}
			c, err := e.client.ResourceV1().ResourceClaims(namespace).Get(ctx, "gpu", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if deallocated := c.Status.Allocation == nil; deallocated != tt.wantDeallocated {
				t.Errorf("deallocated = %v, want %v", deallocated, tt.wantDeallocated)
			}
		})
	}
}

// TestScore: with firstAvailable, nodes offering an earlier alternative
// score higher (upstream: FirstAvailableDeviceRequestMaxSize minus the
// position, normalized).
func TestScore(t *testing.T) {
	nodes := []*v1.Node{node("node-1"), node("node-2")}
	big := slice("node-1", "big-0")
	big.Spec.Devices[0].Attributes["size"] = resourceapi.DeviceAttribute{StringValue: ptr.To("big")}
	small := slice("node-2", "small-0")
	small.Spec.Devices[0].Attributes["size"] = resourceapi.DeviceAttribute{StringValue: ptr.To("small")}
	c := claim("gpu", 1)
	selector := func(size string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["` + driver + `"].size == "` + size + `"`}}}
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "req-1", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: className, Selectors: selector("big"), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "small", DeviceClassName: className, Selectors: selector("small"), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}}
	e := newEnv(t, nodes, class(className), c, big, small)
	got := st.RunCycle(t.Context(), e.fwk, e.snapshot, podWithClaim("p", "gpu"))
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	// Raw 8 and 7, normalized to 100 and 87, weight 2.
	want := map[string]int64{"node-1": 200, "node-2": 174}
	if diff := cmp.Diff(want, got.Scores); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func TestPreEnqueue(t *testing.T) {
	e := newEnv(t, nil, claim("gpu", 1))
	ctx := t.Context()
	if s := e.fwk.PreEnqueuePlugins()[0].PreEnqueue(ctx, podWithClaim("p", "gpu")); !s.IsSuccess() {
		t.Errorf("existing claim: %v", s)
	}
	// A claim from a template the controller did not create yet.
	pending := st.MakePod().Namespace(namespace).Name("p").ResourceClaim("gpu", "gpu-template").Obj()
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, `pod "default/p": ResourceClaim not created yet`)
	if diff := cmp.Diff(want, e.fwk.PreEnqueuePlugins()[0].PreEnqueue(ctx, pending)); diff != "" {
		t.Errorf("template claim not created (-want +got):\n%s", diff)
	}
}

func TestQueueingHints(t *testing.T) {
	e := newEnv(t, nil, claim("gpu", 1))
	ctx := t.Context()
	pod := podWithClaim("p", "gpu")
	claimEvent := framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Update}
	unrelated := claim("unrelated", 1)
	tests := []struct {
		name     string
		event    framework.ClusterEvent
		old, obj any
		want     framework.QueueingHint
	}{
		{name: "claim created", event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}, obj: claim("gpu", 1), want: framework.Queue},
		{name: "unrelated claim created", event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}, obj: unrelated, want: framework.QueueSkip},
		{name: "status unchanged", event: claimEvent, old: claim("gpu", 1), obj: func() *resourceapi.ResourceClaim { c := claim("gpu", 1); c.Finalizers = []string{"x"}; return c }(), want: framework.QueueSkip},
		{name: "status changed", event: claimEvent, old: claim("gpu", 1), obj: allocated(claim("gpu", 1), "node-1", "gpu-0"), want: framework.Queue},
		{name: "unrelated claim deallocated", event: claimEvent, old: allocated(unrelated, "node-1", "gpu-0"), obj: unrelated, want: framework.Queue},
		{name: "deleted without allocation", event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Delete}, old: unrelated, want: framework.QueueSkip},
		{name: "deleted with allocation", event: framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Delete}, old: allocated(unrelated, "node-1", "gpu-0"), want: framework.Queue},
		{name: "pod got its claims", event: framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodGeneratedResourceClaim}, old: pod, obj: pod, want: framework.Queue},
		{name: "slice added", event: framework.ClusterEvent{Resource: framework.ResourceSlice, ActionType: framework.Add}, obj: slice("node-1"), want: framework.Queue},
		{name: "class added", event: framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Add}, obj: class(className), want: framework.Queue},
		{name: "slice deleted", event: framework.ClusterEvent{Resource: framework.ResourceSlice, ActionType: framework.Delete}, old: slice("node-1"), want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(ctx, e.fwk, Name, tt.event, pod, tt.old, tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidateArgs(t *testing.T) {
	tests := []struct {
		name string
		args configv1.DynamicResourcesArgs
		want string
	}{
		{name: "defaults", args: configv1.DynamicResourcesArgs{FilterTimeout: &metav1.Duration{Duration: 10 * time.Second}, BindingTimeout: &metav1.Duration{Duration: 10 * time.Minute}}},
		{name: "no filter timeout", args: configv1.DynamicResourcesArgs{FilterTimeout: &metav1.Duration{}}},
		{name: "negative filter timeout", args: configv1.DynamicResourcesArgs{FilterTimeout: &metav1.Duration{Duration: -time.Second}}, want: `filterTimeout: Invalid value: "-1s": must be zero or positive`},
		{name: "short binding timeout", args: configv1.DynamicResourcesArgs{BindingTimeout: &metav1.Duration{Duration: time.Millisecond}}, want: `bindingTimeout: Invalid value: "1ms": must be at least 1 second`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateArgs(&tt.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSignPod(t *testing.T) {
	pl := &dynamicResources{}
	if _, s := pl.SignPod(t.Context(), podWithClaim("p")); !s.IsSuccess() {
		t.Errorf("pod without claims: %v", s)
	}
	want := framework.NewStatus(framework.Unschedulable, "pods with dra resource claims are not signable")
	if _, s := pl.SignPod(t.Context(), podWithClaim("p", "gpu")); !cmp.Equal(want, s) {
		t.Errorf("pod with claims: %v, want %v", s, want)
	}
}

// TestTemplateClaimReleasesGatedPod runs a pod whose claim comes from a
// template through the scheduling queue: PreEnqueue keeps it gated until
// the resource claim controller has made the claim and recorded it in the
// pod's status, in whichever order the scheduler hears of the two. The
// queue hears of claims through the manager's claim cache, as the
// scheduler wires it, and its hints read that cache.
func TestTemplateClaimReleasesGatedPod(t *testing.T) {
	for _, claimFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("claim seen first: %v", claimFirst), func(t *testing.T) {
			e := newEnv(t, nil)
			logger, ctx := ktesting.NewTestContext(t)
			q := queue.New()
			q.SetProfile(ctx, e.fwk)
			claimAdd := framework.ClusterEvent{Resource: framework.ResourceClaim, ActionType: framework.Add}
			if _, err := e.manager.ClaimEvents().AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) { q.MoveAllToActiveOrBackoffQueue(logger, claimAdd, nil, obj, nil) },
			}); err != nil {
				t.Fatal(err)
			}
			pending := st.MakePod().Namespace(namespace).Name("p").UID("p-uid").SchedulerName(e.fwk.ProfileName()).ResourceClaim("gpu", "gpu-template").Obj()
			withStatus := pending.DeepCopy()
			withStatus.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu")}}
			generated := claim("p-gpu", 1)
			generated.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p-uid", Controller: ptr.To(true)}}

			q.Add(logger, pending)
			waitFor := func(step string, want queue.Summary) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for q.Summary() != want && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if diff := cmp.Diff(want, q.Summary()); diff != "" {
					t.Fatalf("%s (-want +got):\n%s", step, diff)
				}
			}
			waitFor("pod added", queue.Summary{Gated: 1})
			addClaim := func() {
				if _, err := e.client.ResourceV1().ResourceClaims(namespace).Create(ctx, generated, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				e.waitForClaim(t, generated.Name, func(*resourceapi.ResourceClaim) bool { return true })
			}
			if claimFirst {
				addClaim()
				waitFor("claim made, not yet in the pod's status", queue.Summary{Gated: 1})
				q.Update(logger, pending, withStatus)
			} else {
				q.Update(logger, pending, withStatus)
				waitFor("claim in the pod's status, not yet made", queue.Summary{Gated: 1})
				addClaim()
			}
			waitFor("claim made and in the pod's status", queue.Summary{Active: 1})
		})
	}
}

// TestBindingConditionsMetrics: PreBind waits for the binding conditions
// of an allocated device and counts the allocation and the wait by the
// driver and how the wait ended, as upstream's
// scheduler_dra_bindingconditions_allocations_total and
// scheduler_dra_bindingconditions_wait_duration_seconds.
func TestBindingConditionsMetrics(t *testing.T) {
	const attached, attachFailed = "Attached", "AttachFailed"
	for _, tc := range []struct {
		name string
		// condition is what the driver reports with the allocation.
		condition metav1.Condition
		outcome   string
		wantErr   string
	}{{
		name:      "attached",
		condition: metav1.Condition{Type: attached, Status: metav1.ConditionTrue, Reason: "Attached"},
		outcome:   metrics.BindingConditionsStatusSuccess,
	}, {
		name:      "attach failed",
		condition: metav1.Condition{Type: attachFailed, Status: metav1.ConditionTrue, Reason: "FabricError", Message: "no path"},
		outcome:   metrics.BindingConditionsStatusFailed,
		wantErr:   `device binding failed: claim=gpu, reason=FabricError, message="no path"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := slice("node-1", "gpu-0")
			s.Spec.Devices[0].BindingConditions = []string{attached}
			s.Spec.Devices[0].BindingFailureConditions = []string{attachFailed}
			e := newEnv(t, []*v1.Node{node("node-1")}, class(className), claim("gpu", 1), s)
			// The driver answers the allocation PreBind writes at once.
			e.client.PrependReactor("update", "resourceclaims", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
				c := action.(clienttesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
				if action.GetSubresource() == "status" && c.Status.Allocation != nil {
					cond := tc.condition
					cond.LastTransitionTime = metav1.Now()
					c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: driver, Pool: "node-1", Device: "gpu-0", Conditions: []metav1.Condition{cond}}}
				}
				return false, nil, nil
			})
			ctx := t.Context()
			pod := podWithClaim("p", "gpu")
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
			if got := e.fwk.RunPreBindPlugins(ctx, state, pod, "node-1").AsError(); (got == nil) != (tc.wantErr == "") || (got != nil && !strings.Contains(got.Error(), tc.wantErr)) {
				t.Errorf("PreBind = %v, want error %q", got, tc.wantErr)
			}

			m, profile := e.fwk.Metrics(), e.fwk.ProfileName()
			if got := testutil.ToFloat64(m.DRABindingConditionsAllocations.WithLabelValues(profile, driver, tc.outcome)); got != 1 {
				t.Errorf("scheduler_dra_bindingconditions_allocations_total{status=%q} = %v, want 1", tc.outcome, got)
			}
			if got := testutil.CollectAndCount(m.DRABindingConditionsAllocations); got != 1 {
				t.Errorf("scheduler_dra_bindingconditions_allocations_total has %d series, want 1", got)
			}
			var waited dto.Metric
			if err := m.DRABindingConditionsWaitDuration.WithLabelValues(profile, driver, tc.outcome).(prometheus.Histogram).Write(&waited); err != nil {
				t.Fatal(err)
			}
			if got := waited.GetHistogram().GetSampleCount(); got != 1 {
				t.Errorf("scheduler_dra_bindingconditions_wait_duration_seconds{status=%q} observed %d times, want 1", tc.outcome, got)
			}

			// A retired profile takes its series along.
			m.DeleteProfile(profile)
			if got := testutil.CollectAndCount(m.DRABindingConditionsAllocations) + testutil.CollectAndCount(m.DRABindingConditionsWaitDuration); got != 0 {
				t.Errorf("%d binding-conditions series left after DeleteProfile, want none", got)
			}
		})
	}
}
