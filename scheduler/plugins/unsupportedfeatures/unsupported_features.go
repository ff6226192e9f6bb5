// Package unsupportedfeatures provides UnsupportedFeatures, a PreFilter plugin
// of profile-scheduler (it has no upstream counterpart) that refuses pods
// needing a plugin the profile does not run, instead of placing them as if
// the requirement did not exist. kube-scheduler would let the missing plugin
// enforce it: without VolumeBinding a pod with an unbound claim would land
// on a node its volume cannot reach, without InterPodAffinity a pod would
// ignore its anti-affinity. Such a pod is rejected as
// UnschedulableAndUnresolvable with a message naming what is missing, e.g.
//
//	pod uses resource claims, which need the DynamicResources plugin: not enabled in this profile
//	pod uses persistentVolumeClaim volumes, which need the VolumeBinding plugin: not enabled in this profile
//
// The check follows what the profile actually runs, so adding a plugin to a
// profile (or building it) lifts the refusal without touching this plugin.
// Disabling UnsupportedFeatures in a profile restores upstream's behaviour of
// ignoring requirements no plugin enforces.
package unsupportedfeatures

import (
	"context"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/helper"
)

// Name is the plugin's name in profiles.
const Name = "UnsupportedFeatures"

// Plugins that enforce what the rules below check, as named upstream.
const (
	volumeRestrictions = "VolumeRestrictions"
	nodeVolumeLimits   = "NodeVolumeLimits"
	volumeBinding      = "VolumeBinding"
	volumeZone         = "VolumeZone"
	dynamicResources   = "DynamicResources"
	interPodAffinity   = "InterPodAffinity"
	podTopologySpread  = "PodTopologySpread"
)

// Extension points a rule can require a plugin at.
const (
	filterPoint = "Filter"
	scorePoint  = "Score"
)

// claimVolumePlugins are upstream's plugins for volumes backed by claims:
// binding and provisioning, zone, attach limits and access-mode conflicts.
var claimVolumePlugins = []string{volumeRestrictions, nodeVolumeLimits, volumeBinding, volumeZone}

// volumeRules maps inline volume kinds to the plugins that check them
// upstream: conflicts of shared disks (VolumeRestrictions) and attach limits
// of in-tree volumes migrated to CSI (NodeVolumeLimits).
var volumeRules = []struct {
	kind    string
	uses    func(*v1.Volume) bool
	plugins []string
}{
	{"persistentVolumeClaim", func(v *v1.Volume) bool { return v.PersistentVolumeClaim != nil }, claimVolumePlugins},
	{"ephemeral", func(v *v1.Volume) bool { return v.Ephemeral != nil }, claimVolumePlugins},
	{"gcePersistentDisk", func(v *v1.Volume) bool { return v.GCEPersistentDisk != nil }, []string{volumeRestrictions, nodeVolumeLimits}},
	{"awsElasticBlockStore", func(v *v1.Volume) bool { return v.AWSElasticBlockStore != nil }, []string{volumeRestrictions, nodeVolumeLimits}},
	{"rbd", func(v *v1.Volume) bool { return v.RBD != nil }, []string{volumeRestrictions}},
	{"iscsi", func(v *v1.Volume) bool { return v.ISCSI != nil }, []string{volumeRestrictions}},
	{"azureDisk", func(v *v1.Volume) bool { return v.AzureDisk != nil }, []string{nodeVolumeLimits}},
	{"azureFile", func(v *v1.Volume) bool { return v.AzureFile != nil }, []string{nodeVolumeLimits}},
	{"cinder", func(v *v1.Volume) bool { return v.Cinder != nil }, []string{nodeVolumeLimits}},
	{"vsphereVolume", func(v *v1.Volume) bool { return v.VsphereVolume != nil }, []string{nodeVolumeLimits}},
	{"portworxVolume", func(v *v1.Volume) bool { return v.PortworxVolume != nil }, []string{nodeVolumeLimits}},
}

// profilePlugins is what a profile runs, resolved once: the instance is
// immutable once built.
type profilePlugins struct {
	any     sets.Set[string]
	atPoint map[string]sets.Set[string]
}

type unsupportedFeatures struct {
	handle framework.Handle
	// registered reports whether profile-scheduler provides a plugin at
	// all; nil treats every plugin as provided.
	registered func(string) bool

	once    sync.Once
	plugins profilePlugins
}

var (
	_ framework.PreFilterPlugin   = (*unsupportedFeatures)(nil)
	_ framework.EnqueueExtensions = (*unsupportedFeatures)(nil)
)

// New returns the plugin; it takes no args. Every missing plugin is
// reported as "not enabled in this profile"; NewFactory also tells plugins
// that profile-scheduler does not provide yet.
func New(ctx context.Context, args runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return NewFactory(nil)(ctx, args, h)
}

// NewFactory returns a factory whose plugin reports a missing plugin for
// which registered returns false as "not available in profile-scheduler yet".
func NewFactory(registered func(pluginName string) bool) func(context.Context, runtime.Object, framework.Handle) (framework.Plugin, error) {
	return func(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
		return &unsupportedFeatures{handle: h, registered: registered}, nil
	}
}

func (*unsupportedFeatures) Name() string { return Name }

func (pl *unsupportedFeatures) profile() *profilePlugins {
	pl.once.Do(func() {
		pl.plugins = profilePlugins{any: sets.New[string](), atPoint: map[string]sets.Set[string]{}}
		// Read on first use: the plugins of a profile are only known once
		// the instance is built, after the factories ran.
		l := pl.handle.ListPlugins()
		for point, set := range map[string]configv1.PluginSet{
			"PreEnqueue": l.PreEnqueue, "QueueSort": l.QueueSort, "PreFilter": l.PreFilter, filterPoint: l.Filter,
			"PostFilter": l.PostFilter, "PreScore": l.PreScore, scorePoint: l.Score, "Reserve": l.Reserve,
			"Permit": l.Permit, "PreBind": l.PreBind, "Bind": l.Bind, "PostBind": l.PostBind,
		} {
			names := sets.New[string]()
			for _, p := range set.Enabled {
				names.Insert(p.Name)
			}
			pl.plugins.atPoint[point] = names
			pl.plugins.any = pl.plugins.any.Union(names)
		}
	})
	return &pl.plugins
}

// requirement is one thing the pod uses and the plugins that must run at
// point for it to be honoured.
type requirement struct {
	// subject starts the reason, e.g. "pod uses ephemeral volumes, which need".
	subject string
	point   string
	plugins []string
}

// PreFilter refuses the pod if it uses something that a plugin missing from
// the profile would have to enforce. It does no work for a pod using none
// of those features, beyond looking at its spec.
func (pl *unsupportedFeatures) PreFilter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	reqs := podRequirements(pod)
	prof := pl.profile()
	if dra := pl.handle.SharedDRAManager(); dra != nil && framework.RequestsDRAExtendedResource(pod, dra.DeviceClassResolver()) {
		// NodeResourcesFit leaves such a resource to DynamicResources on
		// nodes without it as allocatable: without that plugin the pod
		// would land there without devices.
		reqs = append(reqs, requirement{subject: "pod requests extended resources backed by DRA, which need", point: filterPoint, plugins: []string{dynamicResources}})
	}
	if !prof.atPoint[filterPoint].Has(interPodAffinity) && pl.matchesExistingAntiAffinity(pod) {
		// Upstream's InterPodAffinity also keeps a pod away from pods whose
		// required anti-affinity it matches, even if it has no affinity itself.
		reqs = append(reqs, requirement{
			subject: "pod matches the required anti-affinity of pods already on nodes, which needs",
			point:   filterPoint,
			plugins: []string{interPodAffinity},
		})
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	var reasons []string
	for _, r := range reqs {
		reasons = append(reasons, pl.missing(prof, r)...)
	}
	if len(reasons) == 0 {
		return nil, nil
	}
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		logger.Info("Pod needs plugins the profile does not run", "pod", klog.KObj(pod), "reasons", reasons)
	}
	return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
}

// PreFilterExtensions returns nil: the refusal does not depend on pods
// nominated to or preempted from a node.
func (*unsupportedFeatures) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// missing returns the reasons for the plugins of r that do not run where
// needed, one reason per kind of absence.
func (pl *unsupportedFeatures) missing(prof *profilePlugins, r requirement) []string {
	var notBuilt, notEnabled, notAtPoint []string
	for _, p := range r.plugins {
		switch {
		case prof.atPoint[r.point].Has(p):
		case pl.registered != nil && !pl.registered(p):
			notBuilt = append(notBuilt, p)
		case !prof.any.Has(p):
			notEnabled = append(notEnabled, p)
		default:
			notAtPoint = append(notAtPoint, p)
		}
	}
	var out []string
	add := func(plugins []string, why string) {
		if len(plugins) > 0 {
			out = append(out, fmt.Sprintf("%s the %s: %s", r.subject, pluginList(plugins), why))
		}
	}
	add(notBuilt, "not available in profile-scheduler yet")
	add(notEnabled, "not enabled in this profile")
	add(notAtPoint, fmt.Sprintf("not enabled at %s in this profile", r.point))
	return out
}

// pluginList renders "the X plugin" / "the X and Y plugins" / "the X, Y and Z plugins" without the article.
func pluginList(plugins []string) string {
	if len(plugins) == 1 {
		return plugins[0] + " plugin"
	}
	return strings.Join(plugins[:len(plugins)-1], ", ") + " and " + plugins[len(plugins)-1] + " plugins"
}

// podRequirements lists what the pod uses that some plugin must enforce,
// in a stable order.
func podRequirements(pod *v1.Pod) []requirement {
	var reqs []requirement
	if len(pod.Spec.Volumes) > 0 {
		for _, rule := range volumeRules {
			for i := range pod.Spec.Volumes {
				if rule.uses(&pod.Spec.Volumes[i]) {
					reqs = append(reqs, requirement{
						subject: fmt.Sprintf("pod uses %s volumes, which need", rule.kind),
						point:   filterPoint,
						plugins: rule.plugins,
					})
					break
				}
			}
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		reqs = append(reqs, requirement{subject: "pod uses resource claims, which need", point: filterPoint, plugins: []string{dynamicResources}})
	}
	if r, ok := podAffinityRequirement(pod.Spec.Affinity); ok {
		reqs = append(reqs, r)
	}
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		// ScheduleAnyway constraints only score; DoNotSchedule ones filter.
		point := scorePoint
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != v1.ScheduleAnyway {
				point = filterPoint
			}
		}
		reqs = append(reqs, requirement{subject: "pod uses topologySpreadConstraints, which need", point: point, plugins: []string{podTopologySpread}})
	}
	return reqs
}

func podAffinityRequirement(a *v1.Affinity) (requirement, bool) {
	if a == nil {
		return requirement{}, false
	}
	var affinity, anti, required bool
	if pa := a.PodAffinity; pa != nil && (len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || len(pa.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
		affinity = true
		required = len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0
	}
	if pa := a.PodAntiAffinity; pa != nil && (len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || len(pa.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
		anti = true
		required = required || len(pa.RequiredDuringSchedulingIgnoredDuringExecution) > 0
	}
	var what string
	switch {
	case affinity && anti:
		what = "pod affinity and anti-affinity"
	case affinity:
		what = "pod affinity"
	case anti:
		what = "pod anti-affinity"
	default:
		return requirement{}, false
	}
	// Preferred terms only score; required ones filter.
	point := scorePoint
	if required {
		point = filterPoint
	}
	return requirement{subject: fmt.Sprintf("pod uses %s, which needs", what), point: point, plugins: []string{interPodAffinity}}, true
}

// matchesExistingAntiAffinity reports whether a pod already on some node has
// a required anti-affinity term selecting pod. A term with a namespace
// selector is assumed to select pod's namespace: namespace labels are not
// at hand here, and refusing is the safe side.
func (pl *unsupportedFeatures) matchesExistingAntiAffinity(pod *v1.Pod) bool {
	lister := pl.handle.SnapshotSharedLister()
	if lister == nil {
		return false
	}
	nodes, err := lister.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if err != nil {
		return false
	}
	podLabels := labels.Set(pod.Labels)
	for _, ni := range nodes {
		for _, existing := range ni.PodsWithRequiredAntiAffinity {
			for i := range existing.RequiredAntiAffinityTerms {
				t := &existing.RequiredAntiAffinityTerms[i]
				inNamespace := t.Namespaces.Has(pod.Namespace) || (t.NamespaceSelector != nil && t.NamespaceSelector != labels.Nothing())
				if inNamespace && t.Selector.Matches(podLabels) {
					return true
				}
			}
		}
	}
	return false
}

// EventsToRegister: a pod refused for matching another pod's anti-affinity
// may fit once that pod is gone, one refused for an extended resource
// backed by DRA once the DeviceClass no longer provides it; the other
// refusals only lift when the profile changes, which builds a new instance.
func (pl *unsupportedFeatures) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, QueueingHintFn: isSchedulableAfterPodDeleted},
		{Event: framework.ClusterEvent{Resource: framework.DeviceClass, ActionType: framework.Update | framework.Delete}},
	}, nil
}

func isSchedulableAfterPodDeleted(_ klog.Logger, _ *v1.Pod, oldObj, _ any) (framework.QueueingHint, error) {
	deleted, _, err := helper.As[*v1.Pod](oldObj, nil)
	if err != nil {
		return framework.Queue, err
	}
	if len(framework.GetPodAntiAffinityTerms(deleted.Spec.Affinity)) > 0 {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}
