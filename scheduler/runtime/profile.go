package runtime

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// MultiPoint is the pseudo extension point of plugins.multiPoint.
const MultiPoint = "MultiPoint"

// ConfigError is a profile NewFramework refuses. It names the extension
// point and the plugin so users can find the offending line.
type ConfigError struct {
	// ExtensionPoint is e.g. "Filter", "MultiPoint" or "PluginConfig"; empty
	// when the problem is not tied to one point.
	ExtensionPoint string
	// Plugin is the plugin concerned; empty when the problem is a missing plugin.
	Plugin string
	// Reason says what is wrong.
	Reason string
}

func (e *ConfigError) Error() string {
	switch {
	case e.ExtensionPoint != "" && e.Plugin != "":
		return fmt.Sprintf("%s plugin %q: %s", e.ExtensionPoint, e.Plugin, e.Reason)
	case e.Plugin != "":
		return fmt.Sprintf("plugin %q: %s", e.Plugin, e.Reason)
	case e.ExtensionPoint != "":
		return fmt.Sprintf("%s: %s", e.ExtensionPoint, e.Reason)
	}
	return e.Reason
}

// mergePlugins is upstream's v1 defaulting of profile plugins.
func mergePlugins(defaults, custom *configv1.Plugins) *configv1.Plugins {
	if custom == nil {
		return defaults
	}
	defaults.MultiPoint = mergePluginSet(defaults.MultiPoint, custom.MultiPoint)
	for _, e := range extensionPoints {
		*e.set(defaults) = mergePluginSet(*e.set(defaults), *e.set(custom))
	}
	for _, e := range podGroupPoints {
		*e.set(defaults) = mergePluginSet(*e.set(defaults), *e.set(custom))
	}
	return defaults
}

func mergePluginSet(def, custom configv1.PluginSet) configv1.PluginSet {
	disabled := sets.New[string]()
	var disabledList []configv1.Plugin
	for _, p := range custom.Disabled {
		disabledList = append(disabledList, configv1.Plugin{Name: p.Name})
		disabled.Insert(p.Name)
	}
	for _, p := range def.Disabled {
		disabledList = append(disabledList, configv1.Plugin{Name: p.Name})
		disabled.Insert(p.Name)
	}
	customIndex := make(map[string]int, len(custom.Enabled))
	for i, p := range custom.Enabled {
		if _, seen := customIndex[p.Name]; !seen {
			customIndex[p.Name] = i
		}
	}
	replaced := sets.New[int]()
	var enabled []configv1.Plugin
	if !disabled.Has("*") {
		for _, p := range def.Enabled {
			if disabled.Has(p.Name) {
				continue
			}
			// Re-enabling a default keeps its position and takes the new settings.
			if i, ok := customIndex[p.Name]; ok {
				p = custom.Enabled[i]
				replaced.Insert(i)
			}
			enabled = append(enabled, p)
		}
	}
	// Duplicates in custom are kept so that building the instance reports them.
	for i, p := range custom.Enabled {
		if !replaced.Has(i) {
			enabled = append(enabled, p)
		}
	}
	return configv1.PluginSet{Enabled: enabled, Disabled: disabledList}
}

// extensionPoint ties a profile's PluginSet to the plugin interface it needs.
type extensionPoint struct {
	name       string
	set        func(*configv1.Plugins) *configv1.PluginSet
	implements func(framework.Plugin) bool
	add        func(*frameworkImpl, framework.Plugin)
}

func implements[T any](p framework.Plugin) bool {
	_, ok := p.(T)
	return ok
}

// podGroupPoint is one of upstream's pod-group (workload) extension points.
// Upstream runs them only behind gate, off by default in Kubernetes 1.37.2,
// and only for pod groups. In a workload-aware profile (see WorkloadAware)
// the points whose gate is on are built as any other; elsewhere they are
// inert (see checkPodGroupPoints).
type podGroupPoint struct {
	extensionPoint
	gate string
	// upstream lists the plugins of this project that upstream 1.37.2
	// implements the point with, besides the workload plugins: what an
	// inert point accepts.
	upstream sets.Set[string]
}

var podGroupPoints = []podGroupPoint{
	{extensionPoint{PlacementGenerate, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PlacementGenerate }, implements[framework.PlacementGeneratePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.placementGeneratePlugins = append(f.placementGeneratePlugins, p.(framework.PlacementGeneratePlugin))
		}}, TopologyAwareWorkloadSchedulingGate, sets.New[string]()},
	{extensionPoint{PlacementScore, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PlacementScore }, implements[framework.PlacementScorePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.placementScorePlugins = append(f.placementScorePlugins, p.(framework.PlacementScorePlugin))
		}}, TopologyAwareWorkloadSchedulingGate, sets.New("NodeResourcesFit")},
	{extensionPoint{PodGroupPostFilter, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PodGroupPostFilter }, implements[framework.PodGroupPostFilterPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.podGroupPostFilterPlugins = append(f.podGroupPostFilterPlugins, p.(framework.PodGroupPostFilterPlugin))
		}}, GenericWorkloadGate, sets.New("DynamicResources", "DefaultPreemption")},
}

// activePoints returns the extension points built for a profile: the
// regular ones and, in a workload-aware profile, the pod-group points whose
// gate is on.
func activePoints(g WorkloadGates, workloadAware bool) []extensionPoint {
	out := extensionPoints
	for _, pt := range podGroupPoints {
		if workloadAware && g.enabled(pt.gate) {
			out = append(out[:len(out):len(out)], pt.extensionPoint)
		}
	}
	return out
}

// checkPodGroupPoints checks the pod-group points of a profile. In a
// workload-aware profile, a point whose gate is on is left to building,
// which resolves it as any other point. Elsewhere it accepts what
// upstream 1.37.2 accepts there with its default gates, where it is inert:
// a plugin that implements the point. A pasted 1.37 profile, such as the
// expanded default one listing DynamicResources and DefaultPreemption
// under podGroupPostFilter, thus loads unchanged and behaves as upstream. Any
// other plugin, which upstream refuses as not extending the point, is
// refused naming what the point needs.
func checkPodGroupPoints(p *configv1.Plugins, r Registry, g WorkloadGates, workloadAware bool) error {
	if p == nil {
		return nil
	}
	for _, pt := range podGroupPoints {
		if workloadAware && g.enabled(pt.gate) {
			continue
		}
		for _, pl := range pt.set(p).Enabled {
			if reason, ok := unavailableReason(r, pl.Name, g); ok {
				return &ConfigError{ExtensionPoint: pt.name, Plugin: pl.Name, Reason: reason}
			}
			if pt.upstream.Has(pl.Name) {
				continue
			}
			if g.enabled(pt.gate) {
				return &ConfigError{ExtensionPoint: pt.name, Plugin: pl.Name, Reason: fmt.Sprintf(
					"the plugin does not implement %s; that point only runs for pod groups, in a profile that enables GangScheduling, TopologyPlacementGenerator or PodGroupPodsCount, and this one schedules pods one at a time",
					pt.name)}
			}
			return &ConfigError{ExtensionPoint: pt.name, Plugin: pl.Name, Reason: fmt.Sprintf(
				"the plugin does not implement %s; that point only runs for pod groups, with the %s feature gate, off by default in Kubernetes 1.37, and pods are scheduled one at a time here",
				pt.name, pt.gate)}
		}
	}
	return nil
}

// offByDefaultGate is, for one of upstream 1.37.2's plugins that its
// default profile adds only with a feature gate off by default, that gate.
// Upstream registers them whatever the gates, so a profile may name them,
// but they do nothing useful with the gate off. A profile may use them
// only with the gate on (WithWorkloadGates), DeferredPodScheduling never.
func offByDefaultGate(name string) (string, bool) {
	switch name {
	case "GangScheduling":
		return GenericWorkloadGate, true
	case "DeferredPodScheduling":
		return "InPlacePodVerticalScalingSchedulerPreemption", true
	case "TopologyPlacementGenerator", "PodGroupPodsCount":
		return TopologyAwareWorkloadSchedulingGate, true
	}
	return "", false
}

// unavailableReason says why a plugin name does not resolve, if it does
// not: for an upstream plugin only used with a gate that is off, the
// gate, whether or not a plugin of that name is registered.
func unavailableReason(r Registry, name string, g WorkloadGates) (string, bool) {
	if gate, ok := offByDefaultGate(name); ok && !g.enabled(gate) {
		return fmt.Sprintf("kube-scheduler 1.37.2 uses this plugin only with the %s feature gate, off by default; profile-scheduler refuses it rather than load it inert", gate), true
	}
	if _, ok := r[name]; !ok {
		return "no such plugin is registered", true
	}
	return "", false
}

// extensionPoints lists the points in upstream's order (the order of
// ListPlugins and of error checks).
var extensionPoints = []extensionPoint{
	{PreEnqueue, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PreEnqueue }, implements[framework.PreEnqueuePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.preEnqueuePlugins = append(f.preEnqueuePlugins, p.(framework.PreEnqueuePlugin))
		}},
	{QueueSort, func(p *configv1.Plugins) *configv1.PluginSet { return &p.QueueSort }, implements[framework.QueueSortPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.queueSortPlugins = append(f.queueSortPlugins, p.(framework.QueueSortPlugin))
		}},
	{PreFilter, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PreFilter }, implements[framework.PreFilterPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.preFilterPlugins = append(f.preFilterPlugins, p.(framework.PreFilterPlugin))
		}},
	{Filter, func(p *configv1.Plugins) *configv1.PluginSet { return &p.Filter }, implements[framework.FilterPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.filterPlugins = append(f.filterPlugins, p.(framework.FilterPlugin))
		}},
	{PostFilter, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PostFilter }, implements[framework.PostFilterPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.postFilterPlugins = append(f.postFilterPlugins, p.(framework.PostFilterPlugin))
		}},
	{PreScore, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PreScore }, implements[framework.PreScorePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.preScorePlugins = append(f.preScorePlugins, p.(framework.PreScorePlugin))
		}},
	{Score, func(p *configv1.Plugins) *configv1.PluginSet { return &p.Score }, implements[framework.ScorePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.scorePlugins = append(f.scorePlugins, p.(framework.ScorePlugin))
		}},
	{Reserve, func(p *configv1.Plugins) *configv1.PluginSet { return &p.Reserve }, implements[framework.ReservePlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.reservePlugins = append(f.reservePlugins, p.(framework.ReservePlugin))
		}},
	{Permit, func(p *configv1.Plugins) *configv1.PluginSet { return &p.Permit }, implements[framework.PermitPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.permitPlugins = append(f.permitPlugins, p.(framework.PermitPlugin))
		}},
	{PreBind, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PreBind }, implements[framework.PreBindPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.preBindPlugins = append(f.preBindPlugins, p.(framework.PreBindPlugin))
		}},
	{Bind, func(p *configv1.Plugins) *configv1.PluginSet { return &p.Bind }, implements[framework.BindPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.bindPlugins = append(f.bindPlugins, p.(framework.BindPlugin))
		}},
	{PostBind, func(p *configv1.Plugins) *configv1.PluginSet { return &p.PostBind }, implements[framework.PostBindPlugin],
		func(f *frameworkImpl, p framework.Plugin) {
			f.postBindPlugins = append(f.postBindPlugins, p.(framework.PostBindPlugin))
		}},
}

// enabledNames returns every plugin name enabled in plugins' multiPoint
// or at one of points.
func enabledNames(plugins *configv1.Plugins, points []extensionPoint) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range plugins.MultiPoint.Enabled {
		out.Insert(p.Name)
	}
	for _, e := range points {
		for _, p := range e.set(plugins).Enabled {
			out.Insert(p.Name)
		}
	}
	return out
}

// resolvePoint returns the plugins that run at e, in order, following
// upstream's expansion of multiPoint: plugins enabled at e that also appear
// in multiPoint come first (in e's order, with e's settings), then the
// remaining multiPoint plugins that implement e and are not disabled there,
// then the rest of e's own list. A "*" in e's disabled list suppresses the
// multiPoint expansion at e.
func resolvePoint(e extensionPoint, plugins *configv1.Plugins, instances map[string]framework.Plugin) ([]string, error) {
	set := e.set(plugins)
	specific := make([]string, 0, len(set.Enabled))
	specificSet := sets.New[string]()
	for _, p := range set.Enabled {
		pl, ok := instances[p.Name]
		if !ok {
			return nil, &ConfigError{ExtensionPoint: e.name, Plugin: p.Name, Reason: "no such plugin is registered"}
		}
		if !e.implements(pl) {
			return nil, &ConfigError{ExtensionPoint: e.name, Plugin: p.Name, Reason: fmt.Sprintf("the plugin does not implement %s", e.name)}
		}
		if specificSet.Has(p.Name) {
			return nil, &ConfigError{ExtensionPoint: e.name, Plugin: p.Name, Reason: "enabled more than once"}
		}
		specificSet.Insert(p.Name)
		specific = append(specific, p.Name)
	}

	disabled := sets.New[string]()
	for _, p := range set.Disabled {
		disabled.Insert(p.Name)
	}
	if disabled.Has("*") {
		return specific, nil
	}

	overrides := sets.New[string]()
	var fromMulti []string
	multiSet := sets.New[string]()
	for _, p := range plugins.MultiPoint.Enabled {
		pl := instances[p.Name] // existence was checked for MultiPoint up front
		if !e.implements(pl) || disabled.Has(p.Name) {
			continue
		}
		if specificSet.Has(p.Name) {
			overrides.Insert(p.Name)
			continue
		}
		if multiSet.Has(p.Name) {
			return nil, &ConfigError{ExtensionPoint: MultiPoint, Plugin: p.Name, Reason: fmt.Sprintf("enabled more than once (at %s)", e.name)}
		}
		multiSet.Insert(p.Name)
		fromMulti = append(fromMulti, p.Name)
	}
	out := make([]string, 0, len(specific)+len(fromMulti))
	for _, n := range specific {
		if overrides.Has(n) {
			out = append(out, n)
		}
	}
	out = append(out, fromMulti...)
	for _, n := range specific {
		if !overrides.Has(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// maxTotalScore is framework.MaxTotalScore; a variable only so tests can
// reach the overflow rule without millions of plugins.
var maxTotalScore = framework.MaxTotalScore

// scoreWeights returns the weight of each plugin that runs at a scoring
// point (Score or PlacementScore). A weight set at the point wins over one
// set in multiPoint; unset means 1. The sum of weight × MaxScore must fit
// in int64.
func scoreWeights(point string, pointEnabled, multiPointEnabled []configv1.Plugin, names []string) (map[string]int64, error) {
	configured := map[string]*int32{}
	for _, list := range [][]configv1.Plugin{pointEnabled, multiPointEnabled} {
		for _, p := range list {
			if _, ok := configured[p.Name]; !ok {
				configured[p.Name] = p.Weight
			}
		}
	}
	weights := make(map[string]int64, len(names))
	var total int64
	for _, name := range names {
		w := int64(1)
		if p := configured[name]; p != nil && *p != 0 {
			w = int64(*p)
		}
		if w < 0 {
			return nil, &ConfigError{ExtensionPoint: point, Plugin: name, Reason: fmt.Sprintf("weight %d is negative", w)}
		}
		if w*framework.MaxScore > maxTotalScore-total {
			return nil, &ConfigError{ExtensionPoint: point, Plugin: name, Reason: fmt.Sprintf("weight %d makes the total score of %s plugins overflow int64", w, point)}
		}
		total += w * framework.MaxScore
		weights[name] = w
	}
	return weights, nil
}

func pluginNames[T framework.Plugin](ps []T) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name()
	}
	return strings.Join(names, ", ")
}

// EnabledPlugins returns the names of the plugins a profile with plugins
// custom enables at some extension point once merged onto defaults, as
// NewFramework merges them.
func EnabledPlugins(defaults, custom *configv1.Plugins) sets.Set[string] {
	if defaults == nil {
		defaults = &configv1.Plugins{}
	}
	return enabledNames(mergePlugins(defaults.DeepCopy(), custom.DeepCopy()), extensionPoints)
}
