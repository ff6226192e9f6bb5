package framework

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
)

// AffinityTerm is a parsed v1.PodAffinityTerm: selectors are compiled once
// per pod instead of once per (pod, node) pair.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector
}

// Matches reports whether pod (in a namespace with labels nsLabels) matches the term.
func (at *AffinityTerm) Matches(pod *v1.Pod, nsLabels labels.Set) bool {
	if at.Namespaces.Has(pod.Namespace) || at.NamespaceSelector.Matches(nsLabels) {
		return at.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// WeightedAffinityTerm is a parsed v1.WeightedPodAffinityTerm.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// GetAffinityTerms parses v1Terms of pod.
func GetAffinityTerms(pod *v1.Pod, v1Terms []v1.PodAffinityTerm) ([]AffinityTerm, error) {
	if v1Terms == nil {
		return nil, nil
	}
	terms := make([]AffinityTerm, 0, len(v1Terms))
	for i := range v1Terms {
		t, err := newAffinityTerm(pod, &v1Terms[i])
		if err != nil {
			return nil, err
		}
		terms = append(terms, *t)
	}
	return terms, nil
}

// GetWeightedAffinityTerms parses weighted v1Terms of pod.
func GetWeightedAffinityTerms(pod *v1.Pod, v1Terms []v1.WeightedPodAffinityTerm) ([]WeightedAffinityTerm, error) {
	if v1Terms == nil {
		return nil, nil
	}
	terms := make([]WeightedAffinityTerm, 0, len(v1Terms))
	for i := range v1Terms {
		t, err := newAffinityTerm(pod, &v1Terms[i].PodAffinityTerm)
		if err != nil {
			return nil, err
		}
		terms = append(terms, WeightedAffinityTerm{AffinityTerm: *t, Weight: v1Terms[i].Weight})
	}
	return terms, nil
}

func newAffinityTerm(pod *v1.Pod, term *v1.PodAffinityTerm) (*AffinityTerm, error) {
	selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return nil, err
	}
	nsSelector, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	// An empty namespaces list with no namespace selector means "the pod's own namespace".
	namespaces := sets.New[string]()
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		namespaces.Insert(pod.Namespace)
	} else {
		namespaces.Insert(term.Namespaces...)
	}
	return &AffinityTerm{Namespaces: namespaces, Selector: selector, TopologyKey: term.TopologyKey, NamespaceSelector: nsSelector}, nil
}

// GetPodAffinityTerms returns the required pod affinity terms of affinity.
func GetPodAffinityTerms(affinity *v1.Affinity) []v1.PodAffinityTerm {
	if affinity != nil && affinity.PodAffinity != nil && len(affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		return affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// GetPodAntiAffinityTerms returns the required pod anti-affinity terms of affinity.
func GetPodAntiAffinityTerms(affinity *v1.Affinity) []v1.PodAffinityTerm {
	if affinity != nil && affinity.PodAntiAffinity != nil && len(affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		return affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// PodResource is what a pod takes from a node, as NodeInfo accounts it.
type PodResource struct {
	Resource Resource
	// Non0CPU and Non0Mem apply DefaultMilliCPURequest / DefaultMemoryRequest
	// to containers that request nothing.
	Non0CPU int64
	Non0Mem int64
}

// PodInfo is a pod with pre-computed data that is expensive to derive on the
// hot path: parsed (anti-)affinity terms and the resources it requests.
// A PodInfo is shared by snapshots and must be treated as immutable once it
// has been added to a NodeInfo; build a new one with NewPodInfo to change it.
type PodInfo struct {
	Pod                        *v1.Pod
	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []WeightedAffinityTerm
	PreferredAntiAffinityTerms []WeightedAffinityTerm
	// resource is computed on first use, as upstream does, so that PodInfos
	// built only for their affinity terms (InterPodAffinity's, every cycle)
	// skip it. It is an atomic pointer because readers run concurrently
	// (preemption removes pods from NodeInfo copies in parallel): racing
	// first readers compute the same value and either store wins.
	resource atomic.Pointer[PodResource]
}

// NewPodInfo returns a PodInfo for pod. The error reports affinity terms
// that could not be parsed; the PodInfo is usable regardless (the API server
// does not fully validate selectors, so callers usually log and go on).
func NewPodInfo(pod *v1.Pod) (*PodInfo, error) {
	pi := &PodInfo{}
	err := pi.Update(pod)
	return pi, err
}

// GetPod returns the pod.
func (pi *PodInfo) GetPod() *v1.Pod { return pi.Pod }

// Update re-derives everything from pod.
func (pi *PodInfo) Update(pod *v1.Pod) error {
	if pod != nil && pi.Pod != nil && pi.Pod.UID == pod.UID {
		// Affinity terms are immutable for a given pod; resources are not
		// (in-place resize), so only those are recomputed.
		pi.Pod = pod
		pi.resource.Store(nil)
		return nil
	}
	var preferredAffinity, preferredAntiAffinity []v1.WeightedPodAffinityTerm
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			preferredAffinity = a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
		if a.PodAntiAffinity != nil {
			preferredAntiAffinity = a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
	}
	var errs []error
	required, err := GetAffinityTerms(pod, GetPodAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		errs = append(errs, fmt.Errorf("requiredAffinityTerms: %w", err))
	}
	requiredAnti, err := GetAffinityTerms(pod, GetPodAntiAffinityTerms(pod.Spec.Affinity))
	if err != nil {
		errs = append(errs, fmt.Errorf("requiredAntiAffinityTerms: %w", err))
	}
	preferred, err := GetWeightedAffinityTerms(pod, preferredAffinity)
	if err != nil {
		errs = append(errs, fmt.Errorf("preferredAffinityTerms: %w", err))
	}
	preferredAnti, err := GetWeightedAffinityTerms(pod, preferredAntiAffinity)
	if err != nil {
		errs = append(errs, fmt.Errorf("preferredAntiAffinityTerms: %w", err))
	}
	pi.Pod = pod
	pi.RequiredAffinityTerms = required
	pi.RequiredAntiAffinityTerms = requiredAnti
	pi.PreferredAffinityTerms = preferred
	pi.PreferredAntiAffinityTerms = preferredAnti
	pi.resource.Store(nil)
	return utilerrors.NewAggregate(errs)
}

// DeepCopy copies the pod; parsed terms are immutable and shared.
func (pi *PodInfo) DeepCopy() *PodInfo {
	out := &PodInfo{
		Pod:                        pi.Pod.DeepCopy(),
		RequiredAffinityTerms:      pi.RequiredAffinityTerms,
		RequiredAntiAffinityTerms:  pi.RequiredAntiAffinityTerms,
		PreferredAffinityTerms:     pi.PreferredAffinityTerms,
		PreferredAntiAffinityTerms: pi.PreferredAntiAffinityTerms,
	}
	out.resource.Store(pi.resource.Load())
	return out
}

// CalculateResource returns what the pod requests, including init and
// sidecar containers and overhead, as upstream computes it with the 1.37
// default feature gates (in-place resize, pod-level resources).
func (pi *PodInfo) CalculateResource() PodResource {
	return *pi.calculateResource()
}

// calculateResource returns the cached resources, computing them on first
// use; the result is shared and must not be modified.
func (pi *PodInfo) calculateResource() *PodResource {
	if r := pi.resource.Load(); r != nil {
		return r
	}
	r := computePodResource(pi.Pod)
	pi.resource.Store(&r)
	return &r
}

func computePodResource(pod *v1.Pod) PodResource {
	opts := resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		InPlacePodLevelResourcesVerticalScalingEnabled: true,
	}
	requests := resourcehelper.PodRequests(pod, opts)
	podLevelSet := resourcehelper.IsPodLevelRequestsSet(pod)
	non0 := requests
	if defaults := nonMissingContainerRequests(requests, podLevelSet); len(defaults) > 0 {
		opts.NonMissingContainerRequests = defaults
		non0 = resourcehelper.PodRequests(pod, opts)
	}
	var pr PodResource
	pr.Resource.Add(requests)
	cpu, mem := non0[v1.ResourceCPU], non0[v1.ResourceMemory]
	pr.Non0CPU = cpu.MilliValue()
	pr.Non0Mem = mem.Value()
	return pr
}

// nonMissingContainerRequests returns the defaults that replace missing
// container requests when computing NonZeroRequested. With pod-level
// requests set, a default only applies when neither level sets the resource.
func nonMissingContainerRequests(requests v1.ResourceList, podLevelSet bool) v1.ResourceList {
	if !podLevelSet {
		return v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.DecimalSI),
		}
	}
	out := v1.ResourceList{}
	if _, ok := requests[v1.ResourceCPU]; !ok {
		out[v1.ResourceCPU] = *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI)
	}
	if _, ok := requests[v1.ResourceMemory]; !ok {
		out[v1.ResourceMemory] = *resource.NewQuantity(DefaultMemoryRequest, resource.DecimalSI)
	}
	return out
}

// QueuedPodInfo is a pod in the scheduling queue with its queueing history.
type QueuedPodInfo struct {
	*PodInfo
	// Timestamp is when the pod was last added to the queue.
	Timestamp time.Time
	// Attempts counts scheduling attempts, successful or not.
	Attempts int
	// BackoffExpiration is when the pod's current backoff ends.
	BackoffExpiration time.Time
	// UnschedulableCount counts attempts that ended Unschedulable; it drives backoff.
	UnschedulableCount int
	// ConsecutiveErrorsCount counts Error attempts in a row; reset on any other result.
	ConsecutiveErrorsCount int
	// InitialAttemptTimestamp is when the pod was first queued; never updated.
	InitialAttemptTimestamp *time.Time
	// UnschedulablePlugins are the plugins that rejected the pod at PreEnqueue,
	// PreFilter, Filter, Reserve or Permit; only their events requeue it.
	UnschedulablePlugins sets.Set[string]
	// PendingPlugins are the plugins that returned Pending.
	PendingPlugins sets.Set[string]
	// GatingPlugin is the PreEnqueue plugin that gated the pod, if any.
	GatingPlugin string
	// GatingPluginEvents caches the events registered by GatingPlugin.
	GatingPluginEvents []ClusterEvent
}

// Gated reports whether a PreEnqueue plugin holds the pod.
func (q *QueuedPodInfo) Gated() bool {
	return q.GatingPlugin != ""
}

// DeepCopy returns a copy whose sets and pod are not shared.
func (q *QueuedPodInfo) DeepCopy() *QueuedPodInfo {
	out := *q
	out.PodInfo = q.PodInfo.DeepCopy()
	out.UnschedulablePlugins = q.UnschedulablePlugins.Clone()
	out.PendingPlugins = q.PendingPlugins.Clone()
	out.GatingPluginEvents = append([]ClusterEvent(nil), q.GatingPluginEvents...)
	return &out
}

// ImageStateSummary summarizes an image on a node.
type ImageStateSummary struct {
	// Size of the image in bytes.
	Size int64
	// NumNodes is how many nodes have the image; filled in snapshots from Nodes.
	NumNodes int
	// Nodes is the set of nodes with the image; kept by the cache, dropped in snapshots.
	Nodes sets.Set[string]
}

// Snapshot returns a copy without Nodes.
func (iss *ImageStateSummary) Snapshot() *ImageStateSummary {
	return &ImageStateSummary{Size: iss.Size, NumNodes: iss.Nodes.Len()}
}

var generation atomic.Int64

// nextGeneration never returns the same value twice, so a node deleted and
// re-added with the same name is never mistaken for an unchanged one.
func nextGeneration() int64 {
	return generation.Add(1)
}

// NodeInfo is everything the scheduler knows about one node: the Node, the
// pods on it (including assumed ones) and aggregates derived from them.
// A NodeInfo handed to plugins belongs to a snapshot and is read-only for
// them; the framework passes modified copies (Snapshot) where it needs to.
type NodeInfo struct {
	node *v1.Node

	// Pods on the node.
	Pods []*PodInfo
	// PodsWithAffinity is the subset of Pods with pod affinity or anti-affinity.
	PodsWithAffinity []*PodInfo
	// PodsWithRequiredAntiAffinity is the subset of Pods with required anti-affinity.
	PodsWithRequiredAntiAffinity []*PodInfo
	// UsedPorts are host ports taken on the node.
	UsedPorts HostPortInfo
	// Requested is the sum of the pods' requests, assumed pods included.
	Requested *Resource
	// NonZeroRequested is Requested with default CPU/memory for containers
	// that request none; used by spreading scores, not by Fit.
	NonZeroRequested *Resource
	// Allocatable is Node.Status.Allocatable.
	Allocatable *Resource
	// ImageStates holds the images present on the node.
	ImageStates map[string]*ImageStateSummary
	// PVCRefCounts maps "namespace/name" of a PVC to the number of pods on the node using it.
	PVCRefCounts map[string]int
	// Generation changes on every mutation so snapshots copy only changed nodes.
	Generation int64
}

// NewNodeInfo returns an empty NodeInfo holding pods.
func NewNodeInfo(pods ...*v1.Pod) *NodeInfo {
	ni := &NodeInfo{
		Requested:        &Resource{},
		NonZeroRequested: &Resource{},
		Allocatable:      &Resource{},
		Generation:       nextGeneration(),
		UsedPorts:        make(HostPortInfo),
		ImageStates:      make(map[string]*ImageStateSummary),
		PVCRefCounts:     make(map[string]int),
	}
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

// Node returns the node, or nil.
func (n *NodeInfo) Node() *v1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *v1.Node) {
	n.node = node
	n.Allocatable = NewResource(node.Status.Allocatable)
	n.Generation = nextGeneration()
}

// RemoveNode drops the node object but keeps the pods, for a node deleted
// while pods on it are still known.
func (n *NodeInfo) RemoveNode() {
	n.node = nil
	n.Generation = nextGeneration()
}

// Snapshot returns a copy that can be mutated (AddPod/RemovePod) without
// affecting n. PodInfos are shared (they are immutable); ImageStates lose Nodes.
func (n *NodeInfo) Snapshot() *NodeInfo {
	out := &NodeInfo{
		node:             n.node,
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		UsedPorts:        make(HostPortInfo, len(n.UsedPorts)),
		ImageStates:      make(map[string]*ImageStateSummary, len(n.ImageStates)),
		PVCRefCounts:     make(map[string]int, len(n.PVCRefCounts)),
		Generation:       n.Generation,
	}
	if len(n.Pods) > 0 {
		out.Pods = append([]*PodInfo(nil), n.Pods...)
	}
	if len(n.PodsWithAffinity) > 0 {
		out.PodsWithAffinity = append([]*PodInfo(nil), n.PodsWithAffinity...)
	}
	if len(n.PodsWithRequiredAntiAffinity) > 0 {
		out.PodsWithRequiredAntiAffinity = append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...)
	}
	for ip, ports := range n.UsedPorts {
		m := make(map[ProtocolPort]struct{}, len(ports))
		for pp := range ports {
			m[pp] = struct{}{}
		}
		out.UsedPorts[ip] = m
	}
	for name, st := range n.ImageStates {
		out.ImageStates[name] = st.Snapshot()
	}
	for k, v := range n.PVCRefCounts {
		out.PVCRefCounts[k] = v
	}
	return out
}

// Clone is Snapshot; the name matches what callers of the older upstream API expect.
func (n *NodeInfo) Clone() *NodeInfo {
	return n.Snapshot()
}

// String is for debugging.
func (n *NodeInfo) String() string {
	keys := make([]string, len(n.Pods))
	for i, p := range n.Pods {
		keys[i] = p.Pod.Name
	}
	return fmt.Sprintf("&NodeInfo{Pods:%v, RequestedResource:%#v, NonZeroRequest: %#v, UsedPort: %#v, AllocatableResource:%#v}",
		keys, n.Requested, n.NonZeroRequested, n.UsedPorts, n.Allocatable)
}

// AddPodInfo adds a pod whose PodInfo is already computed.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if podWithAffinity(pi.Pod) {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if podWithRequiredAntiAffinity(pi.Pod) {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pi, 1)
}

// AddPod adds pod. Affinity parse errors are ignored, as upstream does,
// because the API server accepts selectors the scheduler cannot parse.
func (n *NodeInfo) AddPod(pod *v1.Pod) {
	pi, _ := NewPodInfo(pod)
	n.AddPodInfo(pi)
}

// RemovePod removes pod (matched by UID).
func (n *NodeInfo) RemovePod(logger klog.Logger, pod *v1.Pod) error {
	if pod.UID == "" {
		return errors.New("cannot get cache key for pod with empty UID")
	}
	if podWithAffinity(pod) {
		n.PodsWithAffinity, _ = removeFromSlice(n.PodsWithAffinity, pod)
	}
	if podWithRequiredAntiAffinity(pod) {
		n.PodsWithRequiredAntiAffinity, _ = removeFromSlice(n.PodsWithRequiredAntiAffinity, pod)
	}
	var removed *PodInfo
	if n.Pods, removed = removeFromSlice(n.Pods, pod); removed != nil {
		n.update(removed, -1)
		return nil
	}
	nodeName := ""
	if n.node != nil {
		nodeName = n.node.Name
	}
	logger.V(5).Info("Pod not found on node", "pod", klog.KObj(pod), "node", nodeName)
	return fmt.Errorf("no corresponding pod %s in pods of node %s", pod.Name, nodeName)
}

func removeFromSlice(s []*PodInfo, pod *v1.Pod) ([]*PodInfo, *PodInfo) {
	var removed *PodInfo
	for i := range s {
		if s[i].Pod.UID == pod.UID {
			removed = s[i]
			s[i] = s[len(s)-1]
			s[len(s)-1] = nil
			s = s[:len(s)-1]
			break
		}
	}
	// nil rather than empty keeps cmp.Diff of NodeInfos stable in tests.
	if len(s) == 0 {
		return nil, removed
	}
	return s, removed
}

func podWithAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func podWithRequiredAntiAffinity(p *v1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0
}

func (n *NodeInfo) update(pi *PodInfo, sign int64) {
	r := pi.calculateResource()
	n.Requested.MilliCPU += sign * r.Resource.MilliCPU
	n.Requested.Memory += sign * r.Resource.Memory
	n.Requested.EphemeralStorage += sign * r.Resource.EphemeralStorage
	if n.Requested.ScalarResources == nil && len(r.Resource.ScalarResources) > 0 {
		n.Requested.ScalarResources = map[v1.ResourceName]int64{}
	}
	for name, q := range r.Resource.ScalarResources {
		n.Requested.ScalarResources[name] += sign * q
	}
	n.NonZeroRequested.MilliCPU += sign * r.Non0CPU
	n.NonZeroRequested.Memory += sign * r.Non0Mem

	add := sign > 0
	forEachHostPort(pi.Pod, func(p *v1.ContainerPort) {
		if add {
			n.UsedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
		} else {
			n.UsedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
		}
	})
	for _, v := range pi.Pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		key := pi.Pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
		if add {
			n.PVCRefCounts[key]++
		} else if n.PVCRefCounts[key]--; n.PVCRefCounts[key] <= 0 {
			delete(n.PVCRefCounts, key)
		}
	}
	n.Generation = nextGeneration()
}

// forEachHostPort calls fn for each container port with a host port, in
// regular containers and in restartable (sidecar) init containers, which
// keep their ports for the pod's lifetime.
func forEachHostPort(pod *v1.Pod, fn func(*v1.ContainerPort)) {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		for j := range c.Ports {
			if c.Ports[j].HostPort > 0 {
				fn(&c.Ports[j])
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for j := range c.Ports {
			if c.Ports[j].HostPort > 0 {
				fn(&c.Ports[j])
			}
		}
	}
}

// GetHostPorts returns the container ports of pod that use a host port.
func GetHostPorts(pod *v1.Pod) []v1.ContainerPort {
	var ports []v1.ContainerPort
	if pod == nil {
		return ports
	}
	forEachHostPort(pod, func(p *v1.ContainerPort) { ports = append(ports, *p) })
	return ports
}

// DefaultBindAllHostIP is the address that binds all host IPs.
const DefaultBindAllHostIP = "0.0.0.0"

// ProtocolPort is a protocol/port pair, e.g. TCP/80.
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// NewProtocolPort returns a ProtocolPort, defaulting the protocol to TCP.
func NewProtocolPort(protocol string, port int32) *ProtocolPort {
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return &ProtocolPort{Protocol: protocol, Port: port}
}

// HostPortInfo maps a host IP to the protocol/ports used on it.
type HostPortInfo map[string]map[ProtocolPort]struct{}

// Add records (ip, protocol, port). An empty ip means 0.0.0.0, an empty protocol TCP.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	m, ok := h[ip]
	if !ok {
		m = make(map[ProtocolPort]struct{}, 1)
		h[ip] = m
	}
	m[pp] = struct{}{}
}

// Remove forgets (ip, protocol, port).
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	if m, ok := h[ip]; ok {
		delete(m, ProtocolPort{Protocol: protocol, Port: port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// Len returns the number of (ip, protocol, port) entries.
func (h HostPortInfo) Len() int {
	n := 0
	for _, m := range h {
		n += len(m)
	}
	return n
}

// CheckConflict reports whether (ip, protocol, port) conflicts with a used
// port: 0.0.0.0 conflicts with the same protocol/port on any IP, and any IP
// conflicts with the same protocol/port on itself or on 0.0.0.0.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	pp := ProtocolPort{Protocol: protocol, Port: port}
	if ip == DefaultBindAllHostIP {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range [2]string{DefaultBindAllHostIP, ip} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}

func sanitizeHostPort(ip, protocol string) (string, string) {
	if ip == "" {
		ip = DefaultBindAllHostIP
	}
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return ip, protocol
}
