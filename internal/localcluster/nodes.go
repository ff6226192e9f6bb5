package localcluster

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/dranodeallocatableresources"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/extendwebsocketstokubelet"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/usernamespaceshostnetwork"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/volumebindmountoptions"
	"k8s.io/component-helpers/nodedeclaredfeatures/types"
)

// Well-known node labels the simulated nodes carry, as a kubelet and a
// cloud provider would set them.
const (
	LabelZone         = "topology.kubernetes.io/zone"
	LabelRegion       = "topology.kubernetes.io/region"
	LabelInstanceType = "node.kubernetes.io/instance-type"
)

// Region is the region of every simulated node.
const Region = "local"

// Zones are the zones simulated nodes are spread over, round-robin.
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// NodeShape is the size of a simulated node.
type NodeShape struct {
	// InstanceType is the node.kubernetes.io/instance-type label.
	InstanceType string
	CPU, Memory  string
	Pods         int
}

// Standard is the shape of the local run's nodes.
var Standard = NodeShape{InstanceType: "standard-4", CPU: "4", Memory: "16Gi", Pods: 110}

// KubeletDeclaredFeatures returns the node features a kubelet of
// KubernetesVersion declares in status.declaredFeatures with its default
// feature gates, on a container runtime that neither runs host-network pods
// in user namespaces nor supports bind mount options, discovered as that
// kubelet discovers them: with the nodedeclaredfeatures library over the
// features of its release (ndf.DefaultFramework, v0.37.2 as in 1.37.2).
func KubeletDeclaredFeatures() []string {
	return ndf.DefaultFramework.DiscoverNodeFeatures(&ndf.NodeConfiguration{
		// The gates these features follow, at their 1.37 defaults.
		FeatureGates: types.FeatureGateMap{
			restartallcontainers.RestartAllContainersOnContainerExits:             true,  // beta
			inplacepodresize.IPPRPodLevelResourcesFeatureGate:                     true,  // beta
			extendwebsocketstokubelet.ExtendWebSocketsToKubeletFeatureGate:        true,  // beta
			inplacepodresize.IPPRInitContainersFeatureGate:                        true,  // GA
			inplacepodresize.IPPRMemoryBackedVolumesFeatureGate:                   false, // alpha
			usernamespaceshostnetwork.UserNamespacesHostNetworkSupportFeatureGate: false, // alpha
			dranodeallocatableresources.DRANodeAllocatableResourcesFeature:        false, // alpha
			volumebindmountoptions.VolumeBindMountOptionsFeatureGate:              false, // alpha
			draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate:        false, // alpha
		},
		Version: version.MustParse(KubernetesVersion),
	})
}

// Node is a simulated node named name in zone, as a kubelet (or KWOK)
// would report it: capacity equal to allocatable, Ready, with the usual
// hostname, os, arch, zone, region and instance-type labels, declaring the
// features of KubeletDeclaredFeatures.
func Node(name, zone string, shape NodeShape) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(shape.CPU),
		corev1.ResourceMemory: resource.MustParse(shape.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(shape.Pods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname:   name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
			LabelZone:              zone,
			LabelRegion:            Region,
			LabelInstanceType:      shape.InstanceType,
			"type":                 "simulated",
		}},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated node", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:  "v" + KubernetesVersion,
				OperatingSystem: "linux",
				Architecture:    "amd64",
			},
			DeclaredFeatures: KubeletDeclaredFeatures(),
		},
	}
}

// Nodes returns count simulated nodes of shape named prefix-0, prefix-1, …
// spread round-robin over Zones.
func Nodes(prefix string, count int, shape NodeShape) []*corev1.Node {
	nodes := make([]*corev1.Node, 0, count)
	for i := range count {
		nodes = append(nodes, Node(fmt.Sprintf("%s-%d", prefix, i), Zones[i%len(Zones)], shape))
	}
	return nodes
}

// CreateNode creates n and then writes its status, which a create ignores.
// The API server taints every new node node.kubernetes.io/not-ready
// (admission plugin TaintNodesByCondition) and, with no node lifecycle
// controller running, nothing would lift it: CreateNode lifts it as that
// controller does once the node reports Ready.
func CreateNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Status = n.Status
	updated, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	updated.Spec.Taints = n.Spec.Taints
	_, err = cs.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// CreateNodes creates nodes with CreateNode from workers goroutines.
func CreateNodes(ctx context.Context, cs kubernetes.Interface, nodes []*corev1.Node, workers int) error {
	return Parallel(ctx, len(nodes), workers, func(ctx context.Context, i int) error {
		if err := CreateNode(ctx, cs, nodes[i]); err != nil {
			return fmt.Errorf("creating node %s: %w", nodes[i].Name, err)
		}
		return nil
	})
}

// Parallel runs fn for 0..n-1 on workers goroutines and returns the first
// error; after an error the remaining items are skipped.
func Parallel(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	items := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range items {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case items <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(items)
	wg.Wait()
	return context.Cause(ctx)
}
