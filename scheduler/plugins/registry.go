// Package plugins assembles the built-in plugins: the in-tree registry that
// profiles draw from, and the default profile, which is kube-scheduler
// 1.37's default profile restricted to the plugins built so far.
//
// Both come from one ordered table, inTree. To add a plugin, give its row
// a factory (and args validation); a row of upstream's default profile then
// joins the default profile at its upstream position and weight, and leaves
// the list of omitted default plugins.
package plugins

import (
	"context"
	"fmt"
	"slices"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/balancedallocation"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultpreemption"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/deferredpodscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/gangscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/imagelocality"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/internal/feature"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/interpodaffinity"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeaffinity"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodedeclaredfeatures"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodename"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeports"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/noderesources"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodeunschedulable"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodevolumelimits"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/podgrouppodscount"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/podtopologyspread"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/schedulinggates"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/tainttoleration"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/topologyaware"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/unsupportedfeatures"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/volumebinding"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/volumerestrictions"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/volumezone"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// inDefault says whether and why a plugin is in the default profile.
type inDefault int

const (
	// notDefault plugins are available to profiles that name them.
	notDefault inDefault = iota
	// upstreamDefault plugins are in kube-scheduler's default profile;
	// when not built yet they are reported by OmittedDefaultPlugins.
	upstreamDefault
	// projectDefault plugins are in the default profile of
	// profile-scheduler only.
	projectDefault
)

// plugin is one row of the in-tree table.
type plugin struct {
	name string
	// factory builds the plugin; nil means it is not built yet.
	factory runtime.Factory
	// args validates the plugin's args. For plugins that exist upstream
	// the runtime supplies upstream's args type and defaults.
	args runtime.ArgsSpec
	def  inDefault
	// weight is the plugin's Score weight in the default profile (0: unset).
	weight int32
}

// inTree lists the built-in plugins and upstream's default plugins, in the
// order of kube-scheduler 1.37.2's default multiPoint list (including
// DynamicResources and NodeDeclaredFeatures, which its default feature
// gates add), with upstream's weights. The plugins its default list adds
// only with a gate that is off by default are at the place it adds them,
// and not in the default profile.
var inTree = []plugin{
	{name: schedulinggates.Name, factory: schedulinggates.New, def: upstreamDefault},
	{name: queuesort.Name, factory: queuesort.New, def: upstreamDefault},
	// First among the filters so a pod needing a missing plugin is refused
	// before any per-node work.
	{name: unsupportedfeatures.Name, def: projectDefault}, // factory set in NewInTreeRegistry
	{name: nodename.Name, factory: nodename.New, def: upstreamDefault},
	{name: nodeunschedulable.Name, factory: nodeunschedulable.New, def: upstreamDefault},
	{name: tainttoleration.Name, factory: tainttoleration.New, def: upstreamDefault, weight: 3},
	{name: nodeaffinity.Name, factory: nodeaffinity.New, args: validate(nodeaffinity.ValidateArgs), def: upstreamDefault, weight: 2},
	{name: nodeports.Name, factory: nodeports.New, def: upstreamDefault},
	// Upstream's default list has it here with the
	// InPlacePodVerticalScalingSchedulerPreemption gate.
	{name: deferredpodscheduling.Name, factory: withFeatures(deferredpodscheduling.New)},
	{name: noderesources.Name, factory: noderesources.New, args: validate(noderesources.ValidateFitArgs), def: upstreamDefault, weight: 1},
	{name: volumerestrictions.Name, factory: volumerestrictions.New, def: upstreamDefault},
	{name: nodevolumelimits.Name, factory: nodevolumelimits.New, def: upstreamDefault},
	{name: volumebinding.Name, factory: volumebinding.New, args: validate(volumebinding.ValidateArgs), def: upstreamDefault},
	{name: volumezone.Name, factory: volumezone.New, def: upstreamDefault},
	{name: podtopologyspread.Name, factory: podtopologyspread.New, args: validate(podtopologyspread.ValidateArgs), def: upstreamDefault, weight: 2},
	{name: interpodaffinity.Name, factory: interpodaffinity.New, args: validate(interpodaffinity.ValidateArgs), def: upstreamDefault, weight: 2},
	{name: dynamicresources.Name, factory: dynamicresources.New, args: validate(dynamicresources.ValidateArgs), def: upstreamDefault, weight: 2},
	{name: defaultpreemption.Name, factory: withFeatures(defaultpreemption.New), args: validate(defaultpreemption.ValidateArgs), def: upstreamDefault},
	{name: balancedallocation.Name, factory: balancedallocation.New, args: validate(balancedallocation.ValidateArgs), def: upstreamDefault, weight: 1},
	{name: imagelocality.Name, factory: imagelocality.New, def: upstreamDefault, weight: 1},
	{name: defaultbinder.Name, factory: defaultbinder.New, def: upstreamDefault},
	{name: nodedeclaredfeatures.Name, factory: nodedeclaredfeatures.New, def: upstreamDefault},
	// Upstream's default list ends with GangScheduling with the
	// GenericWorkload gate, then with the TopologyAwareWorkloadScheduling
	// gate TopologyPlacementGenerator and PodGroupPodsCount (weight 1).
	{name: gangscheduling.Name, factory: gangscheduling.New},
	{name: topologyaware.Name, factory: topologyaware.New},
	{name: podgrouppodscount.Name, factory: podgrouppodscount.New},
}

// withFeatures adapts a factory that reads feature gates to
// runtime.Factory, as upstream's runtime.FactoryAdapter does. The in-tree
// plugins run with kube-scheduler 1.37.2's default gates (the zero
// feature.Features), except that EnableGenericWorkload follows the
// instance's workload-awareness: upstream turns GenericWorkload on for the
// whole scheduler, here only the profiles that opted in get it, and the
// others behave as without the gate.
func withFeatures(f func(context.Context, k8sruntime.Object, framework.Handle, feature.Features) (framework.Plugin, error)) runtime.Factory {
	return func(ctx context.Context, args k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
		return f(ctx, args, h, feature.Features{EnableGenericWorkload: h.WorkloadAware()})
	}
}

// validate adapts a typed args validation to runtime.ArgsSpec.
func validate[T k8sruntime.Object](fn func(T) error) runtime.ArgsSpec {
	return runtime.ArgsSpec{Validate: func(obj k8sruntime.Object) error {
		args, ok := obj.(T)
		if !ok {
			return fmt.Errorf("want args of type %T, got %T", *new(T), obj)
		}
		return fn(args)
	}}
}

func (p *plugin) built() bool {
	return p.factory != nil || p.name == unsupportedfeatures.Name
}

// NewInTreeRegistry returns a registry holding every built-in plugin under
// its upstream name. Callers may merge more plugins into it.
func NewInTreeRegistry() runtime.Registry {
	r := runtime.Registry{}
	for i := range inTree {
		p := &inTree[i]
		if !p.built() {
			continue
		}
		factory := p.factory
		if p.name == unsupportedfeatures.Name {
			// The guard tells "not built yet" from "not in this profile" by
			// what this registry holds, including plugins merged later.
			factory = unsupportedfeatures.NewFactory(func(name string) bool {
				_, ok := r[name]
				return ok
			})
		}
		if err := r.Register(p.name, factory, p.args); err != nil {
			// The table is static; a duplicate is a programming error.
			panic(err)
		}
	}
	return r
}

// DefaultPlugins returns the plugins of the default profile as a multiPoint
// list: upstream's default plugins that are built, in upstream's order and
// with upstream's weights, plus UnsupportedFeatures. A SchedulingProfile
// naming no plugins runs exactly these.
func DefaultPlugins() *configv1.Plugins {
	out := &configv1.Plugins{}
	for _, p := range inTree {
		if p.def == notDefault || !p.built() {
			continue
		}
		entry := configv1.Plugin{Name: p.name}
		if p.weight != 0 {
			w := p.weight
			entry.Weight = &w
		}
		out.MultiPoint.Enabled = append(out.MultiPoint.Enabled, entry)
	}
	return out
}

// OmittedDefaultPlugins returns the plugins of kube-scheduler's default
// profile that profile-scheduler does not provide yet, in upstream's order.
func OmittedDefaultPlugins() []string {
	var out []string
	for _, p := range inTree {
		if p.def == upstreamDefault && !p.built() {
			out = append(out, p.name)
		}
	}
	return out
}

// OmittedDefaultPluginsFor returns the omitted default plugins that
// kube-scheduler would run for profile: those the profile does not disable
// at multiPoint, by name or with "*". It is what a profile's
// status.omittedDefaultPlugins reports.
func OmittedDefaultPluginsFor(profile *configv1.KubeSchedulerProfile) []string {
	omitted := OmittedDefaultPlugins()
	if profile == nil || profile.Plugins == nil {
		return omitted
	}
	disabled := sets.New[string]()
	for _, p := range profile.Plugins.MultiPoint.Disabled {
		disabled.Insert(p.Name)
	}
	if disabled.Has("*") {
		return nil
	}
	return slices.DeleteFunc(omitted, disabled.Has)
}
