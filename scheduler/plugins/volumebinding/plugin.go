package volumebinding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// Name is the plugin's name in profiles and the registry.
const Name = "VolumeBinding"

const (
	stateKey framework.StateKey = Name

	// ErrReasonUnboundImmediate is PreFilter's rejection of a pod whose
	// Immediate claims the PV controller has not bound yet.
	ErrReasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"

	// defaultBindTimeoutSeconds is upstream's default bindTimeoutSeconds.
	defaultBindTimeoutSeconds = 600
	// pollInterval is how often PreBind looks at the informers while
	// waiting for the PV controller.
	pollInterval = time.Second
)

// features are the feature gates the plugin depends on, at their 1.37
// defaults in New. Tests may flip them to exercise the gated paths.
type features struct {
	// storageCapacityScoring (beta, on since 1.37): score nodes by the
	// capacity left for the pod's volumes, with the args' shape. When
	// off, shape is refused and Score is skipped, as upstream at 1.36.
	storageCapacityScoring bool
	// volumeAttributesClass (GA, on): claims may name a
	// VolumeAttributesClass that PV matching honours.
	volumeAttributesClass bool
}

func defaultFeatures() features {
	return features{storageCapacityScoring: true, volumeAttributesClass: true}
}

// volumeBinding is the plugin. Its fields are set in New and read-only
// afterwards; the mutable state lives in the assume caches.
type volumeBinding struct {
	binder *binder
	// pvcLister reads claims as the API has them (not assumed) for
	// PreFilter's existence checks.
	pvcLister corelisters.PersistentVolumeClaimLister
	// scorer is nil when capacity scoring is off.
	scorer func(classResources map[string]*storageResource) int64
	fts    features
}

var (
	_ framework.PreFilterPlugin   = (*volumeBinding)(nil)
	_ framework.FilterPlugin      = (*volumeBinding)(nil)
	_ framework.PreScorePlugin    = (*volumeBinding)(nil)
	_ framework.ScorePlugin       = (*volumeBinding)(nil)
	_ framework.ReservePlugin     = (*volumeBinding)(nil)
	_ framework.PreBindPlugin     = (*volumeBinding)(nil)
	_ framework.EnqueueExtensions = (*volumeBinding)(nil)
	_ io.Closer                   = (*volumeBinding)(nil)
)

// New builds the plugin from *configv1.VolumeBindingArgs (nil means
// upstream's defaults) and registers the PV, PVC, StorageClass, CSINode,
// CSIDriver, CSIStorageCapacity, Node and Pod informers with the handle's
// factory.
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return newWithFeatures(ctx, obj, h, defaultFeatures())
}

func newWithFeatures(ctx context.Context, obj runtime.Object, h framework.Handle, fts features) (*volumeBinding, error) {
	args, err := getArgs(obj, fts)
	if err != nil {
		return nil, err
	}
	if err := validateArgs(args, fts); err != nil {
		return nil, err
	}
	f := h.SharedInformerFactory()
	if f == nil {
		return nil, errors.New("SharedInformerFactory is nil")
	}
	logger := klog.FromContext(ctx)
	pvcInformer := f.Core().V1().PersistentVolumeClaims()
	pvs, err := newPVCache(logger, f.Core().V1().PersistentVolumes().Informer())
	if err != nil {
		return nil, fmt.Errorf("failed to build volume binder: %w", err)
	}
	pvcs, err := newPVCCache(logger, pvcInformer.Informer())
	if err != nil {
		return nil, fmt.Errorf("failed to build volume binder: %w", err)
	}
	pl := &volumeBinding{
		binder: &binder{
			client:       h.ClientSet(),
			classes:      f.Storage().V1().StorageClasses().Lister(),
			pods:         f.Core().V1().Pods().Lister(),
			nodes:        f.Core().V1().Nodes().Lister(),
			csiNodes:     f.Storage().V1().CSINodes().Lister(),
			csiDrivers:   f.Storage().V1().CSIDrivers().Lister(),
			capacities:   f.Storage().V1().CSIStorageCapacities().Lister(),
			pvcs:         pvcs,
			pvs:          pvs,
			translator:   newTranslator(),
			vacEnabled:   fts.volumeAttributesClass,
			bindTimeout:  time.Duration(*args.BindTimeoutSeconds) * time.Second,
			pollInterval: pollInterval,
		},
		pvcLister: pvcInformer.Lister(),
		fts:       fts,
	}
	if fts.storageCapacityScoring {
		pl.scorer = buildScorer(args.Shape)
	}
	return pl, nil
}

// getArgs returns a defaulted copy of obj.
func getArgs(obj runtime.Object, fts features) (*configv1.VolumeBindingArgs, error) {
	var args configv1.VolumeBindingArgs
	if obj != nil {
		in, ok := obj.(*configv1.VolumeBindingArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type VolumeBindingArgs, got %T", obj)
		}
		args = *in.DeepCopy()
	}
	if args.BindTimeoutSeconds == nil {
		args.BindTimeoutSeconds = ptr.To[int64](defaultBindTimeoutSeconds)
	}
	if len(args.Shape) == 0 && fts.storageCapacityScoring {
		args.Shape = []configv1.UtilizationShapePoint{{Utilization: 0, Score: helper.MaxCustomPriorityScore}, {Utilization: helper.MaxUtilization, Score: 0}}
	}
	return &args, nil
}

// ValidateArgs checks *configv1.VolumeBindingArgs as kube-scheduler 1.37
// does with its default feature gates: bindTimeoutSeconds not negative,
// and shape (defaulted before) as a scoring function shape, since
// StorageCapacityScoring is on.
func ValidateArgs(args *configv1.VolumeBindingArgs) error {
	return validateArgs(args, defaultFeatures())
}

func validateArgs(args *configv1.VolumeBindingArgs, fts features) error {
	var errs field.ErrorList
	if t := args.BindTimeoutSeconds; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(field.NewPath("bindTimeoutSeconds"), *t, "invalid BindTimeoutSeconds, should not be a negative value"))
	}
	shapePath := field.NewPath("shape")
	if fts.storageCapacityScoring {
		errs = append(errs, helper.ValidateShape(args.Shape, shapePath)...)
	} else if args.Shape != nil {
		// Refused, not ignored, as upstream does without the gate.
		errs = append(errs, field.Invalid(shapePath, args.Shape, "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"))
	}
	return errs.ToAggregate()
}

// Close unhooks the assume caches from the shared informers when the
// profile is retired.
func (pl *volumeBinding) Close() error {
	return errors.Join(pl.binder.pvs.Close(), pl.binder.pvcs.Close())
}

// Name returns the plugin's name.
func (pl *volumeBinding) Name() string { return Name }

// stateData is written in PreFilter and shared, by pointer, by the later
// extension points of the cycle and its binding cycle.
type stateData struct {
	// claims is nil when the pod has no claims.
	claims *podVolumeClaims

	// mu guards byNode and hasStaticBindings, written by the parallel
	// Filter calls. Reserve, PreBind and Unreserve run after Filter, one at
	// a time, and read without it.
	mu                sync.Mutex
	byNode            map[string]*podVolumes
	hasStaticBindings bool

	// allBound is set by Reserve: nothing to write in PreBind.
	allBound bool
}

// Clone returns d: preemption never changes volume state, and Filter's
// per-node results are keyed by node, so clones may share them.
func (d *stateData) Clone() framework.StateData { return d }

// checkClaims reports whether the pod uses claims, and an error naming
// the first claim that keeps it from being scheduled: missing, lost,
// being deleted, or an ephemeral claim not created for this pod.
func (pl *volumeBinding) checkClaims(pod *v1.Pod) (bool, error) {
	hasClaims := false
	for i := range pod.Spec.Volumes {
		name, isEphemeral := claimName(pod, &pod.Spec.Volumes[i])
		if name == "" {
			continue
		}
		hasClaims = true
		pvc, err := pl.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			// Right after a pod with an ephemeral volume is created its
			// claim does not exist yet; say why we wait.
			if isEphemeral && apierrors.IsNotFound(err) {
				err = fmt.Errorf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
			}
			return true, err
		}
		if pvc.Status.Phase == v1.ClaimLost {
			return true, fmt.Errorf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName)
		}
		if pvc.DeletionTimestamp != nil {
			return true, fmt.Errorf("persistentvolumeclaim %q is being deleted", pvc.Name)
		}
		if isEphemeral {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return true, err
			}
		}
	}
	return hasClaims, nil
}

// PreFilter sorts the pod's claims. A pod without claims skips Filter; a
// pod waiting for Immediate claims to be bound, or whose claims cannot be
// used, is UnschedulableAndUnresolvable on every node.
func (pl *volumeBinding) PreFilter(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if hasClaims, err := pl.checkClaims(pod); err != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	} else if !hasClaims {
		cs.Write(stateKey, &stateData{})
		return nil, framework.NewStatus(framework.Skip)
	}
	claims, err := pl.binder.podClaims(pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(claims.unboundImmediate) > 0 {
		// The PV controller binds these on its own; the PVC events
		// requeue the pod once it has.
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnboundImmediate)
	}
	claims.unboundImmediate = nil
	cs.Write(stateKey, &stateData{claims: claims, byNode: map[string]*podVolumes{}})
	return nil, nil
}

// PreFilterExtensions returns nil: other pods do not change volume fit.
func (pl *volumeBinding) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func getState(cs *framework.CycleState) (*stateData, error) {
	return framework.ReadAs[*stateData](cs, stateKey)
}

// Filter checks bound claims' PVs against the node and finds PVs or
// provisioning for the unbound WaitForFirstConsumer claims; the result
// is kept per node for Reserve.
func (pl *volumeBinding) Filter(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	state, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := nodeInfo.Node()
	vols, reasons, err := pl.binder.findPodVolumes(klog.FromContext(ctx), pod, state.claims, node)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(reasons) > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	state.byNode[node.Name] = vols
	state.hasStaticBindings = state.hasStaticBindings || len(vols.staticBindings) > 0
	return nil
}

// PreScore skips Score only when capacity scoring is off. With it on, as at
// 1.37's default gates, Score runs for every pod, claims or not, as
// upstream's does.
func (pl *volumeBinding) PreScore(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	if pl.scorer == nil {
		return framework.NewStatus(framework.Skip)
	}
	state, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	if state.hasStaticBindings || pl.fts.storageCapacityScoring {
		return nil
	}
	return framework.NewStatus(framework.Skip)
}

// Score rates the node by the utilization of the storage the pod's new
// volumes would take, per class, through the args' shape: static bindings
// by the chosen PVs' size, otherwise provisioned volumes by the node's
// CSIStorageCapacity.
func (pl *volumeBinding) Score(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	if pl.scorer == nil {
		return 0, nil
	}
	state, err := getState(cs)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	vols, ok := state.byNode[nodeInfo.Node().Name]
	if !ok {
		return 0, nil
	}
	classes := map[string]*storageResource{}
	if len(vols.staticBindings) != 0 || !pl.fts.storageCapacityScoring {
		for _, bi := range vols.staticBindings {
			r := classes[bi.pv.Spec.StorageClassName]
			if r == nil {
				r = &storageResource{}
				classes[bi.pv.Spec.StorageClassName] = r
			}
			req := bi.pvc.Spec.Resources.Requests[v1.ResourceStorage]
			capacity := bi.pv.Spec.Capacity[v1.ResourceStorage]
			r.requested += req.Value()
			r.capacity += capacity.Value()
		}
	} else {
		for _, dp := range vols.dynamicProvisions {
			if dp.nodeCapacity == nil {
				continue
			}
			class := ptr.Deref(dp.pvc.Spec.StorageClassName, "")
			r := classes[class]
			if r == nil {
				r = &storageResource{}
				classes[class] = r
			}
			// Volumes of one class share the node's capacity: it is
			// set, not summed, while their requests add up.
			r.capacity = dp.nodeCapacity.Capacity.Value()
			req := dp.pvc.Spec.Resources.Requests[v1.ResourceStorage]
			r.requested += req.Value()
		}
	}
	return pl.scorer(classes), nil
}

// ScoreExtensions returns nil: scores are already 0..100.
func (pl *volumeBinding) ScoreExtensions() framework.ScoreExtensions { return nil }

// storageResource is the requested and available storage of one class on a node.
type storageResource struct {
	requested int64
	capacity  int64
}

// buildScorer turns the shape into a scorer averaging its broken-linear
// function of utilization over the classes.
func buildScorer(shape []configv1.UtilizationShapePoint) func(map[string]*storageResource) int64 {
	f := helper.BrokenLinear(shape)
	return func(classes map[string]*storageResource) int64 {
		if len(classes) == 0 {
			return 0
		}
		var sum int64
		for _, r := range classes {
			if r.capacity == 0 || r.requested > r.capacity {
				sum += f(helper.MaxUtilization)
				continue
			}
			sum += f(r.requested * helper.MaxUtilization / r.capacity)
		}
		return int64(math.Round(float64(sum) / float64(len(classes))))
	}
}

// Reserve assumes the chosen node's bindings, so that the next cycles do
// not hand the same PVs to other pods before PreBind has written them.
func (pl *volumeBinding) Reserve(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	state, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	vols, ok := state.byNode[nodeName]
	if !ok {
		// The pod has no claims.
		state.allBound = true
		return nil
	}
	allBound, err := pl.binder.assume(klog.FromContext(ctx), pod, nodeName, vols)
	if err != nil {
		return framework.AsStatus(err)
	}
	state.allBound = allBound
	return nil
}

// Unreserve forgets the assumed bindings. Idempotent.
func (pl *volumeBinding) Unreserve(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) {
	state, err := getState(cs)
	if err != nil {
		return
	}
	if vols, ok := state.byNode[nodeName]; ok {
		pl.binder.revert(vols)
	}
}

// noPodVolumesFor is the error of PreBind run for a node Filter did not accept.
func noPodVolumesFor(nodeName string) *framework.Status {
	return framework.AsStatus(fmt.Errorf("no pod volume found for node %q", nodeName))
}

// PreBindPreFlight skips PreBind when every claim is bound already.
func (pl *volumeBinding) PreBindPreFlight(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) (*framework.PreBindPreFlightResult, *framework.Status) {
	result := &framework.PreBindPreFlightResult{AllowParallel: true}
	state, err := getState(cs)
	if err != nil {
		return result, framework.AsStatus(err)
	}
	if state.allBound {
		return result, framework.NewStatus(framework.Skip)
	}
	if _, ok := state.byNode[nodeName]; !ok {
		return result, noPodVolumesFor(nodeName)
	}
	return result, nil
}

// PreBind writes the assumed bindings and waits, up to bindTimeoutSeconds,
// for the PV controller to complete them. Any failure is an Error: the
// pod is retried from scratch with fresh informers.
func (pl *volumeBinding) PreBind(ctx context.Context, cs *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	state, err := getState(cs)
	if err != nil {
		return framework.AsStatus(err)
	}
	if state.allBound {
		return nil
	}
	vols, ok := state.byNode[nodeName]
	if !ok {
		return noPodVolumesFor(nodeName)
	}
	logger := klog.FromContext(ctx)
	if err := pl.binder.bind(ctx, pod, nodeName, vols); err != nil {
		logger.V(5).Info("Failed to bind volumes for pod", "pod", klog.KObj(pod), "err", err)
		return framework.AsStatus(err)
	}
	logger.V(5).Info("Bound volumes for pod", "pod", klog.KObj(pod))
	return nil
}
