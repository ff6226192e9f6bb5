package scheduler

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Field sets shaped like what a Deployment's pod and a kubelet-managed
// node carry in a real cluster: one entry per manager, each listing the
// fields it set.
const (
	podSpecFields = `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},` +
		`"f:ownerReferences":{".":{},"k:{\"uid\":\"6a1c2f0e-7d6b-4c55-9a43-2f1b8b9d0c11\"}":{}}},` +
		`"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},` +
		`"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},` +
		`"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},` +
		`"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},` +
		`"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`
	podStatusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},` +
		`"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},` +
		`"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},` +
		`"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.1.17\"}":{".":{},` +
		`"f:ip":{}}},"f:startTime":{}}}`
	nodeFields = `{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},` +
		`"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},` +
		`"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{},` +
		`"f:topology.kubernetes.io/zone":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.1.0/24\"":{}},` +
		`"f:providerID":{}}}`
	nodeStatusFields = `{"f:status":{"f:allocatable":{"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{},"f:pods":{}},` +
		`"f:capacity":{"f:cpu":{},"f:ephemeral-storage":{},"f:memory":{},"f:pods":{}},"f:conditions":{` +
		`"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},` +
		`"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},` +
		`"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}},` +
		`"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},` +
		`"f:daemonEndpoints":{"f:kubeletEndpoint":{"f:Port":{}}},"f:images":{},"f:nodeInfo":{"f:architecture":{},` +
		`"f:bootID":{},"f:containerRuntimeVersion":{},"f:kernelVersion":{},"f:kubeProxyVersion":{},"f:kubeletVersion":{},` +
		`"f:machineID":{},"f:operatingSystem":{},"f:osImage":{},"f:systemUUID":{}}}}`
)

func managedFields(entries ...[2]string) []metav1.ManagedFieldsEntry {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, metav1.ManagedFieldsEntry{
			Manager: e[0], Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(e[1]),
		})
	}
	return out
}

func podWithManagedFields(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("app-7d9c8b6f5d-%05d", i), Namespace: "default", UID: types.UID(fmt.Sprint("pod-", i)),
			Labels: map[string]string{"app": "app", "pod-template-hash": "7d9c8b6f5d"},
			ManagedFields: managedFields(
				[2]string{"kube-controller-manager", podSpecFields},
				[2]string{"kubelet", podStatusFields},
			),
		},
		Spec: v1.PodSpec{
			NodeName: fmt.Sprintf("node-%d", i%100),
			Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1.0",
				Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}}}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func nodeWithManagedFields(i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("node-%d", i), UID: types.UID(fmt.Sprint("node-", i)),
			Labels: map[string]string{v1.LabelHostname: fmt.Sprintf("node-%d", i), v1.LabelTopologyZone: "zone-a"},
			ManagedFields: managedFields(
				[2]string{"kubelet", nodeFields},
				[2]string{"kube-controller-manager", `{"f:metadata":{"f:annotations":{"f:node.alpha.kubernetes.io/ttl":{}}}}`},
				[2]string{"kubelet", nodeStatusFields},
			),
		},
	}
}

// TestInformersDropManagedFields checks that pods and nodes enter the
// informer caches without managedFields, both with the factory New makes
// and with one passed in (pods only: the pod informer is the loop's own).
func TestInformersDropManagedFields(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared factory %v", shared), func(t *testing.T) {
			client := fake.NewClientset(podWithManagedFields(0), nodeWithManagedFields(0))
			var opts []Option
			if shared {
				opts = append(opts, WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
			}
			s, err := New(klog.NewContext(t.Context(), klog.Background()), client, runtime.Registry{}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer func() {
				cancel()
				s.informerFactory.Shutdown()
			}()
			s.informerFactory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), s.podInformer.HasSynced, s.nodeInformer.HasSynced) {
				t.Fatal("informers did not sync")
			}
			pods := s.podInformer.GetStore().List()
			if len(pods) != 1 {
				t.Fatalf("pod cache holds %d objects, want 1", len(pods))
			}
			if mf := pods[0].(*v1.Pod).ManagedFields; mf != nil {
				t.Errorf("cached pod has managedFields %v", mf)
			}
			if shared {
				return
			}
			nodes := s.nodeInformer.GetStore().List()
			if len(nodes) != 1 {
				t.Fatalf("node cache holds %d objects, want 1", len(nodes))
			}
			if mf := nodes[0].(*v1.Node).ManagedFields; mf != nil {
				t.Errorf("cached node has managedFields %v", mf)
			}
		})
	}
}

// BenchmarkInformerCacheHeap reports the heap that the pod and node
// informers hold per cached object, for objects carrying realistic
// managedFields: "kept" is a plain informer factory, "dropped" the one
// New makes (without the loop's handlers, whose own cache is not measured).
func BenchmarkInformerCacheHeap(b *testing.B) {
	const numPods, numNodes = 2000, 200
	objs := make([]k8sruntime.Object, 0, numPods+numNodes)
	for i := range numPods {
		objs = append(objs, podWithManagedFields(i))
	}
	for i := range numNodes {
		objs = append(objs, nodeWithManagedFields(i))
	}
	factories := []struct {
		name string
		new  func(clientset.Interface) informers.SharedInformerFactory
	}{
		{"managedFields-kept", func(c clientset.Interface) informers.SharedInformerFactory {
			return informers.NewSharedInformerFactory(c, 0)
		}},
		{"managedFields-dropped", newInformerFactory},
	}
	for _, tc := range factories {
		b.Run(tc.name, func(b *testing.B) {
			client := fake.NewClientset(objs...)
			var perPod, perNode float64
			for b.Loop() {
				f := tc.new(client)
				perPod = heapPerObject(b, f.Core().V1().Pods().Informer(), numPods)
				perNode = heapPerObject(b, f.Core().V1().Nodes().Informer(), numNodes)
			}
			b.ReportMetric(perPod, "B/pod")
			b.ReportMetric(perNode, "B/node")
		})
	}
}

// heapPerObject runs informer (alone: the factory would start all it made)
// and returns the heap it took to list want objects into its cache, per
// object.
func heapPerObject(b *testing.B, informer cache.SharedIndexInformer, want int) float64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		informer.RunWithContext(ctx)
	}()
	// The next measurement must not see this informer's goroutines let go
	// of what they hold.
	defer func() {
		cancel()
		<-stopped
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("informer did not sync")
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	if n := len(informer.GetStore().ListKeys()); n != want {
		b.Fatalf("cache holds %d objects, want %d", n, want)
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(want)
}
