// Package upstreamdiff compares profile-scheduler's scheduling framework
// with kube-scheduler 1.37.2's on randomized cluster states: both run their
// default profile over the same objects, and every pod's PreEnqueue,
// PreFilter, Filter, Score, PostFilter and placement must come out the
// same, and for a pod with claims Reserve and DynamicResources' PreBind,
// with what it writes to the claims.
//
// It is a module of its own so that k8s.io/kubernetes, which it imports
// for upstream's framework, never enters the operator's module.
package upstreamdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Label keys and names the generated objects share.
const (
	hostnameKey = "kubernetes.io/hostname"
	zoneKey     = "topology.kubernetes.io/zone"
	regionKey   = "topology.kubernetes.io/region"
	gpuResource = "example.com/gpu"
	csiDriver   = "csi.example.com"

	classImmediate = "standard"
	classWFFC      = "wffc"
	classStatic    = "static"
)

var (
	zones      = []string{"zone-a", "zone-b", "zone-c"}
	apps       = []string{"web", "db", "cache", "batch"}
	namespaces = []string{"default", "team-a", "team-b"}
	images     = []struct {
		name string
		size int64
	}{
		{"registry.local/web:1", 300 << 20},
		{"registry.local/db:1", 900 << 20},
		{"registry.local/cache:1", 60 << 20},
		{"registry.local/batch:1", 2 << 30},
		{"registry.local/tiny:1", 5 << 20},
		// Untagged in pods, ":latest" on nodes: ImageLocality normalizes.
		{"nginx", 150 << 20},
	}
	// Features a 1.37 kubelet may declare, which NodeDeclaredFeatures reads.
	declaredFeatures = []string{"RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport"}
)

// cluster is one generated cluster state: the objects both frameworks read.
type cluster struct {
	nodes   []*v1.Node
	bound   []*v1.Pod
	pending []*v1.Pod
	// objects are the API objects both fake clientsets start with (nodes,
	// pods, namespaces, storage, DRA objects, PodDisruptionBudgets):
	// preemption reads the preemptor and evicts victims through the API.
	objects []k8sruntime.Object
}

// generator draws the objects of one cluster from a seeded source.
type generator struct {
	r     *rand.Rand
	nodes []*v1.Node
	uid   int
	// pvcs are the claims pending pods may use, by namespace.
	pvcs map[string][]string
	// devices are the DRA devices and claims drawn so far.
	devices draState
}

func (g *generator) pick(n int) int { return g.r.IntN(n) }

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func (g *generator) one(s []string) string { return s[g.pick(len(s))] }

func (g *generator) nextUID() types.UID {
	g.uid++
	return types.UID(fmt.Sprintf("uid-%04d", g.uid))
}

// newCluster draws a cluster of numNodes nodes, about numNodes bound pods
// and numPending pending pods from seed.
func newCluster(seed uint64, numNodes, numPending int) *cluster {
	g := &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), pvcs: map[string][]string{}}
	c := &cluster{}
	for _, ns := range namespaces {
		c.objects = append(c.objects, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   ns,
			Labels: map[string]string{"kubernetes.io/metadata.name": ns, "team": ns, "env": g.one([]string{"prod", "dev"})},
		}})
		// Owners the system default spreading constraints select pods by.
		c.objects = append(c.objects,
			&v1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}},
			},
			&appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache", UID: types.UID("rs-" + ns)},
				Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}},
			})
	}
	for i := range numNodes {
		n := g.node(i)
		c.nodes = append(c.nodes, n)
		c.objects = append(c.objects, n)
	}
	g.nodes = c.nodes
	c.objects = append(c.objects, g.storage()...)
	c.objects = append(c.objects, g.dra()...)
	c.objects = append(c.objects, g.draFeatures()...)
	for i := range numNodes {
		p := g.pod(fmt.Sprintf("bound-%03d", i), true)
		if g.chance(0.15) {
			// A GPU in use, through a claim pending pods may share.
			if claim := g.allocatedClaim(p.Namespace, p.Name+"-gpu", p); claim != nil {
				c.objects = append(c.objects, claim)
			}
		}
		c.bound = append(c.bound, p)
		c.objects = append(c.objects, p)
	}
	for i := range numPending {
		p := g.pod(fmt.Sprintf("pending-%03d", i), false)
		if g.chance(0.1) {
			if claim := g.generatedClaim(p); claim != nil {
				c.objects = append(c.objects, claim)
			}
		}
		c.pending = append(c.pending, p)
		c.objects = append(c.objects, p)
	}
	c.objects = append(c.objects, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: int32(g.pick(2))},
	})
	return c
}

func (g *generator) node(i int) *v1.Node {
	name := fmt.Sprintf("node-%02d", i)
	zone := g.one(zones)
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.nextUID(), Labels: map[string]string{
			hostnameKey: name,
			zoneKey:     zone,
			regionKey:   map[string]string{"zone-a": "region-1", "zone-b": "region-1", "zone-c": "region-2"}[zone],
		}},
	}
	if g.chance(0.1) {
		// A node without a zone: spreading and VolumeZone must treat it alike.
		delete(n.Labels, zoneKey)
	}
	if g.chance(0.3) {
		n.Labels["disk"] = g.one([]string{"ssd", "hdd"})
	}
	if g.chance(0.7) {
		n.Labels["cpu-gen"] = g.one([]string{"2", "3", "4", "x"})
	}
	if g.chance(0.1) {
		n.Spec.Unschedulable = true
	}
	taints := []v1.Taint{
		{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule},
		{Key: "spot", Value: "true", Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "maintenance", Effect: v1.TaintEffectNoExecute},
		{Key: "gpu", Value: "true", Effect: v1.TaintEffectNoSchedule},
		{Key: "flaky", Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "team", Value: "", Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
	}
	for _, t := range taints {
		if g.chance(0.12) {
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
	}
	alloc := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse(g.one([]string{"2", "4", "8", "16"})),
		v1.ResourceMemory:           resource.MustParse(g.one([]string{"4Gi", "8Gi", "16Gi", "32Gi"})),
		v1.ResourcePods:             resource.MustParse(g.one([]string{"4", "10", "32", "110"})),
		v1.ResourceEphemeralStorage: resource.MustParse(g.one([]string{"20Gi", "100Gi"})),
	}
	if g.chance(0.3) {
		alloc[gpuResource] = resource.MustParse(g.one([]string{"0", "1", "2", "4"}))
		n.Labels["gpu"] = "true"
	}
	if g.chance(0.2) {
		alloc["hugepages-2Mi"] = resource.MustParse(g.one([]string{"0", "256Mi"}))
	}
	if g.chance(0.1) {
		delete(alloc, v1.ResourceEphemeralStorage)
	}
	n.Status.Allocatable = alloc
	n.Status.Capacity = alloc.DeepCopy()
	for _, img := range images {
		if g.chance(0.4) {
			names := []string{img.name}
			if img.name == "nginx" {
				names = []string{"docker.io/library/nginx:latest", "nginx:latest"}
			}
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: img.size})
		}
	}
	for _, f := range declaredFeatures {
		if g.chance(0.6) {
			n.Status.DeclaredFeatures = append(n.Status.DeclaredFeatures, f)
		}
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	return n
}

// storage returns the storage objects: classes, a CSI driver, CSINodes
// with attach limits, claims bound to zonal volumes, unbound claims of
// each binding mode, and free volumes for the static class.
func (g *generator) storage() []k8sruntime.Object {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	objs := []k8sruntime.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: classImmediate}, Provisioner: csiDriver, VolumeBindingMode: &immediate},
		&storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: classWFFC}, Provisioner: csiDriver, VolumeBindingMode: &wffc,
			AllowedTopologies: []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
				{Key: zoneKey, Values: []string{"zone-a", "zone-b"}},
			}}},
		},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: classStatic}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: csiDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}},
	}
	for _, n := range g.nodes {
		if g.chance(0.2) {
			continue
		}
		d := storagev1.CSINodeDriver{Name: csiDriver, NodeID: n.Name, TopologyKeys: []string{zoneKey}}
		if g.chance(0.6) {
			d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(1 + g.pick(3)))}
		}
		objs = append(objs, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{d}}})
	}
	claim := func(ns, name, class, volume string, mode v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
		pvc := &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: g.nextUID(), ResourceVersion: "1"},
			Spec: v1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(class),
				AccessModes:      []v1.PersistentVolumeAccessMode{mode},
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
				VolumeName:       volume,
			},
			Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
		}
		if volume != "" {
			pvc.Status.Phase = v1.ClaimBound
			pvc.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		}
		g.pvcs[ns] = append(g.pvcs[ns], name)
		return pvc
	}
	volume := func(name, class string, affinity *v1.NodeSelectorRequirement, ref *v1.PersistentVolumeClaim) *v1.PersistentVolume {
		pv := &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
			Spec: v1.PersistentVolumeSpec{
				StorageClassName:              class,
				Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadWriteOncePod},
				PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: name}},
			},
			Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
		}
		if affinity != nil {
			pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{*affinity}}}}}
			if affinity.Key == zoneKey {
				pv.Labels = map[string]string{zoneKey: affinity.Values[0]}
			}
		}
		if ref != nil {
			pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
			pv.Status.Phase = v1.VolumeBound
		}
		return pv
	}
	for i := range 6 {
		ns := g.one(namespaces)
		mode := v1.ReadWriteOnce
		if g.chance(0.3) {
			mode = v1.ReadWriteOncePod
		}
		pvName := fmt.Sprintf("pv-bound-%d", i)
		pvc := claim(ns, fmt.Sprintf("data-%d", i), classWFFC, pvName, mode)
		zone := g.one(zones)
		objs = append(objs, pvc, volume(pvName, classWFFC, &v1.NodeSelectorRequirement{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{zone}}, pvc))
	}
	for i := range 3 {
		ns := g.one(namespaces)
		objs = append(objs, claim(ns, fmt.Sprintf("wffc-%d", i), classWFFC, "", v1.ReadWriteOnce))
		objs = append(objs, claim(ns, fmt.Sprintf("static-%d", i), classStatic, "", v1.ReadWriteOnce))
	}
	objs = append(objs, claim(g.one(namespaces), "immediate-0", classImmediate, "", v1.ReadWriteOnce))
	for _, ns := range namespaces {
		deleting := claim(ns, "deleting", classWFFC, "", v1.ReadWriteOnce)
		deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		deleting.Finalizers = []string{"kubernetes.io/pvc-protection"}
		objs = append(objs, deleting)
	}
	for i := range 4 {
		host := g.nodes[g.pick(len(g.nodes))].Name
		objs = append(objs, volume(fmt.Sprintf("pv-local-%d", i), classStatic, &v1.NodeSelectorRequirement{Key: hostnameKey, Operator: v1.NodeSelectorOpIn, Values: []string{host}}, nil))
	}
	return objs
}

// selector returns a label selector on app, sometimes with an expression.
func (g *generator) selector() *metav1.LabelSelector {
	if g.chance(0.2) {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{g.one(apps), g.one(apps)}},
		}}
	}
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.one(apps)}}
}

func (g *generator) topologyKey() string {
	return g.one([]string{hostnameKey, zoneKey, zoneKey, regionKey})
}

func (g *generator) podAffinityTerm() v1.PodAffinityTerm {
	t := v1.PodAffinityTerm{LabelSelector: g.selector(), TopologyKey: g.topologyKey()}
	switch g.pick(4) {
	case 0:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	case 1:
		t.NamespaceSelector = &metav1.LabelSelector{}
	case 2:
		t.Namespaces = []string{g.one(namespaces)}
	}
	return t
}

// pod draws a pod; a bound pod is given a node and is only sometimes
// given the constraints that matter to the pods scheduled after it.
func (g *generator) pod(name string, bound bool) *v1.Pod {
	app := g.one(apps)
	ns := g.one(namespaces)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: g.nextUID(), Labels: map[string]string{"app": app}},
		Spec: v1.PodSpec{
			SchedulerName: "default-scheduler",
			Priority:      ptr.To(int32(g.pick(4) * 100)),
			Containers:    []v1.Container{{Name: "c", Image: g.oneImage()}},
		},
	}
	if g.chance(0.5) {
		p.Labels["tier"] = g.one([]string{"front", "back"})
	}
	if app == "cache" && g.chance(0.7) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cache", UID: types.UID("rs-" + ns), Controller: ptr.To(true)}}
	}
	c := &p.Spec.Containers[0]
	if g.chance(0.85) {
		c.Resources.Requests = v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse(g.one([]string{"100m", "250m", "500m", "1", "2", "3"})),
			v1.ResourceMemory: resource.MustParse(g.one([]string{"128Mi", "512Mi", "1Gi", "2Gi", "6Gi"})),
		}
		if g.chance(0.1) {
			c.Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse(g.one([]string{"1Gi", "30Gi"}))
		}
		if g.chance(0.05) {
			c.Resources.Requests["hugepages-2Mi"] = resource.MustParse("128Mi")
			c.Resources.Limits = v1.ResourceList{"hugepages-2Mi": resource.MustParse("128Mi")}
		}
		if g.chance(0.15) {
			// Zero requests of an extended resource must not need the
			// resource. A device plugin's on nodes that have it as
			// allocatable, backed by DRA elsewhere where gpu-extended
			// exists.
			c.Resources.Requests[gpuResource] = resource.MustParse(g.one([]string{"0", "1", "2", "3"}))
			c.Resources.Limits = v1.ResourceList{gpuResource: c.Resources.Requests[gpuResource]}
		}
		if g.chance(0.05) {
			// The implicit extended resource name of a DeviceClass.
			implicit := v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + g.one([]string{classH100, "no-such-class"}))
			c.Resources.Requests[implicit] = resource.MustParse("1")
			if c.Resources.Limits == nil {
				c.Resources.Limits = v1.ResourceList{}
			}
			c.Resources.Limits[implicit] = resource.MustParse("1")
		}
	}
	if g.chance(0.1) {
		c.Ports = []v1.ContainerPort{{
			ContainerPort: 8080,
			HostPort:      []int32{80, 443, 8080}[g.pick(3)],
			HostIP:        g.one([]string{"", "", "0.0.0.0", "10.0.0.1", "127.0.0.1"}),
			Protocol:      []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP}[g.pick(3)],
		}}
	}
	if g.chance(0.1) {
		// A second container: requests add up, the same image counts once.
		second := p.Spec.Containers[0].DeepCopy()
		second.Name = "second"
		p.Spec.Containers = append(p.Spec.Containers, *second)
		c = &p.Spec.Containers[0]
	}
	if g.chance(0.1) {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "registry.local/tiny:1", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
		}}}
		if g.chance(0.5) {
			// A sidecar: its requests add to the containers'.
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("1Gi")
		}
		if g.chance(0.3) {
			// Devices an init container uses before (or, as a sidecar,
			// beside) the containers.
			p.Spec.InitContainers[0].Resources.Requests[gpuResource] = resource.MustParse(g.one([]string{"1", "2"}))
			p.Spec.InitContainers[0].Resources.Limits = v1.ResourceList{gpuResource: p.Spec.InitContainers[0].Resources.Requests[gpuResource]}
		}
	}
	if g.chance(0.05) {
		p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("120Mi")}
	}
	if g.chance(0.05) {
		// Pod-level resources (PodLevelResources, on by default).
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse(g.one([]string{"1", "4"})),
			v1.ResourceMemory: resource.MustParse(g.one([]string{"1Gi", "8Gi"})),
		}}
	}
	if g.chance(0.03) {
		p.Spec.HostNetwork = true
		p.Spec.HostUsers = ptr.To(false)
	}
	if g.chance(0.3) {
		g.tolerations(p)
	}
	if bound {
		p.Spec.NodeName = g.nodes[g.pick(len(g.nodes))].Name
		p.Status.Phase = v1.PodRunning
		if g.chance(0.05) {
			// Terminating. Preemption would evict it without an API call,
			// which the harness could not see, so no pending pod outranks it.
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			p.Finalizers = []string{"example.com/hold"}
			p.Spec.Priority = ptr.To(int32(1000))
		}
		if g.chance(0.15) {
			g.podAffinity(p)
		}
		if g.chance(0.1) {
			g.spread(p)
		}
		if g.chance(0.1) {
			g.volumes(p)
		}
		return p
	}
	if g.chance(0.25) {
		g.nodeAffinity(p)
	}
	if g.chance(0.3) {
		g.podAffinity(p)
	}
	if g.chance(0.3) {
		g.spread(p)
	}
	if g.chance(0.2) {
		g.volumes(p)
	}
	if g.chance(0.3) {
		g.podClaims(p)
	}
	if g.chance(0.05) {
		// spec.nodeName on a pending pod: NodeName's PreFilter narrows the search.
		p.Spec.NodeName = g.nodes[g.pick(len(g.nodes))].Name
		if g.chance(0.3) {
			p.Spec.NodeName = "no-such-node"
		}
	}
	if g.chance(0.05) {
		never := v1.ContainerRestartPolicyNever
		c.RestartPolicy = &never
		c.RestartPolicyRules = []v1.ContainerRestartRule{{
			Action:    v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
	}
	if g.chance(0.1) {
		p.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
	}
	return p
}

func (g *generator) oneImage() string {
	if g.chance(0.1) {
		return "registry.local/absent:1"
	}
	return images[g.pick(len(images))].name
}

func (g *generator) tolerations(p *v1.Pod) {
	all := []v1.Toleration{
		{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "infra", Effect: v1.TaintEffectNoSchedule},
		{Key: "spot", Operator: v1.TolerationOpExists},
		{Key: "maintenance", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: "gpu", Operator: v1.TolerationOpEqual, Value: "true"},
		{Operator: v1.TolerationOpExists},
		{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: "maintenance", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(30))},
		{Key: "flaky", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "team", Operator: v1.TolerationOpEqual, Value: ""},
	}
	for _, t := range all {
		if g.chance(0.3) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, t)
		}
	}
}

func (g *generator) nodeAffinity(p *v1.Pod) {
	if g.chance(0.3) {
		p.Spec.NodeSelector = map[string]string{zoneKey: g.one(zones)}
	}
	aff := &v1.NodeAffinity{}
	if g.chance(0.6) {
		var terms []v1.NodeSelectorTerm
		for range 1 + g.pick(2) {
			var t v1.NodeSelectorTerm
			switch g.pick(6) {
			case 5:
				// An empty term matches no node.
			case 0:
				t.MatchExpressions = []v1.NodeSelectorRequirement{{Key: zoneKey, Operator: v1.NodeSelectorOpIn, Values: []string{g.one(zones), g.one(zones)}}}
			case 1:
				t.MatchExpressions = []v1.NodeSelectorRequirement{{Key: "disk", Operator: v1.NodeSelectorOpExists}}
			case 2:
				t.MatchExpressions = []v1.NodeSelectorRequirement{{Key: "gpu", Operator: v1.NodeSelectorOpDoesNotExist}}
				if g.chance(0.5) {
					op := g.one([]string{string(v1.NodeSelectorOpGt), string(v1.NodeSelectorOpLt)})
					t.MatchExpressions = []v1.NodeSelectorRequirement{{Key: "cpu-gen", Operator: v1.NodeSelectorOperator(op), Values: []string{"3"}}}
				}
			case 3:
				t.MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{g.nodes[g.pick(len(g.nodes))].Name, g.nodes[g.pick(len(g.nodes))].Name}}}
			default:
				t.MatchFields = []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpNotIn, Values: []string{g.nodes[g.pick(len(g.nodes))].Name}}}
				t.MatchExpressions = []v1.NodeSelectorRequirement{{Key: regionKey, Operator: v1.NodeSelectorOpIn, Values: []string{"region-1"}}}
			}
			terms = append(terms, t)
		}
		aff.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{NodeSelectorTerms: terms}
	}
	if g.chance(0.6) {
		aff.PreferredDuringSchedulingIgnoredDuringExecution = []v1.PreferredSchedulingTerm{
			{Weight: int32(1 + g.pick(100)), Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "disk", Operator: v1.NodeSelectorOpIn, Values: []string{"ssd"}}}}},
			{Weight: int32(1 + g.pick(100)), Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: zoneKey, Operator: v1.NodeSelectorOpNotIn, Values: []string{g.one(zones)}}}}},
		}
	}
	p.Spec.Affinity = &v1.Affinity{NodeAffinity: aff}
}

func (g *generator) podAffinity(p *v1.Pod) {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	switch g.pick(4) {
	case 0:
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{g.podAffinityTerm()}}
	case 1:
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{g.podAffinityTerm()}}
	case 2:
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: int32(1 + g.pick(100)), PodAffinityTerm: g.podAffinityTerm()},
		}}
	default:
		p.Spec.Affinity.PodAntiAffinity = &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: int32(1 + g.pick(100)), PodAffinityTerm: g.podAffinityTerm()},
			{Weight: int32(1 + g.pick(100)), PodAffinityTerm: g.podAffinityTerm()},
		}}
	}
}

func (g *generator) spread(p *v1.Pod) {
	for range 1 + g.pick(2) {
		c := v1.TopologySpreadConstraint{
			MaxSkew:           int32(1 + g.pick(2)),
			TopologyKey:       g.topologyKey(),
			WhenUnsatisfiable: v1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}},
		}
		if g.chance(0.4) {
			c.WhenUnsatisfiable = v1.ScheduleAnyway
		}
		if g.chance(0.2) {
			c.MinDomains = ptr.To(int32(2 + g.pick(3)))
			c.WhenUnsatisfiable = v1.DoNotSchedule
		}
		if g.chance(0.2) {
			c.NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
		}
		if g.chance(0.2) {
			c.NodeAffinityPolicy = ptr.To(v1.NodeInclusionPolicyIgnore)
		}
		if g.chance(0.2) && p.Labels["tier"] != "" {
			c.MatchLabelKeys = []string{"tier"}
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func (g *generator) volumes(p *v1.Pod) {
	claims := append(slices.Clone(g.pvcs[p.Namespace]), "missing", "deleting")
	for i := range 1 + g.pick(2) {
		name := fmt.Sprintf("vol-%d", i)
		var src v1.VolumeSource
		switch g.pick(8) {
		case 0:
			src.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: g.one([]string{"pd-1", "pd-2"}), ReadOnly: g.chance(0.5)}
		case 1:
			src.AWSElasticBlockStore = &v1.AWSElasticBlockStoreVolumeSource{VolumeID: g.one([]string{"vol-1", "vol-2"})}
		case 2:
			// A generic ephemeral volume whose claim the controller has not made.
			src.Ephemeral = &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{Spec: v1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(classWFFC),
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
			}}}
		default:
			src.PersistentVolumeClaim = &v1.PersistentVolumeClaimVolumeSource{ClaimName: g.one(claims)}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: src})
	}
}
