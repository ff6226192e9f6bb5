package volumebinding

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Filter reasons, as upstream words them. Several can be reported for one
// node, in this order.
const (
	// ErrReasonNodeConflict: a bound PV's node affinity excludes the node.
	ErrReasonNodeConflict = "node(s) didn't match PersistentVolume's node affinity"
	// ErrReasonBindConflict: a WaitForFirstConsumer claim has neither a
	// matching PV nor a way to be provisioned for the node.
	ErrReasonBindConflict = "node(s) didn't find available persistent volumes to bind"
	// ErrReasonNotEnoughSpace: CSI storage capacity tracking says the node
	// cannot host a volume of the requested size.
	ErrReasonNotEnoughSpace = "node(s) did not have enough free storage"
	// ErrReasonPVNotExist: a bound claim names a PV that does not exist.
	ErrReasonPVNotExist = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)

// bindingInfo pairs a claim with the PV chosen for it. After Reserve, pv
// is the assumed PV (claimRef set).
type bindingInfo struct {
	pvc *v1.PersistentVolumeClaim
	pv  *v1.PersistentVolume
}

// dynamicProvision is a claim to be provisioned on the node, with the
// capacity object that made the node fit (nil without capacity tracking).
type dynamicProvision struct {
	pvc          *v1.PersistentVolumeClaim
	nodeCapacity *storagev1.CSIStorageCapacity
}

// podVolumes is what one node needs for the pod's unbound claims.
type podVolumes struct {
	staticBindings    []*bindingInfo
	dynamicProvisions []*dynamicProvision
}

// podVolumeClaims sorts the pod's claims once per cycle, in PreFilter.
type podVolumeClaims struct {
	bound []*v1.PersistentVolumeClaim
	// unboundDelayed are WaitForFirstConsumer claims without a volume.
	unboundDelayed []*v1.PersistentVolumeClaim
	// unboundImmediate are claims the PV controller binds without the
	// scheduler; the pod waits for them.
	unboundImmediate []*v1.PersistentVolumeClaim
	// candidates holds, per claim of unboundDelayed (by key), the PVs that
	// FindMatchingVolume could pick on some node.
	candidates map[string][]candidatePV
	// boundAffinity holds, by PV name, the compiled node affinity of the
	// bound claims' PVs that compileAffinity handles and that are not read
	// in a CSI form on any node.
	boundAffinity map[string]compiledAffinity
}

// compiledAffinity is a PV's required node affinity compiled once per
// cycle, valid for the PV's resourceVersion it was compiled from.
type compiledAffinity struct {
	resourceVersion string
	selectors       []labels.Selector
}

// candidatePV is a PV worth offering FindMatchingVolume for a claim, with
// its node affinity compiled once per cycle rather than once per node.
type candidatePV struct {
	pv *v1.PersistentVolume
	// affinity is nil when the PV has no required node affinity, or one
	// compileAffinity leaves to FindMatchingVolume.
	affinity []labels.Selector
	// boundToClaim: the PV is pre-bound to the claim. FindMatchingVolume
	// answers "no match" when such a PV does not fit the node, instead of
	// trying others, so it is always passed on.
	boundToClaim bool
}

// inTreeToCSI is the part of csi-translation-lib the binder uses.
type inTreeToCSI interface {
	IsPVMigratable(pv *v1.PersistentVolume) bool
	GetInTreePluginNameFromSpec(pv *v1.PersistentVolume, vol *v1.Volume) (string, error)
	TranslateInTreePVToCSI(logger klog.Logger, pv *v1.PersistentVolume) (*v1.PersistentVolume, error)
}

// binder finds, assumes and writes the volume bindings of pods. It reads
// informers only, except in bind, which runs in PreBind.
type binder struct {
	client clientset.Interface

	classes      storagelisters.StorageClassLister
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	csiNodes     storagelisters.CSINodeLister
	csiDrivers   storagelisters.CSIDriverLister
	capacities   storagelisters.CSIStorageCapacityLister
	pvcs         *pvcCache
	pvs          *pvCache
	translator   inTreeToCSI
	vacEnabled   bool
	bindTimeout  time.Duration
	pollInterval time.Duration
}

var _ inTreeToCSI = csitrans.CSITranslator{}

func claimKey(pvc *v1.PersistentVolumeClaim) string { return pvc.Namespace + "/" + pvc.Name }

// claimName returns the claim a volume uses, and whether it is a generic
// ephemeral volume; "" for volumes without a claim.
func claimName(pod *v1.Pod, vol *v1.Volume) (string, bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, false
	case vol.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, vol), true
	}
	return "", false
}

// fullyBound: the PV controller finished binding the claim.
func fullyBound(pvc *v1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, volume.AnnBindCompleted)
}

// claimOf returns the claim of vol as the assume cache sees it (nil for a
// volume without claim) and whether it is fully bound.
func (b *binder) claimOf(pod *v1.Pod, vol *v1.Volume) (*v1.PersistentVolumeClaim, bool, error) {
	name, isEphemeral := claimName(pod, vol)
	if name == "" {
		return nil, true, nil
	}
	key := pod.Namespace + "/" + name
	pvc, err := b.pvcs.Get(key)
	if err != nil {
		return nil, false, fmt.Errorf("error getting PVC %q: %v", key, err)
	}
	if isEphemeral {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, false, err
		}
	}
	return pvc, fullyBound(pvc), nil
}

// allBound reports whether every claim of pod is fully bound.
func (b *binder) allBound(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if _, bound, err := b.claimOf(pod, &pod.Spec.Volumes[i]); err != nil || !bound {
			return false
		}
	}
	return true
}

// podClaims sorts the pod's claims into bound, delayed and immediate, and
// collects the candidate PVs of the delayed ones.
func (b *binder) podClaims(pod *v1.Pod) (*podVolumeClaims, error) {
	out := &podVolumeClaims{
		bound:            []*v1.PersistentVolumeClaim{},
		unboundDelayed:   []*v1.PersistentVolumeClaim{},
		unboundImmediate: []*v1.PersistentVolumeClaim{},
		candidates:       map[string][]candidatePV{},
	}
	for i := range pod.Spec.Volumes {
		pvc, bound, err := b.claimOf(pod, &pod.Spec.Volumes[i])
		if err != nil {
			return nil, err
		}
		switch {
		case pvc == nil:
		case bound:
			out.bound = append(out.bound, pvc)
			b.compileBoundAffinity(out, pvc.Spec.VolumeName)
		default:
			delayed, err := volume.IsDelayBindingMode(pvc, b.classes)
			if err != nil {
				return nil, err
			}
			// A claim pre-bound to a PV by its user is left to the PV
			// controller even in WaitForFirstConsumer mode.
			if delayed && pvc.Spec.VolumeName == "" {
				out.unboundDelayed = append(out.unboundDelayed, pvc)
			} else {
				out.unboundImmediate = append(out.unboundImmediate, pvc)
			}
		}
	}
	byClass := map[string][]*v1.PersistentVolume{}
	for _, pvc := range out.unboundDelayed {
		class := volume.GetPersistentVolumeClaimClass(pvc)
		pvs, ok := byClass[class]
		if !ok {
			var err error
			if pvs, err = b.pvs.listPVs(class); err != nil {
				return nil, err
			}
			byClass[class] = pvs
		}
		out.candidates[claimKey(pvc)] = b.candidatesFor(pvc, pvs)
	}
	return out, nil
}

// compileBoundAffinity compiles the node affinity of a bound claim's PV,
// so that Filter does not parse it again on every node. PVs that may be
// read in their CSI form (in-tree, migratable) are left to the full
// check, whose outcome depends on the node's CSINode; so are missing PVs.
func (b *binder) compileBoundAffinity(out *podVolumeClaims, pvName string) {
	pv, err := b.pvs.Get(pvName)
	if err != nil || b.translator.IsPVMigratable(pv) {
		return
	}
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return
	}
	if selectors := compileAffinity(na.Required); selectors != nil {
		if out.boundAffinity == nil {
			out.boundAffinity = map[string]compiledAffinity{}
		}
		out.boundAffinity[pv.Name] = compiledAffinity{resourceVersion: pv.ResourceVersion, selectors: selectors}
	}
}

// candidatesFor keeps the PVs that FindMatchingVolume does not rule out
// for pvc on every node alike. Dropping the others cannot change its
// answer: for them it only ever skips to the next PV. This spares Filter
// re-checking every PV of the class on every node.
func (b *binder) candidatesFor(pvc *v1.PersistentVolumeClaim, pvs []*v1.PersistentVolume) []candidatePV {
	requested := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	class := volume.GetPersistentVolumeClaimClass(pvc)
	claimVAC := ptr.Deref(pvc.Spec.VolumeAttributesClassName, "")
	var selector labels.Selector
	if pvc.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(pvc.Spec.Selector)
		if err != nil {
			// Let FindMatchingVolume report the error.
			selector = nil
		} else {
			selector = s
		}
	}
	out := make([]candidatePV, 0, len(pvs))
	for _, pv := range pvs {
		bound := volume.IsVolumeBoundToClaim(pv, pvc)
		if pv.Spec.ClaimRef != nil && !bound {
			continue
		}
		capacity := pv.Spec.Capacity[v1.ResourceStorage]
		if capacity.Cmp(requested) < 0 || volume.CheckVolumeModeMismatches(&pvc.Spec, &pv.Spec) || pv.DeletionTimestamp != nil {
			continue
		}
		pvVAC := ptr.Deref(pv.Spec.VolumeAttributesClassName, "")
		if b.vacEnabled && claimVAC != pvVAC || !b.vacEnabled && pvVAC != "" {
			continue
		}
		if !bound && (pv.Status.Phase != v1.VolumeAvailable ||
			selector != nil && !selector.Matches(labels.Set(pv.Labels)) ||
			volume.GetPersistentVolumeClass(pv) != class ||
			!volume.CheckAccessModes(pvc, pv)) {
			continue
		}
		c := candidatePV{pv: pv, boundToClaim: bound}
		if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
			c.affinity = compileAffinity(na.Required)
		}
		out = append(out, c)
	}
	return out
}

// findPodVolumes checks the pod's claims against node: bound PVs must
// allow the node, each delayed claim must get an available PV or be
// provisionable there. It returns the node's bindings, or the reasons the
// node does not fit. Only informers and the assume caches are read.
func (b *binder) findPodVolumes(logger klog.Logger, pod *v1.Pod, claims *podVolumeClaims, node *v1.Node) (*podVolumes, []string, error) {
	pv := &podVolumes{}
	boundFit, boundPVsExist := true, true
	unboundFit, enoughSpace := true, true
	var err error

	if len(claims.bound) > 0 {
		if boundFit, boundPVsExist, err = b.checkBoundClaims(logger, claims.bound, claims.boundAffinity, node, pod); err != nil {
			return nil, nil, err
		}
	}

	if len(claims.unboundDelayed) > 0 {
		var toMatch, toProvision []*v1.PersistentVolumeClaim
		for _, pvc := range claims.unboundDelayed {
			selected, ok := pvc.Annotations[volume.AnnSelectedNode]
			if !ok {
				toMatch = append(toMatch, pvc)
				continue
			}
			// Provisioning was already started for another node: only
			// that node can get the volume.
			if selected != node.Name {
				return pv, reasons(boundFit, false, enoughSpace, boundPVsExist), nil
			}
			toProvision = append(toProvision, pvc)
		}
		if len(toMatch) > 0 {
			var unmatched []*v1.PersistentVolumeClaim
			unboundFit, pv.staticBindings, unmatched, err = b.findMatchingVolumes(logger, pod, toMatch, claims.candidates, node)
			if err != nil {
				return nil, nil, err
			}
			toProvision = append(toProvision, unmatched...)
		}
		if len(toProvision) > 0 {
			unboundFit, enoughSpace, pv.dynamicProvisions, err = b.checkVolumeProvisions(logger, pod, toProvision, node)
			if err != nil {
				return nil, nil, err
			}
		}
	}
	if len(pv.staticBindings) == 0 {
		pv.staticBindings = nil
	}
	if len(pv.dynamicProvisions) == 0 {
		pv.dynamicProvisions = nil
	}
	return pv, reasons(boundFit, unboundFit, enoughSpace, boundPVsExist), nil
}

func reasons(boundFit, unboundFit, enoughSpace, boundPVsExist bool) []string {
	var out []string
	if !boundFit {
		out = append(out, ErrReasonNodeConflict)
	}
	if !unboundFit {
		out = append(out, ErrReasonBindConflict)
	}
	if !enoughSpace {
		out = append(out, ErrReasonNotEnoughSpace)
	}
	if !boundPVsExist {
		out = append(out, ErrReasonPVNotExist)
	}
	return out
}

// checkBoundClaims returns whether the bound PVs allow node, and whether
// they all exist. A PV read again since PreFilter compiled its affinity
// (another resourceVersion) gets the full check, like the others.
func (b *binder) checkBoundClaims(logger klog.Logger, claims []*v1.PersistentVolumeClaim, compiled map[string]compiledAffinity, node *v1.Node, pod *v1.Pod) (fit, exist bool, err error) {
	var csiNode *storagev1.CSINode
	csiNodeRead := false
	for _, pvc := range claims {
		pv, err := b.pvs.Get(pvc.Spec.VolumeName)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return true, false, nil
			}
			return true, false, err
		}
		if c, ok := compiled[pv.Name]; ok && c.resourceVersion == pv.ResourceVersion {
			if !anyMatches(c.selectors, node.Labels) {
				logger.V(5).Info("PersistentVolume does not allow the node", "pv", klog.KObj(pv), "node", klog.KObj(node), "pod", klog.KObj(pod))
				return false, true, nil
			}
			continue
		}
		if !csiNodeRead {
			csiNode, csiNodeRead = b.csiNode(logger, node.Name), true
		}
		if pv, err = b.translateToCSI(logger, pv, csiNode); err != nil {
			return false, true, err
		}
		if err := volume.CheckNodeAffinity(pv, node.Labels); err != nil {
			logger.V(5).Info("PersistentVolume does not allow the node", "pv", klog.KObj(pv), "node", klog.KObj(node), "pod", klog.KObj(pod), "err", err)
			return false, true, nil
		}
	}
	return true, true, nil
}

// csiNode returns the node's CSINode, or nil: nodes without one simply
// have no migrated plugins.
func (b *binder) csiNode(logger klog.Logger, name string) *storagev1.CSINode {
	n, err := b.csiNodes.Get(name)
	if err != nil {
		logger.V(5).Info("No CSINode for the node", "node", klog.KRef("", name), "err", err)
		return nil
	}
	return n
}

// compileAffinity turns a PV's required node affinity into one label
// selector per term, for the common shape where every term has label
// expressions only and all of them parse; CheckNodeAffinity gives the same
// verdict for it (terms ORed, expressions ANDed, with labels.Requirement's
// operators). Anything else returns nil and is left to FindMatchingVolume.
// Unlike the library's NodeSelector, matching allocates nothing, which
// matters at one check per PV per node.
func compileAffinity(ns *v1.NodeSelector) []labels.Selector {
	if len(ns.NodeSelectorTerms) == 0 {
		return nil
	}
	out := make([]labels.Selector, 0, len(ns.NodeSelectorTerms))
	for _, term := range ns.NodeSelectorTerms {
		if len(term.MatchFields) > 0 || len(term.MatchExpressions) == 0 {
			return nil
		}
		sel := labels.NewSelector()
		for _, e := range term.MatchExpressions {
			var op selection.Operator
			switch e.Operator {
			case v1.NodeSelectorOpIn:
				op = selection.In
			case v1.NodeSelectorOpNotIn:
				op = selection.NotIn
			case v1.NodeSelectorOpExists:
				op = selection.Exists
			case v1.NodeSelectorOpDoesNotExist:
				op = selection.DoesNotExist
			case v1.NodeSelectorOpGt:
				op = selection.GreaterThan
			case v1.NodeSelectorOpLt:
				op = selection.LessThan
			default:
				return nil
			}
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				return nil
			}
			sel = sel.Add(*r)
		}
		out = append(out, sel)
	}
	return out
}

func anyMatches(selectors []labels.Selector, set labels.Set) bool {
	for _, s := range selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// findMatchingVolumes picks an available PV for each claim, smallest
// claims first so that they do not take the PVs larger claims need.
func (b *binder) findMatchingVolumes(logger klog.Logger, pod *v1.Pod, claims []*v1.PersistentVolumeClaim, candidates map[string][]candidatePV, node *v1.Node) (bool, []*bindingInfo, []*v1.PersistentVolumeClaim, error) {
	// Sort a copy: claims belongs to the cycle state shared by the
	// parallel Filter calls. The sort must be sort.Sort's (not stable):
	// upstream uses it, and from 13 claims on it orders claims of equal
	// size differently from a stable sort, which changes which claim gets
	// a PV that several would accept.
	sorted := bySize(slices.Clone(claims))
	sort.Sort(sorted)
	chosen := map[string]*v1.PersistentVolume{}
	found := true
	var bindings []*bindingInfo
	var unmatched []*v1.PersistentVolumeClaim
	nodeLabels := labels.Set(node.Labels)
	var pvs []*v1.PersistentVolume
	for _, pvc := range sorted {
		pvs = pvs[:0]
		for _, c := range candidates[claimKey(pvc)] {
			if c.boundToClaim || c.affinity == nil || anyMatches(c.affinity, nodeLabels) {
				pvs = append(pvs, c.pv)
			}
		}
		pv, err := volume.FindMatchingVolume(pvc, pvs, node, chosen, true, b.vacEnabled)
		if err != nil {
			return false, nil, nil, err
		}
		if pv == nil {
			logger.V(5).Info("No matching volume", "pod", klog.KObj(pod), "pvc", klog.KObj(pvc), "node", klog.KObj(node))
			unmatched = append(unmatched, pvc)
			found = false
			continue
		}
		chosen[pv.Name] = pv
		bindings = append(bindings, &bindingInfo{pvc: pvc, pv: pv})
	}
	return found, bindings, unmatched, nil
}

// bySize orders claims by requested storage, smallest first.
type bySize []*v1.PersistentVolumeClaim

func (s bySize) Len() int      { return len(s) }
func (s bySize) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s bySize) Less(i, j int) bool {
	qi, qj := s[i].Spec.Resources.Requests[v1.ResourceStorage], s[j].Spec.Resources.Requests[v1.ResourceStorage]
	return qi.Cmp(qj) < 0
}

// checkVolumeProvisions checks that each claim's class can provision a
// volume reachable from node, with enough capacity where the CSI driver
// tracks it.
func (b *binder) checkVolumeProvisions(logger klog.Logger, pod *v1.Pod, claims []*v1.PersistentVolumeClaim, node *v1.Node) (fit, enoughSpace bool, _ []*dynamicProvision, _ error) {
	provisions := []*dynamicProvision{}
	for _, pvc := range claims {
		className := volume.GetPersistentVolumeClaimClass(pvc)
		if className == "" {
			return false, false, nil, fmt.Errorf("no class for claim %q", claimKey(pvc))
		}
		class, err := b.classes.Get(className)
		if err != nil {
			return false, false, nil, fmt.Errorf("failed to find storage class %q", className)
		}
		if class.Provisioner == "" || class.Provisioner == volume.NotSupportedProvisioner {
			logger.V(5).Info("Storage class does not provision volumes", "storageClass", className, "pvc", klog.KObj(pvc))
			return false, true, nil, nil
		}
		if !topologyAllows(class.AllowedTopologies, node.Labels) {
			logger.V(5).Info("Node outside the storage class's allowed topologies", "node", klog.KObj(node), "pvc", klog.KObj(pvc))
			return false, true, nil, nil
		}
		ok, capacity, err := b.hasEnoughCapacity(logger, class.Provisioner, pvc, class, node)
		if err != nil {
			return false, false, nil, err
		}
		if !ok {
			return true, false, nil, nil
		}
		provisions = append(provisions, &dynamicProvision{pvc: pvc, nodeCapacity: capacity})
	}
	logger.V(5).Info("Claims can be provisioned", "count", len(claims), "pod", klog.KObj(pod), "node", klog.KObj(node))
	return true, true, provisions, nil
}

// topologyAllows matches node labels against a class's allowedTopologies:
// no term allows every node; a term without expressions allows none; the
// expressions of a term are ANDed, terms ORed.
func topologyAllows(terms []v1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	set := labels.Set(nodeLabels)
	for _, term := range terms {
		if len(term.MatchLabelExpressions) == 0 {
			continue
		}
		sel := labels.NewSelector()
		valid := true
		for _, e := range term.MatchLabelExpressions {
			r, err := labels.NewRequirement(e.Key, selection.In, e.Values)
			if err != nil {
				valid = false
				break
			}
			sel = sel.Add(*r)
		}
		if valid && sel.Matches(set) {
			return true
		}
	}
	return false
}

// hasEnoughCapacity consults CSIStorageCapacity objects when the class's
// CSI driver asks for it (storageCapacity: true); otherwise any size fits.
func (b *binder) hasEnoughCapacity(logger klog.Logger, provisioner string, pvc *v1.PersistentVolumeClaim, class *storagev1.StorageClass, node *v1.Node) (bool, *storagev1.CSIStorageCapacity, error) {
	q, ok := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return true, nil, nil
	}
	driver, err := b.csiDrivers.Get(provisioner)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil, nil
		}
		return false, nil, err
	}
	if driver.Spec.StorageCapacity == nil || !*driver.Spec.StorageCapacity {
		return true, nil, nil
	}
	capacities, err := b.capacities.List(labels.Everything())
	if err != nil {
		return false, nil, err
	}
	size := q.Value()
	for _, c := range capacities {
		if c.StorageClassName == class.Name && capacityFits(c, size) && reachable(logger, node, c) {
			return true, c, nil
		}
	}
	logger.V(5).Info("No reachable CSIStorageCapacity is large enough", "node", klog.KObj(node), "pvc", klog.KObj(pvc), "size", size, "storageClass", klog.KObj(class))
	return false, nil, nil
}

func capacityFits(c *storagev1.CSIStorageCapacity, size int64) bool {
	limit := volumeLimit(c)
	return limit != nil && limit.Value() >= size
}

// volumeLimit is the largest volume c admits: maximumVolumeSize when the
// driver reports it, else the total capacity.
func volumeLimit(c *storagev1.CSIStorageCapacity) *resource.Quantity {
	if c.MaximumVolumeSize != nil {
		return c.MaximumVolumeSize
	}
	return c.Capacity
}

// reachable: c's topology selects node. A capacity without topology is
// reachable from nowhere.
func reachable(logger klog.Logger, node *v1.Node, c *storagev1.CSIStorageCapacity) bool {
	if c.NodeTopology == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(c.NodeTopology)
	if err != nil {
		logger.Error(err, "Invalid CSIStorageCapacity node topology", "csiStorageCapacity", klog.KObj(c))
		return false
	}
	return sel.Matches(labels.Set(node.Labels))
}

// migrationOn reports whether plugin is an in-tree plugin whose CSI
// migration is on in 1.37 (GA and locked): its PVs' topology is read from
// the CSI form once the node reports the plugin as migrated.
func migrationOn(plugin string) bool {
	switch plugin {
	case csiplugins.AWSEBSInTreePluginName, csiplugins.GCEPDInTreePluginName, csiplugins.AzureDiskInTreePluginName,
		csiplugins.CinderInTreePluginName, csiplugins.PortworxVolumePluginName:
		return true
	}
	return false
}

// translateToCSI returns the CSI form of an in-tree PV when the node's
// CSINode says its plugin is migrated, else pv itself.
func (b *binder) translateToCSI(logger klog.Logger, pv *v1.PersistentVolume, csiNode *storagev1.CSINode) (*v1.PersistentVolume, error) {
	if !b.translator.IsPVMigratable(pv) {
		return pv, nil
	}
	plugin, err := b.translator.GetInTreePluginNameFromSpec(pv, nil)
	if err != nil {
		return nil, fmt.Errorf("could not get plugin name from pv: %v", err)
	}
	if !migrationOn(plugin) || csiNode == nil {
		return pv, nil
	}
	migrated := csiNode.Annotations[v1.MigratedPluginsAnnotationKey]
	if migrated == "" || !slices.Contains(strings.Split(migrated, ","), plugin) {
		return pv, nil
	}
	out, err := b.translator.TranslateInTreePVToCSI(logger, pv)
	if err != nil {
		return nil, fmt.Errorf("could not translate pv: %v", err)
	}
	return out, nil
}

// assume records in the assume caches the writes PreBind will make: PVs
// bound to their claims and claims annotated with the selected node, and
// rewrites pv to hold the assumed objects. It reports whether there is
// nothing to write because every claim is bound already.
func (b *binder) assume(logger klog.Logger, pod *v1.Pod, nodeName string, pv *podVolumes) (bool, error) {
	if b.allBound(pod) {
		logger.V(4).Info("All claims of the pod are bound", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName))
		return true, nil
	}
	bindings := []*bindingInfo{}
	for _, bi := range pv.staticBindings {
		newPV, dirty, err := volume.GetBindVolumeToClaim(bi.pv, bi.pvc)
		if err != nil {
			b.restorePVs(bindings)
			return false, err
		}
		if dirty {
			if err := b.pvs.Assume(newPV); err != nil {
				b.restorePVs(bindings)
				return false, err
			}
		}
		bindings = append(bindings, &bindingInfo{pvc: bi.pvc, pv: newPV})
	}
	provisions := []*dynamicProvision{}
	for _, dp := range pv.dynamicProvisions {
		claim := dp.pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, volume.AnnSelectedNode, nodeName)
		if err := b.pvcs.Assume(claim); err != nil {
			b.restorePVs(bindings)
			b.restorePVCs(provisions)
			return false, err
		}
		provisions = append(provisions, &dynamicProvision{pvc: claim})
	}
	pv.staticBindings = bindings
	pv.dynamicProvisions = provisions
	return false, nil
}

// revert forgets what assume recorded for pv.
func (b *binder) revert(pv *podVolumes) {
	b.restorePVs(pv.staticBindings)
	b.restorePVCs(pv.dynamicProvisions)
}

func (b *binder) restorePVs(bindings []*bindingInfo) {
	for _, bi := range bindings {
		b.pvs.Restore(bi.pv)
	}
}

func (b *binder) restorePVCs(provisions []*dynamicProvision) {
	for _, dp := range provisions {
		b.pvcs.Restore(dp.pvc)
	}
}

// bind writes the assumed PVs and claims and waits, up to bindTimeout,
// until the informers show the PV controller has completed every binding.
func (b *binder) bind(ctx context.Context, pod *v1.Pod, nodeName string, pv *podVolumes) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Binding volumes", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName))
	if pv.staticBindings == nil || pv.dynamicProvisions == nil {
		// assume sets both; nil means Reserve did not run for this node.
		return fmt.Errorf("failed to get cached bindings for pod %q", pod.Namespace+"/"+pod.Name)
	}
	claims, err := b.writeBindings(ctx, pod, pv)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, b.pollInterval, b.bindTimeout, false, func(context.Context) (bool, error) {
		return b.bindingsDone(logger, pod, nodeName, pv.staticBindings, claims)
	})
	if err != nil {
		return fmt.Errorf("binding volumes: %w", err)
	}
	return nil
}

// writeBindings updates the PVs and claims through the API. Whatever was
// not written is un-assumed; written objects stay assumed until the
// informer brings their new version. It returns the claims as the API
// server returned them.
//
// The written PVs replace the assumed ones in pv.staticBindings, but
// pv.dynamicProvisions keeps the assumed claims, as upstream does: an
// Unreserve after a failed PreBind then drops the claims' assumptions
// (selected node) even before the informer has seen the writes, while
// the PVs' stay until the informer supersedes them.
func (b *binder) writeBindings(ctx context.Context, pod *v1.Pod, pv *podVolumes) (_ []*v1.PersistentVolumeClaim, err error) {
	logger := klog.FromContext(ctx)
	doneBindings, doneProvisions := 0, 0
	defer func() {
		b.restorePVs(pv.staticBindings[doneBindings:])
		b.restorePVCs(pv.dynamicProvisions[doneProvisions:])
	}()
	for _, bi := range pv.staticBindings {
		newPV, err := b.client.CoreV1().PersistentVolumes().Update(ctx, bi.pv, metav1.UpdateOptions{})
		if err != nil {
			logger.V(4).Info("Binding PersistentVolume to claim failed", "pod", klog.KObj(pod), "pv", klog.KObj(bi.pv), "pvc", klog.KObj(bi.pvc), "err", err)
			return nil, err
		}
		logger.V(2).Info("Bound PersistentVolume to claim, waiting for the PV controller", "pod", klog.KObj(pod), "pv", klog.KObj(bi.pv), "pvc", klog.KObj(bi.pvc))
		bi.pv = newPV
		doneBindings++
	}
	written := make([]*v1.PersistentVolumeClaim, 0, len(pv.dynamicProvisions))
	for _, dp := range pv.dynamicProvisions {
		newClaim, err := b.client.CoreV1().PersistentVolumeClaims(dp.pvc.Namespace).Update(ctx, dp.pvc, metav1.UpdateOptions{})
		if err != nil {
			logger.V(4).Info("Selecting the node of a claim failed", "pvc", klog.KObj(dp.pvc), "err", err)
			return nil, err
		}
		written = append(written, newClaim)
		doneProvisions++
	}
	return written, nil
}

// newerThan reports whether a's resourceVersion is above b's; versions
// that do not parse compare as 0.
func newerThan(a, b metav1.Object) bool {
	ra, _ := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	rb, _ := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return ra > rb
}

// bindingsDone checks the informers: false while the PV controller is
// still working, an error once a binding can no longer complete (which
// makes the pod retry from scratch).
func (b *binder) bindingsDone(logger klog.Logger, pod *v1.Pod, nodeName string, bindings []*bindingInfo, claims []*v1.PersistentVolumeClaim) (bool, error) {
	node, err := b.nodes.Get(nodeName)
	if err != nil {
		return false, fmt.Errorf("failed to get node %q: %w", nodeName, err)
	}
	csiNode := b.csiNode(logger, nodeName)
	if _, err := b.pods.Pods(pod.Namespace).Get(pod.Name); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("pod does not exist any more: %w", err)
		}
		logger.Error(err, "Failed to get pod from the lister", "pod", klog.KObj(pod))
	}

	for _, bi := range bindings {
		apiPV, err := b.pvs.GetAPIObj(bi.pv.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		apiPVC, err := b.pvcs.GetAPIObj(claimKey(bi.pvc))
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		// The informer has not seen our write yet.
		if newerThan(bi.pv, apiPV) {
			return false, nil
		}
		if apiPV, err = b.translateToCSI(logger, apiPV, csiNode); err != nil {
			return false, fmt.Errorf("failed to translate pv to csi: %w", err)
		}
		if err := volume.CheckNodeAffinity(apiPV, node.Labels); err != nil {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", apiPV.Name, node.Name, err)
		}
		if apiPV.Spec.ClaimRef == nil || apiPV.Spec.ClaimRef.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", apiPV.Name)
		}
		if !fullyBound(apiPVC) {
			return false, nil
		}
	}

	for _, claim := range claims {
		apiPVC, err := b.pvcs.GetAPIObj(claimKey(claim))
		if err != nil {
			return false, fmt.Errorf("failed to check provisioning pvc: %w", err)
		}
		if newerThan(claim, apiPVC) {
			return false, nil
		}
		// The PV controller removes the annotation when provisioning failed
		// or was rescheduled.
		if apiPVC.Annotations == nil {
			return false, fmt.Errorf("selectedNode annotation reset for PVC %q", apiPVC.Name)
		}
		if apiPVC.Annotations[volume.AnnSelectedNode] != nodeName {
			return false, fmt.Errorf("provisioning failed for PVC %q", apiPVC.Name)
		}
		if apiPVC.Spec.VolumeName != "" {
			apiPV, err := b.pvs.GetAPIObj(apiPVC.Spec.VolumeName)
			if err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, fmt.Errorf("failed to get pv %q from cache: %w", apiPVC.Spec.VolumeName, err)
			}
			if apiPV, err = b.translateToCSI(logger, apiPV, csiNode); err != nil {
				return false, err
			}
			if err := volume.CheckNodeAffinity(apiPV, node.Labels); err != nil {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", apiPV.Name, node.Name, err)
			}
		}
		if !fullyBound(apiPVC) {
			return false, nil
		}
	}
	logger.V(2).Info("All claims of the pod are bound", "pod", klog.KObj(pod))
	return true, nil
}

func newTranslator() inTreeToCSI { return csitrans.New() }
