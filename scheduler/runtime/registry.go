package runtime

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Factory builds a plugin. args is the plugin's decoded, defaulted and
// validated args object (the type ArgsSpec.New returns), nil for a plugin
// without args, or *runtime.Unknown holding the raw args of a plugin that
// registered no ArgsSpec (decode it with DecodeInto). ctx is cancelled when
// the instance is closed; plugins may tie background work to it.
type Factory = func(ctx context.Context, args runtime.Object, h framework.Handle) (framework.Plugin, error)

// ArgsSpec describes a plugin's args type so the runtime can decode,
// default and validate pluginConfig[].args before calling the factory.
// The zero ArgsSpec means the plugin takes no typed args.
type ArgsSpec struct {
	// New returns an empty args object, e.g. &configv1.NodeResourcesFitArgs{}.
	New func() runtime.Object
	// Default fills unset fields. It is also applied when the profile gives
	// no args, so a factory always sees defaulted args.
	Default func(runtime.Object)
	// Validate rejects args the plugin cannot work with.
	Validate func(runtime.Object) error
}

// Registration is one plugin known to a Registry.
type Registration struct {
	Factory Factory
	Args    ArgsSpec
}

// Registry maps plugin names to their factories. Build it before creating
// instances and do not modify it while NewFramework may run concurrently.
type Registry map[string]Registration

// Register adds a plugin. A plugin that exists upstream and registers an
// ArgsSpec without New gets upstream's args type and defaults for its name
// (see UpstreamArgs); its Validate, if any, is kept. Registering a name
// twice is an error.
func (r Registry) Register(name string, factory Factory, args ArgsSpec) error {
	if _, ok := r[name]; ok {
		return fmt.Errorf("a plugin named %v already exists", name)
	}
	if factory == nil {
		return fmt.Errorf("plugin %v: nil factory", name)
	}
	if args.New == nil {
		if up, ok := UpstreamArgs(name); ok {
			up.Validate = args.Validate
			args = up
		}
	}
	r[name] = Registration{Factory: factory, Args: args}
	return nil
}

// Merge registers every plugin of in; a name present in both is an error.
func (r Registry) Merge(in Registry) error {
	for name, reg := range in {
		if _, ok := r[name]; ok {
			return fmt.Errorf("a plugin named %v already exists", name)
		}
		r[name] = reg
	}
	return nil
}

// DecodeInto decodes raw args (a *runtime.Unknown holding JSON or YAML) into
// into. It is for plugins that registered no ArgsSpec.
func DecodeInto(obj runtime.Object, into any) error {
	if obj == nil {
		return nil
	}
	u, ok := obj.(*runtime.Unknown)
	if !ok {
		return fmt.Errorf("want args of type runtime.Unknown, got %T", obj)
	}
	if u.Raw == nil {
		return nil
	}
	switch u.ContentType {
	case runtime.ContentTypeJSON, "":
		return json.Unmarshal(u.Raw, into)
	case runtime.ContentTypeYAML:
		return yaml.Unmarshal(u.Raw, into)
	default:
		return fmt.Errorf("not supported content type %s", u.ContentType)
	}
}
