// Package v1alpha1 is the PodGroup API of kubernetes-sigs/scheduler-plugins
// (scheduling.x-k8s.io/v1alpha1), field for field, so that PodGroup
// manifests and training operators written for scheduler-plugins'
// Coscheduling work unchanged with profile-scheduler. Pods join a group with
// the label PodGroupLabel.
//
// Where this API adds to upstream's, it adds status only (scheduled, waiting,
// conditions): a spec written for either scheduler means the same to both.
//
// The package holds types and constants only; the plugin lives in
// scheduler/plugins/coscheduling and the status controller in controllers/.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of PodGroup.
	GroupVersion = schema.GroupVersion{Group: "scheduling.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodGroup{}, &PodGroupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
