package framework

import (
	"errors"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Code is the Status code returned by plugins.
type Code int

// Codes are ordered as upstream; codeNames must follow the same order.
const (
	// Success means the plugin ran correctly and found the pod schedulable.
	// A nil *Status is also Success.
	Success Code = iota
	// Error is for internal plugin errors and unexpected input. It is never
	// used for an expected rejection: the pod is retried after backoff
	// regardless of cluster events.
	Error
	// Unschedulable means the plugin rejected the pod, but PostFilter plugins
	// (preemption) may still make it schedulable.
	Unschedulable
	// UnschedulableAndUnresolvable means the plugin rejected the pod and
	// preemption would not help on the node(s) concerned.
	UnschedulableAndUnresolvable
	// Wait is returned by Permit plugins to hold the pod before binding.
	Wait
	// Skip is returned by a Bind plugin that does not handle the pod, by a
	// PreFilter plugin whose Filter (and PreFilterExtensions) has nothing to
	// do this cycle, and by a PreScore plugin whose Score has nothing to do.
	Skip
	// Pending means the scheduling decision is fine but a plugin wants to
	// stop the cycle here, e.g. to wait for an external component. Pods
	// rejected with Pending are requeued without backoff.
	Pending
)

var codeNames = []string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip", "Pending"}

// NumCodes is the number of defined codes; it lets callers size per-code
// tables (e.g. metric observers) without a map.
const NumCodes = int(Pending) + 1

func (c Code) String() string {
	if c < 0 || int(c) >= len(codeNames) {
		return "Unknown"
	}
	return codeNames[c]
}

// Status is the result of running a plugin: a code, reasons, an optional
// error and the name of the plugin that produced it. A nil *Status is Success;
// every method is safe on a nil receiver except the setters.
type Status struct {
	code    Code
	reasons []string
	err     error
	// plugin is set by the framework for rejections (Unschedulable,
	// UnschedulableAndUnresolvable, Pending) so the queue knows which
	// plugin's events can requeue the pod.
	plugin string
}

// NewStatus makes a Status out of the given arguments.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an error in a Status with code Error. It returns nil for a nil error.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, err: err}
}

// WithError attaches err to s and returns s.
func (s *Status) WithError(err error) *Status {
	s.err = err
	return s
}

// Code returns the code of the Status (Success for nil).
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// Message returns the reasons joined by ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons(), ", ")
}

// SetPlugin records the plugin that caused this status.
func (s *Status) SetPlugin(plugin string) {
	s.plugin = plugin
}

// WithPlugin records the plugin that caused this status and returns s.
func (s *Status) WithPlugin(plugin string) *Status {
	s.SetPlugin(plugin)
	return s
}

// Plugin returns the plugin that caused this status.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// Reasons returns the reasons of the Status; the error message, if any, comes first.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	if s.err != nil {
		return append([]string{s.err.Error()}, s.reasons...)
	}
	return s.reasons
}

// AppendReason appends a reason.
func (s *Status) AppendReason(reason string) {
	s.reasons = append(s.reasons, reason)
}

// IsSuccess reports whether s is nil or has code Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsWait reports whether s has code Wait.
func (s *Status) IsWait() bool { return s.Code() == Wait }

// IsSkip reports whether s has code Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsError reports whether s has code Error.
func (s *Status) IsError() bool { return s.Code() == Error }

// IsRejected reports whether s is a rejection: Unschedulable,
// UnschedulableAndUnresolvable or Pending.
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable || c == Pending
}

// AsError returns nil for Success, Wait and Skip, and otherwise an error
// carrying the original error or the joined reasons.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsWait() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// Equal lets cmp.Diff compare statuses, including wrapped errors.
func (s *Status) Equal(x *Status) bool {
	if s == nil || x == nil {
		return s.IsSuccess() && x.IsSuccess()
	}
	if s.code != x.code {
		return false
	}
	if !cmp.Equal(s.err, x.err, cmpopts.EquateErrors()) {
		return false
	}
	if !cmp.Equal(s.reasons, x.reasons) {
		return false
	}
	return s.plugin == x.plugin
}

func (s *Status) String() string {
	return s.Message()
}

// Clone returns a copy of s (nil for nil).
func (s *Status) Clone() *Status {
	if s == nil {
		return nil
	}
	return &Status{code: s.code, reasons: slices.Clone(s.reasons), err: s.err, plugin: s.plugin}
}
