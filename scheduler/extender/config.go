package extender

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// New validates a profile's extenders as upstream validates a
// KubeSchedulerConfiguration's, refuses those policy does not allow, then
// builds their clients, in order. observer, if not nil, follows whether
// the non-ignorable ones can be reached, and which replies were refused.
func New(cfgs []configv1.Extender, policy Policy, observer Observer) ([]*Extender, error) {
	path := field.NewPath("extenders")
	errs := Validate(path, cfgs)
	errs = append(errs, policy.validate(path, cfgs)...)
	if err := errs.ToAggregate(); err != nil {
		return nil, err
	}
	out := make([]*Extender, 0, len(cfgs))
	for i := range cfgs {
		e, err := newExtender(&cfgs[i], policy, observer)
		if err != nil {
			return nil, fmt.Errorf("extenders[%d]: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Validate is upstream's validateExtenders: a prioritizing extender needs a
// positive weight, at most one extender binds, and managed resources are
// distinct extended resource names. It also refuses a negative httpTimeout,
// which upstream's HTTP client would treat as no timeout at all, and one
// above MaxHTTPTimeout or adding up to more than MaxCycleTime, which
// upstream allows but which would let one profile stall the loop every
// profile shares.
func Validate(path *field.Path, cfgs []configv1.Extender) field.ErrorList {
	var errs field.ErrorList
	binders := 0
	managed := sets.New[string]()
	for i := range cfgs {
		e := &cfgs[i]
		p := path.Index(i)
		if e.URLPrefix == "" {
			errs = append(errs, field.Required(p.Child("urlPrefix"), ""))
		}
		if len(e.PrioritizeVerb) > 0 && e.Weight <= 0 {
			errs = append(errs, field.Invalid(p.Child("weight"), e.Weight, "must have a positive weight applied to it"))
		}
		if e.HTTPTimeout.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("httpTimeout"), e.HTTPTimeout.Duration.String(), "must not be negative"))
		}
		if e.BindVerb != "" {
			binders++
		}
		for j, r := range e.ManagedResources {
			rp := p.Child("managedResources").Index(j).Child("name")
			errs = append(errs, validateExtendedResourceName(rp, v1.ResourceName(r.Name))...)
			if managed.Has(r.Name) {
				errs = append(errs, field.Invalid(rp, r.Name, "duplicate extender managed resource name"))
			}
			managed.Insert(r.Name)
		}
	}
	if binders > 1 {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("found %d extenders implementing bind", binders), "only one extender can implement bind"))
	}
	return append(errs, validateTimeouts(path, cfgs)...)
}

// validateExtendedResourceName is upstream's check of a managed resource.
func validateExtendedResourceName(path *field.Path, name v1.ResourceName) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !framework.IsExtendedResourceName(name) {
		errs = append(errs, field.Invalid(path, string(name), "is an invalid extended resource name"))
	}
	return errs
}
