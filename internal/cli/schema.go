package cli

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/config/crd"
)

// schemaValidator checks an object against the SchedulingProfile CRD's
// OpenAPI schema and CEL rules with the API server's own strategy, so
// that a manifest passes offline exactly when it passes at apply time.
type schemaValidator struct {
	strategy interface {
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	}
}

func newSchemaValidator() (*schemaValidator, error) {
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(crd.SchedulingProfiles), &def); err != nil {
		return nil, fmt.Errorf("reading the SchedulingProfile CRD: %w", err)
	}
	for _, v := range def.Spec.Versions {
		if v.Name != schedulingv1alpha1.GroupVersion.Version {
			continue
		}
		var props apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &props, nil); err != nil {
			return nil, err
		}
		structural, err := structuralschema.NewStructural(&props)
		if err != nil {
			return nil, err
		}
		sv, _, err := apiextensionsvalidation.NewSchemaValidator(&props)
		if err != nil {
			return nil, err
		}
		gvk := schedulingv1alpha1.GroupVersion.WithKind("SchedulingProfile")
		s := customresource.NewStrategy(nil, false, gvk, sv, nil, structural, nil, nil, nil)
		return &schemaValidator{strategy: s}, nil
	}
	return nil, fmt.Errorf("the SchedulingProfile CRD has no version %s", schedulingv1alpha1.GroupVersion.Version)
}

// validate returns what the API server would refuse u for on create.
func (s *schemaValidator) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	return s.strategy.Validate(ctx, u)
}
