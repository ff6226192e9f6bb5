package framework

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Default requests the scheduler assumes for a container that sets none, so
// that many zero-request pods do not pile onto one node (NonZeroRequested).
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MB
)

// Resource is a set of compute resources in the units the scheduler compares
// (milli-CPU, bytes, pod count); held as integers so Fit checks do no
// resource.Quantity arithmetic.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is Node.Status.Allocatable.Pods().
	AllowedPodNumber int
	// ScalarResources holds extended resources, hugepages and attachable volumes.
	ScalarResources map[v1.ResourceName]int64
}

// NewResource creates a Resource from a ResourceList.
func NewResource(rl v1.ResourceList) *Resource {
	r := &Resource{}
	r.Add(rl)
	return r
}

// Add adds rl into r.
func (r *Resource) Add(rl v1.ResourceList) {
	if r == nil {
		return
	}
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.Memory += q.Value()
		case v1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		default:
			if IsScalarResourceName(name) {
				r.AddScalar(name, q.Value())
			}
		}
	}
}

// Clone returns a deep copy of r.
func (r *Resource) Clone() *Resource {
	if r == nil {
		return nil
	}
	out := &Resource{
		MilliCPU:         r.MilliCPU,
		Memory:           r.Memory,
		EphemeralStorage: r.EphemeralStorage,
		AllowedPodNumber: r.AllowedPodNumber,
	}
	if r.ScalarResources != nil {
		out.ScalarResources = make(map[v1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			out.ScalarResources[k] = v
		}
	}
	return out
}

// AddScalar adds quantity to a scalar resource.
func (r *Resource) AddScalar(name v1.ResourceName, quantity int64) {
	r.SetScalar(name, r.ScalarResources[name]+quantity)
}

// SetScalar sets a scalar resource, allocating the map lazily.
func (r *Resource) SetScalar(name v1.ResourceName, quantity int64) {
	if r.ScalarResources == nil {
		r.ScalarResources = map[v1.ResourceName]int64{}
	}
	r.ScalarResources[name] = quantity
}

// SetMaxResource sets each resource of r to the max of itself and rl.
func (r *Resource) SetMaxResource(rl v1.ResourceList) {
	if r == nil {
		return
	}
	for name, q := range rl {
		switch name {
		case v1.ResourceMemory:
			r.Memory = max(r.Memory, q.Value())
		case v1.ResourceCPU:
			r.MilliCPU = max(r.MilliCPU, q.MilliValue())
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = max(r.EphemeralStorage, q.Value())
		default:
			if IsScalarResourceName(name) {
				r.SetScalar(name, max(r.ScalarResources[name], q.Value()))
			}
		}
	}
}

// IsScalarResourceName reports whether name is tracked in
// Resource.ScalarResources: extended resources, hugepages, prefixed native
// resources and attachable volumes (same rule as upstream).
func IsScalarResourceName(name v1.ResourceName) bool {
	return IsExtendedResourceName(name) || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) ||
		strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(string(name), v1.ResourceAttachableVolumesPrefix)
}

// IsExtendedResourceName reports whether name is a fully-qualified resource
// outside the kubernetes.io namespace and not a requests.* quota name.
func IsExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	isNative := !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix)
	if isNative || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(fmt.Sprintf("%s%s", v1.DefaultResourceRequestsPrefix, s))) == 0
}

// IsDRAExtendedResourceName reports whether name may be an extended
// resource backed by DRA: an extended resource name, or the implicit
// deviceclass.resource.kubernetes.io/<class> name of a DeviceClass, which
// IsExtendedResourceName leaves out (same rule as upstream).
func IsDRAExtendedResourceName(name v1.ResourceName) bool {
	return IsExtendedResourceName(name) || strings.HasPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
}
