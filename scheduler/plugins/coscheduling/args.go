package coscheduling

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaults of CoschedulingArgs, as upstream's.
const (
	DefaultPermitWaitingTimeSeconds int64 = 60
	DefaultPodGroupBackoffSeconds   int64 = 0
	DefaultPodGroupRejectPercentage int32 = 10
)

// CoschedulingArgs configures the Coscheduling plugin; the fields, their
// JSON names and defaults are scheduler-plugins' v1 CoschedulingArgs.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PermitWaitingTimeSeconds is the waiting timeout in seconds; default 60.
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// PodGroupBackoffSeconds is the backoff time in seconds before a pod
	// group can be scheduled again; default 0 (no backoff).
	PodGroupBackoffSeconds *int64 `json:"podGroupBackoffSeconds,omitempty"`
	// PodGroupRejectPercentage is the percentage (0-100) of unassigned pods
	// relative to minMember below which PostFilter will not reject the
	// PodGroup. Default 10; 0 rejects on any failure, 100 never rejects.
	PodGroupRejectPercentage *int32 `json:"podGroupRejectPercentage,omitempty"`
}

// SetDefaults fills unset args.
func SetDefaults(args *CoschedulingArgs) {
	if args.PermitWaitingTimeSeconds == nil {
		v := DefaultPermitWaitingTimeSeconds
		args.PermitWaitingTimeSeconds = &v
	}
	if args.PodGroupBackoffSeconds == nil {
		v := DefaultPodGroupBackoffSeconds
		args.PodGroupBackoffSeconds = &v
	}
	if args.PodGroupRejectPercentage == nil {
		v := DefaultPodGroupRejectPercentage
		args.PodGroupRejectPercentage = &v
	}
}

// Validate refuses args upstream refuses, with upstream's messages.
func Validate(args *CoschedulingArgs) error {
	var errs field.ErrorList
	if v := *args.PermitWaitingTimeSeconds; v < 0 {
		errs = append(errs, field.Invalid(field.NewPath("permitWaitingTimeSeconds"), v, "must be greater than 0"))
	}
	if v := *args.PodGroupBackoffSeconds; v < 0 {
		errs = append(errs, field.Invalid(field.NewPath("podGroupBackoffSeconds"), v, "must be greater than 0"))
	}
	if v := *args.PodGroupRejectPercentage; v < 0 || v > 100 {
		errs = append(errs, field.Invalid(field.NewPath("podGroupRejectPercentage"), v, "must be between 0 and 100"))
	}
	return errs.ToAggregate()
}
