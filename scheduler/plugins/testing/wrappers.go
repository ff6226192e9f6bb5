// Package testing holds what plugin tests share: fluent builders for pods
// and nodes, an in-memory snapshot, a fake client with informers that
// already hold a test's objects, and helpers that build a framework
// instance with the real runtime (NewFramework, BuildFramework for
// refusals) and run one scheduling cycle through it, so that plugin tests
// exercise the same code paths as the scheduler. Import it as st.
package testing

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ResourceList turns {"cpu": "1", "memory": "1Gi"} into a v1.ResourceList.
// It panics on a malformed quantity, which is a bug in the test.
func ResourceList(m map[v1.ResourceName]string) v1.ResourceList {
	if m == nil {
		return nil
	}
	rl := make(v1.ResourceList, len(m))
	for name, q := range m {
		rl[name] = resource.MustParse(q)
	}
	return rl
}

// PodWrapper builds a v1.Pod fluently: st.MakePod().Name("p").Req(...).Obj().
type PodWrapper struct{ v1.Pod }

// MakePod returns a pod in namespace "default" with no containers.
func MakePod() *PodWrapper {
	return &PodWrapper{v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns the built pod.
func (p *PodWrapper) Obj() *v1.Pod { return &p.Pod }

// Name sets the name, and the UID to the name unless a UID was set.
func (p *PodWrapper) Name(s string) *PodWrapper {
	p.SetName(s)
	if p.Pod.UID == "" {
		p.SetUID(types.UID(s))
	}
	return p
}

// Namespace sets the namespace.
func (p *PodWrapper) Namespace(s string) *PodWrapper { p.SetNamespace(s); return p }

// UID sets the UID.
func (p *PodWrapper) UID(s string) *PodWrapper { p.SetUID(types.UID(s)); return p }

// Label sets a label.
func (p *PodWrapper) Label(k, v string) *PodWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}

// CreationTimestamp sets the creation time.
func (p *PodWrapper) CreationTimestamp(t metav1.Time) *PodWrapper {
	p.ObjectMeta.CreationTimestamp = t
	return p
}

// Condition adds a status condition.
func (p *PodWrapper) Condition(t v1.PodConditionType, status v1.ConditionStatus, reason string) *PodWrapper {
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: t, Status: status, Reason: reason})
	return p
}

// Priority sets spec.priority.
func (p *PodWrapper) Priority(v int32) *PodWrapper { p.Spec.Priority = &v; return p }

// Node sets spec.nodeName.
func (p *PodWrapper) Node(s string) *PodWrapper { p.Spec.NodeName = s; return p }

// NominatedNodeName sets status.nominatedNodeName.
func (p *PodWrapper) NominatedNodeName(s string) *PodWrapper {
	p.Status.NominatedNodeName = s
	return p
}

// SchedulerName sets spec.schedulerName.
func (p *PodWrapper) SchedulerName(s string) *PodWrapper { p.Spec.SchedulerName = s; return p }

// SchedulingGates adds scheduling gates.
func (p *PodWrapper) SchedulingGates(gates ...string) *PodWrapper {
	for _, g := range gates {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
	}
	return p
}

// Container adds a container running image.
func (p *PodWrapper) Container(image string) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: containerName("c", len(p.Spec.Containers)), Image: image})
	return p
}

// RestartAllContainersOn adds a container that restarts every container
// of the pod when it exits with one of codes, which needs a node declaring
// RestartAllContainersOnContainerExits.
func (p *PodWrapper) RestartAllContainersOn(codes ...int32) *PodWrapper {
	never := v1.ContainerRestartPolicyNever
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{
		Name:          containerName("c", len(p.Spec.Containers)),
		RestartPolicy: &never,
		RestartPolicyRules: []v1.ContainerRestartRule{{
			Action:    v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes},
		}},
	})
	return p
}

// HostNetwork sets spec.hostNetwork.
func (p *PodWrapper) HostNetwork(b bool) *PodWrapper { p.Spec.HostNetwork = b; return p }

// HostUsers sets spec.hostUsers; false runs the pod in a user namespace.
func (p *PodWrapper) HostUsers(b bool) *PodWrapper { p.Spec.HostUsers = &b; return p }

// InitContainer adds an init container running image.
func (p *PodWrapper) InitContainer(image string) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: containerName("init", len(p.Spec.InitContainers)), Image: image})
	return p
}

// Req adds a container requesting the given resources.
func (p *PodWrapper) Req(m map[v1.ResourceName]string) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{
		Name:      containerName("c", len(p.Spec.Containers)),
		Image:     "registry.k8s.io/pause:3.10",
		Resources: v1.ResourceRequirements{Requests: ResourceList(m)},
	})
	return p
}

// InitReq adds an init container requesting the given resources.
func (p *PodWrapper) InitReq(m map[v1.ResourceName]string) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
		Name:      containerName("init", len(p.Spec.InitContainers)),
		Image:     "registry.k8s.io/pause:3.10",
		Resources: v1.ResourceRequirements{Requests: ResourceList(m)},
	})
	return p
}

// SidecarReq adds a restartable init container (a sidecar) requesting the given resources.
func (p *PodWrapper) SidecarReq(m map[v1.ResourceName]string) *PodWrapper {
	p.InitReq(m)
	p.Spec.InitContainers[len(p.Spec.InitContainers)-1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return p
}

// Overhead sets spec.overhead.
func (p *PodWrapper) Overhead(m map[v1.ResourceName]string) *PodWrapper {
	p.Spec.Overhead = ResourceList(m)
	return p
}

// PodLevelReq sets pod-level requests (spec.resources.requests).
func (p *PodWrapper) PodLevelReq(m map[v1.ResourceName]string) *PodWrapper {
	if p.Spec.Resources == nil {
		p.Spec.Resources = &v1.ResourceRequirements{}
	}
	p.Spec.Resources.Requests = ResourceList(m)
	return p
}

// HostPort adds a container exposing containerPort on hostIP:hostPort.
// An empty protocol means TCP, as the API server defaults it.
func (p *PodWrapper) HostPort(hostIP string, protocol v1.Protocol, hostPort int32) *PodWrapper {
	if protocol == "" {
		protocol = v1.ProtocolTCP
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{
		Name:  containerName("c", len(p.Spec.Containers)),
		Image: "registry.k8s.io/pause:3.10",
		Ports: []v1.ContainerPort{{HostIP: hostIP, HostPort: hostPort, ContainerPort: hostPort, Protocol: protocol}},
	})
	return p
}

// SidecarHostPort adds a sidecar init container exposing hostPort.
func (p *PodWrapper) SidecarHostPort(hostIP string, protocol v1.Protocol, hostPort int32) *PodWrapper {
	if protocol == "" {
		protocol = v1.ProtocolTCP
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
		Name:          containerName("init", len(p.Spec.InitContainers)),
		Image:         "registry.k8s.io/pause:3.10",
		RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
		Ports:         []v1.ContainerPort{{HostIP: hostIP, HostPort: hostPort, ContainerPort: hostPort, Protocol: protocol}},
	})
	return p
}

// NodeSelector sets spec.nodeSelector.
func (p *PodWrapper) NodeSelector(m map[string]string) *PodWrapper {
	p.Spec.NodeSelector = m
	return p
}

func (p *PodWrapper) nodeAffinity() *v1.NodeAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	return p.Spec.Affinity.NodeAffinity
}

// RequiredNodeAffinity adds a required node selector term (terms are ORed).
func (p *PodWrapper) RequiredNodeAffinity(term v1.NodeSelectorTerm) *PodWrapper {
	na := p.nodeAffinity()
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
	}
	ns := na.RequiredDuringSchedulingIgnoredDuringExecution
	ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
	return p
}

// NodeAffinityIn adds a required term "key in values".
func (p *PodWrapper) NodeAffinityIn(key string, values ...string) *PodWrapper {
	return p.RequiredNodeAffinity(LabelTerm(key, v1.NodeSelectorOpIn, values...))
}

// NodeAffinityNotIn adds a required term "key notin values".
func (p *PodWrapper) NodeAffinityNotIn(key string, values ...string) *PodWrapper {
	return p.RequiredNodeAffinity(LabelTerm(key, v1.NodeSelectorOpNotIn, values...))
}

// PreferredNodeAffinity adds a preferred node affinity term.
func (p *PodWrapper) PreferredNodeAffinity(weight int32, term v1.NodeSelectorTerm) *PodWrapper {
	na := p.nodeAffinity()
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
		v1.PreferredSchedulingTerm{Weight: weight, Preference: term})
	return p
}

// LabelTerm is a node selector term with one label requirement.
func LabelTerm(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// NameTerm is a node selector term matching the node named name (the API
// allows exactly one value for a metadata.name requirement).
func NameTerm(name string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{name}}}}
}

// Toleration adds a toleration.
func (p *PodWrapper) Toleration(key string, op v1.TolerationOperator, value string, effect v1.TaintEffect) *PodWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	return p
}

// Volume adds a volume.
func (p *PodWrapper) Volume(v v1.Volume) *PodWrapper {
	p.Spec.Volumes = append(p.Spec.Volumes, v)
	return p
}

// PVC adds a volume using the persistent volume claim claimName.
func (p *PodWrapper) PVC(claimName string) *PodWrapper {
	return p.Volume(v1.Volume{Name: claimName, VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
	}})
}

// EphemeralVolume adds a generic ephemeral volume.
func (p *PodWrapper) EphemeralVolume(name string) *PodWrapper {
	return p.Volume(v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{}},
	}})
}

// ImageVolume adds an image volume of reference.
func (p *PodWrapper) ImageVolume(name, reference string) *PodWrapper {
	return p.Volume(v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: reference},
	}})
}

// ResourceClaim adds a pod resource claim using the ResourceClaimTemplate template.
func (p *PodWrapper) ResourceClaim(name, template string) *PodWrapper {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &template})
	return p
}

func (p *PodWrapper) affinity() *v1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	return p.Spec.Affinity
}

// PodAffinityTerm is a term selecting pods with label key=value in the pod's namespace.
func PodAffinityTerm(key, value, topologyKey string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		TopologyKey:   topologyKey,
	}
}

// PodAffinity adds a required pod affinity term.
func (p *PodWrapper) PodAffinity(term v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &v1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	return p
}

// PreferredPodAffinity adds a preferred pod affinity term.
func (p *PodWrapper) PreferredPodAffinity(weight int32, term v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &v1.PodAffinity{}
	}
	a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: term})
	return p
}

// PodAntiAffinity adds a required pod anti-affinity term.
func (p *PodWrapper) PodAntiAffinity(term v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	return p
}

// PreferredPodAntiAffinity adds a preferred pod anti-affinity term.
func (p *PodWrapper) PreferredPodAntiAffinity(weight int32, term v1.PodAffinityTerm) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &v1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		v1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: term})
	return p
}

// SpreadConstraint adds a topology spread constraint over pods with label key=value.
func (p *PodWrapper) SpreadConstraint(maxSkew int32, topologyKey string, when v1.UnsatisfiableConstraintAction, key, value string) *PodWrapper {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, v1.TopologySpreadConstraint{
		MaxSkew:           maxSkew,
		TopologyKey:       topologyKey,
		WhenUnsatisfiable: when,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
	})
	return p
}

func containerName(prefix string, i int) string {
	return prefix + strconv.Itoa(i)
}

// NodeWrapper builds a v1.Node fluently: st.MakeNode().Name("n").Capacity(...).Obj().
type NodeWrapper struct{ v1.Node }

// MakeNode returns a node with room for 110 pods and a Ready condition.
func MakeNode() *NodeWrapper {
	n := &NodeWrapper{v1.Node{}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	return n.Capacity(nil)
}

// Obj returns the built node.
func (n *NodeWrapper) Obj() *v1.Node { return &n.Node }

// Name sets the name and the UID.
func (n *NodeWrapper) Name(s string) *NodeWrapper {
	n.SetName(s)
	n.SetUID(types.UID(s))
	return n
}

// Label sets a label.
func (n *NodeWrapper) Label(k, v string) *NodeWrapper {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
	return n
}

// Capacity sets capacity and allocatable to m; "pods" defaults to 110
// when m does not set it, as the kubelet does.
func (n *NodeWrapper) Capacity(m map[v1.ResourceName]string) *NodeWrapper {
	rl := ResourceList(m)
	if rl == nil {
		rl = v1.ResourceList{}
	}
	if _, ok := rl[v1.ResourcePods]; !ok {
		rl[v1.ResourcePods] = resource.MustParse("110")
	}
	n.Status.Capacity = rl
	n.Status.Allocatable = rl.DeepCopy()
	return n
}

// Taint adds a taint.
func (n *NodeWrapper) Taint(key, value string, effect v1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Unschedulable sets spec.unschedulable.
func (n *NodeWrapper) Unschedulable(b bool) *NodeWrapper { n.Spec.Unschedulable = b; return n }

// DeclaredFeatures sets status.declaredFeatures, which the API server
// requires sorted.
func (n *NodeWrapper) DeclaredFeatures(names ...string) *NodeWrapper {
	n.Status.DeclaredFeatures = names
	return n
}

// DisableResizePreemption sets spec.podPreemptionPolicy.disableResizePreemption.
func (n *NodeWrapper) DisableResizePreemption(policies ...string) *NodeWrapper {
	n.Spec.PodPreemptionPolicy = &v1.NodePodPreemptionPolicy{DisableResizePreemption: policies}
	return n
}

// Image adds an image of size bytes known under names.
func (n *NodeWrapper) Image(size int64, names ...string) *NodeWrapper {
	n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: size})
	return n
}
