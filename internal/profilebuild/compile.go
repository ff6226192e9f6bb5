package profilebuild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Environment is where instances are built: the scheduling loop (the
// scheduler's *Scheduler), or Offline.
type Environment interface {
	// Registry holds the plugins profiles may use.
	Registry() runtime.Registry
	// FrameworkOptions wire an instance serving schedulerName to the
	// environment: its client, informers, snapshot, queue and recorder.
	FrameworkOptions(schedulerName string) []runtime.Option
	// Synced waits until what building an instance started in the
	// environment (informers plugin factories asked for) is ready.
	Synced(ctx context.Context) error
}

// BuildFunc builds an instance of an upstream profile; opts go after
// the environment's own. Errors from a profile the registry cannot build
// are *runtime.ConfigError, or several joined.
type BuildFunc func(ctx context.Context, profile *configv1.KubeSchedulerProfile, opts ...runtime.Option) (framework.Framework, error)

// Builder returns the BuildFunc of env. It is the only production call of
// runtime.NewFramework: the environment's options first, then the
// caller's.
func Builder(env Environment) BuildFunc {
	return func(ctx context.Context, profile *configv1.KubeSchedulerProfile, opts ...runtime.Option) (framework.Framework, error) {
		name := ""
		if profile != nil && profile.SchedulerName != nil {
			name = *profile.SchedulerName
		}
		fwk, err := runtime.NewFramework(ctx, env.Registry(), profile, append(env.FrameworkOptions(name), opts...)...)
		if err != nil {
			return nil, err
		}
		if err := env.Synced(ctx); err != nil {
			if cerr := fwk.Close(); cerr != nil {
				klog.FromContext(ctx).Error(cerr, "Closing an instance whose informers did not sync", "profile", name)
			}
			return nil, err
		}
		return fwk, nil
	}
}

// SecretReader reads the data of the Secret ref names, in the operator's
// namespace. Its error says what is missing and how to fix it; it makes
// the spec refused until the Secret is fixed.
type SecretReader func(ctx context.Context, ref SecretRef) (map[string][]byte, error)

// Compile builds the instance plan describes with build: the TLS
// material read through secrets (nil leaves it out, for checking a spec
// offline), then the plan's options (extenders, extender policy, workload
// gates, default plugins), then opts. It returns the instance, or every refusal of the
// spec: the plan's own, the Secrets', and what building found. A refused
// spec is still built, without what was refused, and the instance closed,
// so that one pass reports them all, wherever the spec is checked. An
// error is a failure that is not the spec's (informers that did not
// sync), worth retrying.
func Compile(ctx context.Context, build BuildFunc, plan *Plan, secrets SecretReader, opts ...runtime.Option) (framework.Framework, Refusals, error) {
	exts, unread := plan.ResolveExtenders(ctx, secrets)
	refusals := append(slices.Clone(plan.refusals), unread...)
	all := []runtime.Option{runtime.WithExtenders(exts), runtime.WithExtenderPolicy(plan.o.ExtenderPolicy), runtime.WithWorkloadGates(plan.o.WorkloadGates)}
	if plan.o.DefaultPlugins != nil {
		all = append(all, runtime.WithDefaultPlugins(plan.o.DefaultPlugins))
	}
	fwk, err := build(ctx, plan.Profile, append(all, opts...)...)
	if err != nil {
		built := configRefusals(plan.Profile, err)
		if len(built) == 0 {
			return nil, nil, err
		}
		return nil, append(refusals, built...), nil
	}
	if len(refusals) > 0 {
		if err := fwk.Close(); err != nil {
			klog.FromContext(ctx).Error(err, "Closing an instance built to check a refused spec", "schedulerName", plan.SchedulerName)
		}
		return nil, refusals, nil
	}
	return fwk, nil, nil
}

// ResolveExtenders returns the plan's extenders with the TLS material
// read through secrets (nil leaves it out), or why a Secret does not do.
func (plan *Plan) ResolveExtenders(ctx context.Context, secrets SecretReader) ([]configv1.Extender, Refusals) {
	exts := slices.Clone(plan.Extenders)
	if secrets == nil {
		return exts, nil
	}
	var refusals Refusals
	for _, ref := range plan.Secrets {
		data, err := secrets(ctx, ref)
		if err != nil {
			refusals = append(refusals, Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: ref.Field, Detail: err.Error()})
			continue
		}
		tls := *exts[ref.extender].TLSConfig
		if ref.ca {
			tls.CAData = data[ref.Keys[0]]
		} else {
			tls.CertData, tls.KeyData = data[ref.Keys[0]], data[ref.Keys[1]]
		}
		exts[ref.extender].TLSConfig = &tls
	}
	return exts, refusals
}

// configRefusals are the refusals of the config errors in err, none when
// err is not about the profile.
func configRefusals(profile *configv1.KubeSchedulerProfile, err error) Refusals {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var out Refusals
	for _, e := range errs {
		var ce *runtime.ConfigError
		if !errors.As(e, &ce) {
			continue
		}
		out = append(out, Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: configField(profile, ce), Detail: e.Error()})
	}
	return out
}

// configField is the path of the spec field a config error is about.
func configField(profile *configv1.KubeSchedulerProfile, ce *runtime.ConfigError) string {
	switch ce.ExtensionPoint {
	case "":
		if ce.Plugin == "" && strings.HasPrefix(ce.Reason, "percentageOfNodesToScore") {
			return "spec.percentageOfNodesToScore"
		}
		return "spec.plugins"
	case "Extenders":
		return "spec.extenders"
	case "PluginConfig":
		for i, pc := range profile.PluginConfig {
			if pc.Name == ce.Plugin {
				return fmt.Sprintf("spec.pluginConfig[%d]", i)
			}
		}
		return "spec.pluginConfig"
	}
	point := strings.ToLower(ce.ExtensionPoint[:1]) + ce.ExtensionPoint[1:]
	if profile.Plugins != nil {
		for _, set := range []struct {
			name string
			ps   configv1.PluginSet
		}{
			{"preEnqueue", profile.Plugins.PreEnqueue}, {"queueSort", profile.Plugins.QueueSort}, {"preFilter", profile.Plugins.PreFilter},
			{"filter", profile.Plugins.Filter}, {"postFilter", profile.Plugins.PostFilter}, {"preScore", profile.Plugins.PreScore},
			{"score", profile.Plugins.Score}, {"reserve", profile.Plugins.Reserve}, {"permit", profile.Plugins.Permit},
			{"preBind", profile.Plugins.PreBind}, {"bind", profile.Plugins.Bind}, {"postBind", profile.Plugins.PostBind},
			{"multiPoint", profile.Plugins.MultiPoint}, {"placementGenerate", profile.Plugins.PlacementGenerate},
			{"placementScore", profile.Plugins.PlacementScore}, {"podGroupPostFilter", profile.Plugins.PodGroupPostFilter},
		} {
			if set.name != point {
				continue
			}
			for i, p := range set.ps.Enabled {
				if p.Name == ce.Plugin {
					return fmt.Sprintf("spec.plugins.%s.enabled[%d]", point, i)
				}
			}
		}
	}
	return "spec.plugins." + point
}

// offline is an Environment that serves nothing: plugin factories get a
// client (maybe nil) and informers that are never started, so building
// costs no watch and no call.
type offline struct {
	registry  runtime.Registry
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
}

// Offline is an environment for checking specs: instances built in it
// are closed at once. client is handed to plugin factories, which may
// make informers on it; nil does for checking without a cluster.
func Offline(registry runtime.Registry, client kubernetes.Interface) Environment {
	return &offline{registry: registry, client: client, informers: informers.NewSharedInformerFactory(client, 0)}
}

func (o *offline) Registry() runtime.Registry { return o.registry }

func (o *offline) FrameworkOptions(string) []runtime.Option {
	return []runtime.Option{
		runtime.WithClientSet(o.client),
		runtime.WithInformerFactory(o.informers),
		// Plugins keep the lister to read in their cycles; an empty one
		// does for building.
		runtime.WithSnapshotSharedLister(cache.NewEmptySnapshot()),
		// GangScheduling keeps the cache's pod groups; an empty cache
		// does for building.
		runtime.WithPodGroupManager(cache.New(cache.WithPodGroups(true))),
	}
}

func (o *offline) Synced(context.Context) error { return nil }

// Checker checks profiles as the controller compiles them, without
// serving them: for the admission webhook and the CLI. It is safe for
// concurrent use.
type Checker struct {
	planner *Planner
	build   BuildFunc
}

// NewChecker returns a Checker that plans with planner and builds in env.
func NewChecker(planner *Planner, env Environment) *Checker {
	return &Checker{planner: planner, build: Builder(env)}
}

// Check returns every reason sp may not serve, none when it may. It
// builds an instance of the spec and closes it, so every plugin name,
// extension point, args object and extender is checked as when the
// instance that serves is built; the Secrets extenders reference are not
// read.
func (c *Checker) Check(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) Refusals {
	plan, _ := c.planner.Plan(sp)
	fwk, refusals, err := Compile(ctx, c.build, plan, nil)
	if err != nil {
		return Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Detail: err.Error()}}
	}
	if fwk != nil {
		if err := fwk.Close(); err != nil {
			klog.FromContext(ctx).Error(err, "Closing an instance built to check a profile", "schedulingProfile", klog.KObj(sp))
		}
	}
	return refusals
}
