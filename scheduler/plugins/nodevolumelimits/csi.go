package nodevolumelimits

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles and the registry.
const Name = "NodeVolumeLimits"

// ErrReasonMaxVolumeCountExceeded is the rejection reason, as upstream.
const ErrReasonMaxVolumeCountExceeded = "node(s) exceed max volume count"

const (
	preFilterStateKey framework.StateKey = "PreFilter" + Name

	// vaNodeIndex indexes VolumeAttachments by spec.nodeName. The name is
	// upstream's so that both can share an informer without conflict.
	vaNodeIndex = "va.spec.nodename"
)

// csiLimits is the plugin. Its fields are set in New and read-only
// afterwards, so concurrent cycles share it without locks.
type csiLimits struct {
	csiNodeLister   storagelisters.CSINodeLister
	csiDriverLister storagelisters.CSIDriverLister
	pvLister        corelisters.PersistentVolumeLister
	pvcLister       corelisters.PersistentVolumeClaimLister
	scLister        storagelisters.StorageClassLister
	vaIndexer       cache.Indexer
	translator      csitrans.CSITranslator

	// unboundPrefix starts the handle made up for a PVC that is not bound
	// yet, so that it cannot collide with a real volume handle. Should the
	// PVC get bound during the cycle, the volume may be counted twice, which
	// upstream accepts too.
	unboundPrefix string
}

var (
	_ framework.PreFilterPlugin   = (*csiLimits)(nil)
	_ framework.FilterPlugin      = (*csiLimits)(nil)
	_ framework.EnqueueExtensions = (*csiLimits)(nil)
)

// New builds the plugin; it takes no args. It registers the CSINode,
// CSIDriver, PersistentVolume, PersistentVolumeClaim, StorageClass and
// VolumeAttachment informers with the handle's factory and adds the
// node-name index to the VolumeAttachment informer.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	f := h.SharedInformerFactory()
	if f == nil {
		return nil, errors.New("SharedInformerFactory is nil")
	}
	vaInformer := f.Storage().V1().VolumeAttachments().Informer()
	// Another instance of this plugin may have added the index already:
	// that is fine as long as it is there.
	if _, err := framework.AddIndex(vaInformer, vaNodeIndex, volumeAttachmentNodeName); err != nil {
		return nil, fmt.Errorf("adding the node index to the VolumeAttachment informer: %w", err)
	}
	return &csiLimits{
		csiNodeLister:   f.Storage().V1().CSINodes().Lister(),
		csiDriverLister: f.Storage().V1().CSIDrivers().Lister(),
		pvLister:        f.Core().V1().PersistentVolumes().Lister(),
		pvcLister:       f.Core().V1().PersistentVolumeClaims().Lister(),
		scLister:        f.Storage().V1().StorageClasses().Lister(),
		vaIndexer:       vaInformer.GetIndexer(),
		translator:      csitrans.New(),
		unboundPrefix:   rand.String(32),
	}, nil
}

func volumeAttachmentNodeName(obj any) ([]string, error) {
	va, ok := obj.(*storagev1.VolumeAttachment)
	if !ok {
		return nil, nil
	}
	return []string{va.Spec.NodeName}, nil
}

// Name returns the plugin's name.
func (*csiLimits) Name() string { return Name }

// volumeKey tells volumes apart, as upstream's "<driver>/<handle>" unique
// name does, without building a string per volume and node.
type volumeKey struct {
	driver, handle string
}

// volumeSet holds unique CSI volumes; the driver is part of the key.
type volumeSet map[volumeKey]struct{}

func (s volumeSet) add(driver, handle string) { s[volumeKey{driver, handle}] = struct{}{} }

// podVolumes is the outcome of resolving one pod's volumes, or the error
// that makes the pod unschedulable.
type podVolumes struct {
	volumes volumeSet
	// required are the drivers of volumes, in name order, whose CSIDriver
	// sets preventPodSchedulingIfMissing: each node's CSINode must list
	// them. driverErr is the error of the first CSIDriver lookup that
	// failed; the drivers after it were not looked up.
	required  []string
	driverErr error
	err       error
}

// preFilterState holds the incoming pod's volumes resolved once per cycle.
// Only the presence of a CSINode changes how they resolve (it turns in-tree
// migration on), hence two variants.
type preFilterState struct {
	withCSINode    podVolumes
	withoutCSINode podVolumes
}

// Clone shares the state: it is never modified after PreFilter.
func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter skips pods without volumes that could count, as upstream, and
// otherwise resolves the pod's volumes for Filter.
func (pl *csiLimits) PreFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if !pl.hasCountableVolume(pod) {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, pl.resolveNewPod(klog.FromContext(ctx), pod))
	return nil, nil
}

// PreFilterExtensions returns nil: the pod's own volumes do not depend on
// other pods, and Filter reads the node's pods from the NodeInfo it is given.
func (*csiLimits) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func (pl *csiLimits) hasCountableVolume(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil || pl.translator.IsInlineMigratable(vol) {
			return true
		}
	}
	return false
}

func (pl *csiLimits) resolveNewPod(logger klog.Logger, pod *v1.Pod) *preFilterState {
	s := &preFilterState{
		withCSINode:    podVolumes{volumes: volumeSet{}},
		withoutCSINode: podVolumes{volumes: volumeSet{}},
	}
	s.withCSINode.err = pl.attachableVolumes(logger, pod, true, true, nil, s.withCSINode.volumes)
	s.withoutCSINode.err = pl.attachableVolumes(logger, pod, false, true, nil, s.withoutCSINode.volumes)
	pl.requireDrivers(&s.withCSINode)
	pl.requireDrivers(&s.withoutCSINode)
	return s
}

// requireDrivers looks up, once per cycle rather than per node, the
// CSIDrivers of v's volumes, in name order: upstream walks the pod's
// volumes in map order, so with several missing drivers the one it names
// is random; name order names one of the drivers upstream may name. A
// driver without a CSIDriver may not be a CSI driver at all, so it is not
// required, as upstream.
func (pl *csiLimits) requireDrivers(v *podVolumes) {
	if v.err != nil {
		return
	}
	drivers := make([]string, 0, len(v.volumes))
	for vol := range v.volumes {
		drivers = append(drivers, vol.driver)
	}
	slices.Sort(drivers)
	for _, driver := range slices.Compact(drivers) {
		csiDriver, err := pl.csiDriverLister.Get(driver)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			v.driverErr = fmt.Errorf("error getting CSIDriver for provider %s: %w", driver, err)
			return
		}
		if p := csiDriver.Spec.PreventPodSchedulingIfMissing; p != nil && *p {
			v.required = append(v.required, driver)
		}
	}
}

// Filter checks that every driver the pod uses that asks for it is on the
// node, then every driver against the node's limit for it.
func (pl *csiLimits) Filter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	if len(pod.Spec.Volumes) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	node := nodeInfo.Node()

	csiNode, err := pl.csiNodeLister.Get(node.Name)
	if err != nil {
		// Upstream tolerates nodes without a CSINode (they have no limits
		// and no migration), and so do we.
		logger.V(5).Info("Could not get a CSINode object for the node", "node", klog.KObj(node), "err", err)
		csiNode = nil
	}
	migrationOn := csiNode != nil

	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		// Filter without PreFilter (not done by the scheduler): resolve now.
		s = pl.resolveNewPod(logger, pod)
	}
	newPod := s.withoutCSINode
	if migrationOn {
		newPod = s.withCSINode
	}
	if newPod.err != nil {
		if apierrors.IsNotFound(newPod.err) {
			// Only creating the PVC can help, and it must be created anyway.
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, newPod.err.Error())
		}
		return framework.AsStatus(newPod.err)
	}
	if len(newPod.volumes) == 0 {
		return nil
	}

	if s := checkDriversInstalled(newPod, csiNode); s != nil {
		return s
	}

	limits := volumeLimits(csiNode)
	if len(limits) == 0 {
		return nil
	}

	// Only the drivers of the pod that have a limit here decide, which
	// spares translating other in-tree PVs of the node's pods.
	limited := make(map[string]bool, len(limits))
	for v := range newPod.volumes {
		if _, ok := limits[v.driver]; ok {
			limited[v.driver] = true
		}
	}
	inUse := make(volumeSet)
	for _, pi := range nodeInfo.Pods {
		if err := pl.attachableVolumes(logger, pi.Pod, migrationOn, false, limited, inUse); err != nil {
			return framework.AsStatus(err)
		}
	}
	usedPerDriver := make(map[string]int)
	for v := range inUse {
		usedPerDriver[v.driver]++
	}

	attached, err := pl.attachedVolumes(logger, node.Name)
	if err != nil {
		return framework.AsStatus(err)
	}
	for v := range attached {
		if _, ok := inUse[v]; !ok {
			usedPerDriver[v.driver]++
		}
	}

	// A volume of the pod already used by a pod on the node adds nothing.
	// Upstream does not look the pod's volumes up among the
	// VolumeAttachments, so one attached but unused still counts twice.
	newPerDriver := make(map[string]int)
	for v := range newPod.volumes {
		if _, ok := inUse[v]; !ok {
			newPerDriver[v.driver]++
		}
	}

	for driver, count := range newPerDriver {
		limit, ok := limits[driver]
		if !ok {
			continue
		}
		used := usedPerDriver[driver]
		logger.V(5).Info("Found plugin volume limits", "node", node.Name, "driverName", driver,
			"maxLimits", limit, "currentVolumeCount", used, "newVolumeCount", count, "pod", klog.KObj(pod))
		if int64(used+count) > limit {
			return framework.NewStatus(framework.Unschedulable, ErrReasonMaxVolumeCountExceeded)
		}
	}
	return nil
}

// checkDriversInstalled rejects the node, as Unschedulable, when a driver
// of the pod's volumes is missing from its CSINode (or it has none) and the
// driver's CSIDriver sets preventPodSchedulingIfMissing: upstream's
// VolumeLimitScaling check, beta and on since 1.37. The check runs before
// the limits, so it applies to nodes without any limit too. The drivers
// are checked in name order (see requireDrivers), a failed CSIDriver
// lookup where it happened in that order.
func checkDriversInstalled(v podVolumes, csiNode *storagev1.CSINode) *framework.Status {
	for _, driver := range v.required {
		if csiNode == nil || !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }) {
			return framework.NewStatus(framework.Unschedulable, fmt.Sprintf("%s CSI driver is not installed on the node", driver))
		}
	}
	if v.driverErr != nil {
		return framework.AsStatus(v.driverErr)
	}
	return nil
}

// volumeLimits returns the allocatable count of each driver of csiNode that
// reports one.
func volumeLimits(csiNode *storagev1.CSINode) map[string]int64 {
	limits := make(map[string]int64)
	if csiNode == nil {
		return limits
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Allocatable != nil && d.Allocatable.Count != nil {
			limits[d.Name] = int64(*d.Allocatable.Count)
		}
	}
	return limits
}

// attachableVolumes adds the CSI volumes of pod to result. When drivers is
// not nil, in-tree PVs migrating to other drivers may be left out.
// migrationOn says the node has a CSINode. For a pod on the node
// (newPod false) a PVC that cannot be found is not counted: nothing says
// it still belongs to that pod; for the incoming pod it is an error.
func (pl *csiLimits) attachableVolumes(logger klog.Logger, pod *v1.Pod, migrationOn, newPod bool, drivers map[string]bool, result volumeSet) error {
	claims := pl.pvcLister.PersistentVolumeClaims(pod.Namespace)
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var pvcName string
		switch {
		case vol.PersistentVolumeClaim != nil:
			pvcName = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			pvcName = ephemeral.VolumeClaimName(pod, vol)
		default:
			if err := pl.inlineVolume(logger, pod, vol, migrationOn, result); err != nil {
				return err
			}
			continue
		}
		if pvcName == "" {
			return errors.New("PersistentVolumeClaim had no name")
		}

		pvc, err := claims.Get(pvcName)
		if err != nil {
			if newPod {
				return fmt.Errorf("looking up PVC %s/%s: %w", pod.Namespace, pvcName, err)
			}
			logger.V(5).Info("Unable to look up PVC info", "pod", klog.KObj(pod), "PVC", klog.KRef(pod.Namespace, pvcName))
			continue
		}
		if vol.Ephemeral != nil {
			// A PVC of that name not created for this pod must not be used.
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return err
			}
		}

		driver, handle := pl.claimDriverAndHandle(logger, pvc, migrationOn, drivers)
		if driver == "" || handle == "" {
			logger.V(5).Info("Could not find a CSI driver name or volume handle, not counting volume", "PVC", klog.KObj(pvc))
			continue
		}
		result.add(driver, handle)
	}
	return nil
}

// inlineVolume adds an in-tree inline volume that migrates to CSI.
func (pl *csiLimits) inlineVolume(logger klog.Logger, pod *v1.Pod, vol *v1.Volume, migrationOn bool, result volumeSet) error {
	if !pl.translator.IsInlineMigratable(vol) {
		return nil
	}
	plugin, err := pl.translator.GetInTreePluginNameFromSpec(nil, vol)
	if err != nil {
		return fmt.Errorf("looking up provisioner name for volume %s: %w", vol.Name, err)
	}
	if !csiMigrationOn(migrationOn, plugin) {
		logger.V(5).Info("CSI Migration is not enabled for provisioner", "provisioner", plugin, "pod", klog.KObj(pod))
		return nil
	}
	pv, err := pl.translator.TranslateInTreeInlineVolumeToCSI(logger, vol, pod.Namespace)
	if err != nil || pv == nil {
		return fmt.Errorf("converting volume(%s) from inline to csi: %w", vol.Name, err)
	}
	driver, err := pl.translator.GetCSINameFromInTreeName(plugin)
	if err != nil {
		return fmt.Errorf("looking up CSI driver name for provisioner %s: %w", plugin, err)
	}
	// Plugins that do not support inline volumes translate to no CSI source.
	if pv.Spec.CSI == nil {
		return nil
	}
	result.add(driver, pv.Spec.CSI.VolumeHandle)
	return nil
}

// claimDriverAndHandle returns the CSI driver and volume handle behind pvc,
// translating migrated in-tree PVs, or "" when the volume does not count.
func (pl *csiLimits) claimDriverAndHandle(logger klog.Logger, pvc *v1.PersistentVolumeClaim, migrationOn bool, drivers map[string]bool) (string, string) {
	pvName := pvc.Spec.VolumeName
	if pvName == "" {
		logger.V(5).Info("Persistent volume had no name for claim", "PVC", klog.KObj(pvc))
		return pl.storageClassDriverAndHandle(logger, pvc, migrationOn)
	}
	pv, err := pl.pvLister.Get(pvName)
	if err != nil {
		// The PV may be gone, or the PVC pre-bound to one not created yet:
		// the StorageClass still tells which driver will serve it.
		logger.V(5).Info("Unable to look up PV info for PVC and PV", "PVC", klog.KObj(pvc), "PV", klog.KRef("", pvName))
		return pl.storageClassDriverAndHandle(logger, pvc, migrationOn)
	}

	source := pv.Spec.CSI
	if source == nil {
		if !pl.translator.IsPVMigratable(pv) {
			return "", ""
		}
		plugin, err := pl.translator.GetInTreePluginNameFromSpec(pv, nil)
		if err != nil {
			logger.V(5).Info("Unable to look up plugin name from PV spec", "err", err)
			return "", ""
		}
		if !csiMigrationOn(migrationOn, plugin) {
			logger.V(5).Info("CSI Migration of plugin is not enabled", "plugin", plugin)
			return "", ""
		}
		if drivers != nil {
			// Translating copies the PV: not worth it when the count
			// of that driver cannot matter.
			if driver, err := pl.translator.GetCSINameFromInTreeName(plugin); err == nil && !drivers[driver] {
				return "", ""
			}
		}
		csiPV, err := pl.translator.TranslateInTreePVToCSI(logger, pv)
		if err != nil {
			logger.V(5).Info("Unable to translate in-tree volume to CSI", "err", err)
			return "", ""
		}
		if csiPV.Spec.CSI == nil {
			logger.V(5).Info("Unable to get a valid volume source for translated PV", "PV", pvName)
			return "", ""
		}
		source = csiPV.Spec.CSI
	}
	return source.Driver, source.VolumeHandle
}

// storageClassDriverAndHandle returns the driver that will provision pvc
// and a made-up handle unique to the claim.
func (pl *csiLimits) storageClassDriverAndHandle(logger klog.Logger, pvc *v1.PersistentVolumeClaim, migrationOn bool) (string, string) {
	// Without a (known) StorageClass the claim binds immediately, so it
	// was bound before scheduling and is not ours to count.
	scName := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if scName == "" {
		logger.V(5).Info("PVC has no StorageClass", "PVC", klog.KObj(pvc))
		return "", ""
	}
	sc, err := pl.scLister.Get(scName)
	if err != nil {
		logger.V(5).Info("Could not get StorageClass for PVC", "PVC", klog.KObj(pvc), "err", err)
		return "", ""
	}
	handle := fmt.Sprintf("%s-%s/%s", pl.unboundPrefix, pvc.Namespace, pvc.Name)

	provisioner := sc.Provisioner
	if !pl.translator.IsMigratableIntreePluginByName(provisioner) {
		return provisioner, handle
	}
	if !csiMigrationOn(migrationOn, provisioner) {
		logger.V(5).Info("CSI Migration of provisioner is not enabled", "provisioner", provisioner)
		return "", ""
	}
	driver, err := pl.translator.GetCSINameFromInTreeName(provisioner)
	if err != nil {
		logger.V(5).Info("Unable to look up driver name from provisioner name", "provisioner", provisioner, "err", err)
		return "", ""
	}
	return driver, handle
}

// attachedVolumes returns the CSI volumes that VolumeAttachments say are
// attached to nodeName. Attachments without an
// attacher, without a PV, or of a PV that is missing or not CSI are left out.
func (pl *csiLimits) attachedVolumes(logger klog.Logger, nodeName string) (volumeSet, error) {
	objs, err := pl.vaIndexer.ByIndex(vaNodeIndex, nodeName)
	if err != nil {
		return nil, err
	}
	attached := make(volumeSet, len(objs))
	for _, obj := range objs {
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok {
			logger.Error(nil, "Unexpected object in the VolumeAttachment index", "type", fmt.Sprintf("%T", obj))
			continue
		}
		if va.Spec.NodeName != nodeName {
			continue
		}
		if va.Spec.Attacher == "" {
			logger.V(5).Info("VolumeAttachment has no attacher", "VolumeAttachment", klog.KObj(va))
			continue
		}
		if va.Spec.Source.PersistentVolumeName == nil {
			logger.V(5).Info("VolumeAttachment has no PV name", "VolumeAttachment", klog.KObj(va))
			continue
		}
		pv, err := pl.pvLister.Get(*va.Spec.Source.PersistentVolumeName)
		if err != nil {
			logger.V(5).Info("Unable to get PV for VolumeAttachment", "VolumeAttachment", klog.KObj(va), "err", err)
			continue
		}
		if pv.Spec.CSI == nil {
			logger.V(5).Info("PV is not a CSI volume", "PV", klog.KObj(pv))
			continue
		}
		attached.add(va.Spec.Attacher, pv.Spec.CSI.VolumeHandle)
	}
	return attached, nil
}

// csiMigrationOn reports whether volumes of the in-tree plugin count
// against their CSI driver on a node. The five plugins below have their
// migration locked on upstream, so only the node having a CSINode matters;
// the CSINode's migrated-plugins annotation is not read, as upstream 1.37.
func csiMigrationOn(hasCSINode bool, plugin string) bool {
	if !hasCSINode {
		return false
	}
	switch plugin {
	case csiplugins.AWSEBSInTreePluginName,
		csiplugins.PortworxVolumePluginName,
		csiplugins.GCEPDInTreePluginName,
		csiplugins.AzureDiskInTreePluginName,
		csiplugins.CinderInTreePluginName:
		return true
	}
	return false
}
