package runtime

import (
	"errors"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
)

// Upstream plugin names that take args; the args kind is the name + "Args".
const (
	nodeResourcesFit                = "NodeResourcesFit"
	nodeResourcesBalancedAllocation = "NodeResourcesBalancedAllocation"
	nodeAffinity                    = "NodeAffinity"
	podTopologySpread               = "PodTopologySpread"
	interPodAffinity                = "InterPodAffinity"
	defaultPreemption               = "DefaultPreemption"
	volumeBinding                   = "VolumeBinding"
	dynamicResources                = "DynamicResources"
)

// UpstreamArgs returns the ArgsSpec of an upstream plugin that takes args:
// the k8s.io/kube-scheduler/config/v1 type and upstream's v1 defaults.
// Validate is left nil; plugins port upstream's validation with their code.
func UpstreamArgs(pluginName string) (ArgsSpec, bool) {
	switch pluginName {
	case nodeResourcesFit:
		return typedArgs(func() *configv1.NodeResourcesFitArgs { return &configv1.NodeResourcesFitArgs{} }, SetDefaultsNodeResourcesFitArgs), true
	case nodeResourcesBalancedAllocation:
		return typedArgs(func() *configv1.NodeResourcesBalancedAllocationArgs {
			return &configv1.NodeResourcesBalancedAllocationArgs{}
		}, SetDefaultsNodeResourcesBalancedAllocationArgs), true
	case nodeAffinity:
		return typedArgs(func() *configv1.NodeAffinityArgs { return &configv1.NodeAffinityArgs{} }, nil), true
	case podTopologySpread:
		return typedArgs(func() *configv1.PodTopologySpreadArgs { return &configv1.PodTopologySpreadArgs{} }, SetDefaultsPodTopologySpreadArgs), true
	case interPodAffinity:
		return typedArgs(func() *configv1.InterPodAffinityArgs { return &configv1.InterPodAffinityArgs{} }, SetDefaultsInterPodAffinityArgs), true
	case defaultPreemption:
		return typedArgs(func() *configv1.DefaultPreemptionArgs { return &configv1.DefaultPreemptionArgs{} }, SetDefaultsDefaultPreemptionArgs), true
	case volumeBinding:
		return typedArgs(func() *configv1.VolumeBindingArgs { return &configv1.VolumeBindingArgs{} }, SetDefaultsVolumeBindingArgs), true
	case dynamicResources:
		return typedArgs(func() *configv1.DynamicResourcesArgs { return &configv1.DynamicResourcesArgs{} }, SetDefaultsDynamicResourcesArgs), true
	}
	return ArgsSpec{}, false
}

// TypedArgs builds an ArgsSpec from typed functions, sparing plugins the
// type assertions. def and validate may be nil.
func TypedArgs[T runtime.Object](newFn func() T, def func(T), validate func(T) error) ArgsSpec {
	spec := typedArgs(newFn, def)
	if validate != nil {
		spec.Validate = func(o runtime.Object) error {
			t, ok := o.(T)
			if !ok {
				return fmt.Errorf("want args of type %T, got %T", *new(T), o)
			}
			return validate(t)
		}
	}
	return spec
}

func typedArgs[T runtime.Object](newFn func() T, def func(T)) ArgsSpec {
	spec := ArgsSpec{New: func() runtime.Object { return newFn() }}
	if def != nil {
		spec.Default = func(o runtime.Object) {
			if t, ok := o.(T); ok {
				def(t)
			}
		}
	}
	return spec
}

var defaultResourceSpec = []configv1.ResourceSpec{
	{Name: string(v1.ResourceCPU), Weight: 1},
	{Name: string(v1.ResourceMemory), Weight: 1},
}

// SetDefaultsNodeResourcesFitArgs applies upstream's v1 defaults.
func SetDefaultsNodeResourcesFitArgs(obj *configv1.NodeResourcesFitArgs) {
	if obj.ScoringStrategy == nil {
		obj.ScoringStrategy = &configv1.ScoringStrategy{
			Type:      configv1.LeastAllocated,
			Resources: append([]configv1.ResourceSpec(nil), defaultResourceSpec...),
		}
	}
	if len(obj.ScoringStrategy.Resources) == 0 {
		obj.ScoringStrategy.Resources = append(obj.ScoringStrategy.Resources, defaultResourceSpec...)
	}
	for i := range obj.ScoringStrategy.Resources {
		if obj.ScoringStrategy.Resources[i].Weight == 0 {
			obj.ScoringStrategy.Resources[i].Weight = 1
		}
	}
}

// SetDefaultsNodeResourcesBalancedAllocationArgs applies upstream's v1 defaults.
func SetDefaultsNodeResourcesBalancedAllocationArgs(obj *configv1.NodeResourcesBalancedAllocationArgs) {
	if len(obj.Resources) == 0 {
		obj.Resources = append([]configv1.ResourceSpec(nil), defaultResourceSpec...)
		return
	}
	for i := range obj.Resources {
		if obj.Resources[i].Weight == 0 {
			obj.Resources[i].Weight = 1
		}
	}
}

// SetDefaultsPodTopologySpreadArgs applies upstream's v1 defaults.
func SetDefaultsPodTopologySpreadArgs(obj *configv1.PodTopologySpreadArgs) {
	if obj.DefaultingType == "" {
		obj.DefaultingType = configv1.SystemDefaulting
	}
}

// SetDefaultsInterPodAffinityArgs applies upstream's v1 defaults.
func SetDefaultsInterPodAffinityArgs(obj *configv1.InterPodAffinityArgs) {
	if obj.HardPodAffinityWeight == nil {
		obj.HardPodAffinityWeight = ptr.To[int32](1)
	}
}

// SetDefaultsDefaultPreemptionArgs applies upstream's v1 defaults.
func SetDefaultsDefaultPreemptionArgs(obj *configv1.DefaultPreemptionArgs) {
	if obj.MinCandidateNodesPercentage == nil {
		obj.MinCandidateNodesPercentage = ptr.To[int32](10)
	}
	if obj.MinCandidateNodesAbsolute == nil {
		obj.MinCandidateNodesAbsolute = ptr.To[int32](100)
	}
}

// SetDefaultsVolumeBindingArgs applies upstream's v1 defaults. Upstream
// defaults shape behind the StorageCapacityScoring gate, on since 1.37: the
// emptier a node's storage, the higher its score.
func SetDefaultsVolumeBindingArgs(obj *configv1.VolumeBindingArgs) {
	if obj.BindTimeoutSeconds == nil {
		obj.BindTimeoutSeconds = ptr.To[int64](600)
	}
	if len(obj.Shape) == 0 {
		obj.Shape = []configv1.UtilizationShapePoint{{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}}
	}
}

// SetDefaultsDynamicResourcesArgs applies upstream's v1 defaults with
// 1.37's default gates (DRASchedulerFilterTimeout, DRADeviceBindingConditions
// and DRAResourceClaimDeviceStatus on): a filter timeout of 10s and a
// binding timeout of 10 minutes.
func SetDefaultsDynamicResourcesArgs(obj *configv1.DynamicResourcesArgs) {
	if obj.FilterTimeout == nil {
		obj.FilterTimeout = &metav1.Duration{Duration: configv1.DynamicResourcesFilterTimeoutDefault}
	}
	if obj.BindingTimeout == nil {
		obj.BindingTimeout = &metav1.Duration{Duration: configv1.DynamicResourcesBindingTimeoutDefault}
	}
}

// decodeArgs turns pluginConfig[].args into what the factory receives.
func decodeArgs(raw *runtime.RawExtension, spec ArgsSpec) (runtime.Object, error) {
	hasRaw := raw != nil && (len(raw.Raw) > 0 || raw.Object != nil)
	if spec.New == nil {
		if !hasRaw {
			return nil, nil
		}
		if raw.Object != nil {
			return raw.Object, nil
		}
		data, err := utilyaml.ToJSON(raw.Raw)
		if err != nil {
			return nil, fmt.Errorf("decoding args: %w", err)
		}
		return &runtime.Unknown{Raw: data, ContentType: runtime.ContentTypeJSON}, nil
	}

	obj := spec.New()
	kind := reflect.TypeOf(obj).Elem().Name()
	if hasRaw {
		data := raw.Raw
		if raw.Object != nil {
			if u, ok := raw.Object.(*runtime.Unknown); ok {
				data = u.Raw
			} else if reflect.TypeOf(raw.Object) == reflect.TypeOf(obj) {
				obj = raw.Object.DeepCopyObject()
				data = nil
			} else {
				return nil, fmt.Errorf("args of type %T, want %s", raw.Object, kind)
			}
		}
		if data != nil {
			if err := strictDecode(data, kind, obj); err != nil {
				return nil, err
			}
		}
	}
	if _, isUpstream := UpstreamArgs(kindToPlugin(kind)); isUpstream {
		// Upstream stamps the group/version on defaulted args; plugins
		// ported from upstream may rely on it (e.g. printing the config).
		obj.GetObjectKind().SetGroupVersionKind(configv1.SchemeGroupVersion.WithKind(kind))
	}
	if spec.Default != nil {
		spec.Default(obj)
	}
	if spec.Validate != nil {
		if err := spec.Validate(obj); err != nil {
			return nil, fmt.Errorf("invalid args: %w", err)
		}
	}
	return obj, nil
}

func kindToPlugin(kind string) string {
	if len(kind) > len("Args") {
		return kind[:len(kind)-len("Args")]
	}
	return kind
}

// strictDecode decodes JSON or YAML into obj, refusing unknown and
// duplicate fields the way upstream's config loader does: a typo in a
// profile must not be silently ignored.
func strictDecode(data []byte, kind string, obj runtime.Object) error {
	data, err := utilyaml.ToJSON(data)
	if err != nil {
		return fmt.Errorf("decoding args: %w", err)
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &tm); err != nil {
		return fmt.Errorf("decoding args: %w", err)
	}
	if tm.Kind != "" && tm.Kind != kind {
		return fmt.Errorf("args have kind %q, want %q", tm.Kind, kind)
	}
	if tm.APIVersion != "" {
		if _, up := UpstreamArgs(kindToPlugin(kind)); up {
			if gv, err := schema.ParseGroupVersion(tm.APIVersion); err != nil || gv != configv1.SchemeGroupVersion {
				return fmt.Errorf("args have apiVersion %q, want %q", tm.APIVersion, configv1.SchemeGroupVersion.String())
			}
		}
	}
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decoding args: %w", err)
	}
	if len(strictErrs) > 0 {
		return fmt.Errorf("decoding args: %w", errors.Join(strictErrs...))
	}
	return nil
}
