package runtime

import (
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// WithExtenders gives the instance HTTP extenders, called after its plugins
// as upstream calls a scheduler's extenders. NewFramework validates them as
// upstream does and refuses the profile (a *ConfigError) if they are
// invalid. TLS material must be in the data fields; the caller resolves it.
// Each instance has its own clients, so a profile change that changes its
// extenders takes effect with the new instance.
func WithExtenders(cfgs []configv1.Extender) Option {
	return func(o *frameworkOptions) { o.extenders = cfgs }
}

// WithExtenderPolicy sets what the operator allows extenders: the URLs
// they may be called at and the size of their replies. Without it no
// extender is allowed.
func WithExtenderPolicy(p extender.Policy) Option {
	return func(o *frameworkOptions) { o.extenderPolicy = p }
}

// WithExtenderObserver sets who is told when calls to an extender of the
// instance start or stop failing: any failure of a non-ignorable one, and
// a refused reply of any (see extender.Observer).
func WithExtenderObserver(obs extender.Observer) Option {
	return func(o *frameworkOptions) { o.extenderObserver = obs }
}

func (f *frameworkImpl) Extenders() []framework.Extender { return f.handleExtenders }

func (f *frameworkImpl) closeExtenders() {
	for _, e := range f.extenders {
		e.Close()
	}
}
