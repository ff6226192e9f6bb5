package manualapproval

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TimeoutAction is what happens to a held pod when its approval window ends
// without a decision.
type TimeoutAction string

const (
	// TimeoutReject returns the pod to pending; an approval given later
	// still lets it through when it reaches Permit again.
	TimeoutReject TimeoutAction = "Reject"
	// TimeoutApprove lets the pod through as if it had been approved.
	TimeoutApprove TimeoutAction = "Approve"
)

const (
	// DefaultApprovalWindow is how long a pod is held when args say nothing.
	DefaultApprovalWindow = time.Hour
	// MaxApprovalWindow is the longest a pod may be held. It exceeds the
	// 15-minute cap of ordinary Permit plugins because a person, not a
	// controller, is expected to answer; the node's resources stay
	// reserved all that time.
	MaxApprovalWindow = 24 * time.Hour
)

// ManualApprovalArgs configures the ManualApproval plugin.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type ManualApprovalArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PodSelector selects the pods to hold by their labels; unset selects
	// every pod of the profile.
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// NamespaceSelector selects the pods to hold by their namespace's
	// labels; unset selects every namespace. Both selectors must match.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// ApprovalWindow is how long a pod is held waiting for a decision;
	// default 1h, at most 24h.
	ApprovalWindow *metav1.Duration `json:"approvalWindow,omitempty"`
	// OnTimeout is Reject (default) or Approve.
	OnTimeout TimeoutAction `json:"onTimeout,omitempty"`
}

// SetDefaults fills unset args.
func SetDefaults(args *ManualApprovalArgs) {
	if args.ApprovalWindow == nil {
		args.ApprovalWindow = &metav1.Duration{Duration: DefaultApprovalWindow}
	}
	if args.OnTimeout == "" {
		args.OnTimeout = TimeoutReject
	}
}

// Validate refuses args the plugin cannot honour.
func Validate(args *ManualApprovalArgs) error {
	var errs []error
	if w := args.ApprovalWindow.Duration; w <= 0 || w > MaxApprovalWindow {
		errs = append(errs, fmt.Errorf("approvalWindow: %v must be more than 0 and at most %v", w, MaxApprovalWindow))
	}
	if args.OnTimeout != TimeoutReject && args.OnTimeout != TimeoutApprove {
		errs = append(errs, fmt.Errorf("onTimeout: %q must be %q or %q", args.OnTimeout, TimeoutReject, TimeoutApprove))
	}
	if _, err := metav1.LabelSelectorAsSelector(args.PodSelector); err != nil {
		errs = append(errs, fmt.Errorf("podSelector: %w", err))
	}
	if _, err := metav1.LabelSelectorAsSelector(args.NamespaceSelector); err != nil {
		errs = append(errs, fmt.Errorf("namespaceSelector: %w", err))
	}
	return errors.Join(errs...)
}
