// Package v1alpha1 holds the API of profile-scheduler: SchedulingProfile, a
// cluster-scoped resource whose spec is an upstream KubeSchedulerProfile, and
// WaitingPod, the visible and decidable form of a pod held at Permit.
//
// The package holds types, condition types and reason constants only; the
// behaviour lives in controllers/ and scheduler/.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.schedprofiles.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "scheduling.schedprofiles.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&SchedulingProfile{}, &SchedulingProfileList{},
		&WaitingPod{}, &WaitingPodList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
