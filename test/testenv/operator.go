package testenv

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

// OperatorOptions say how StartOperator wires the operator; the zero value
// runs it as main.go does, with the in-tree plugins, no metrics or probe
// servers and no admission webhook.
type OperatorOptions struct {
	// Manager configures the controller manager. A nil Scheme is Scheme();
	// empty metrics and probe addresses are "0", nothing listens.
	Manager ctrl.Options
	// Operator configures the operator; a nil Registry is the in-tree
	// plugins.
	Operator operator.Options
	// BeforeSetup adds to the manager what main.go adds before the
	// operator, such as the webhook's certificate keeper.
	BeforeSetup func(manager.Manager) error
}

// RunningOperator is an operator StartOperator started in this process.
type RunningOperator struct {
	*operator.Operator
	Manager manager.Manager

	cancel context.CancelFunc
	done   chan error
}

// StartOperator starts the operator's manager against the API server of
// cfg, as main.go wires it, until ctx ends or Stop is called. A suite can
// stop it and start another in the same process, as a restarted replica.
func StartOperator(ctx context.Context, cfg *rest.Config, o OperatorOptions) (*RunningOperator, error) {
	mo := o.Manager
	if mo.Scheme == nil {
		mo.Scheme = Scheme()
	}
	if mo.Metrics.BindAddress == "" {
		mo.Metrics.BindAddress = "0"
	}
	if mo.HealthProbeBindAddress == "" {
		mo.HealthProbeBindAddress = "0"
	}
	// Controllers keep their names process-wide; a restarted operator
	// registers them again.
	mo.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, err
	}
	if o.BeforeSetup != nil {
		if err := o.BeforeSetup(mgr); err != nil {
			return nil, err
		}
	}
	oo := o.Operator
	if oo.Registry == nil {
		oo.Registry = plugins.NewInTreeRegistry()
	}
	ctx, cancel := context.WithCancel(ctx)
	op, err := operator.Setup(ctx, mgr, oo)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return &RunningOperator{Operator: op, Manager: mgr, cancel: cancel, done: done}, nil
}

// Stop stops the operator and waits for its manager; it returns the error
// the manager stopped with. Calling it again returns nil.
func (r *RunningOperator) Stop() error {
	if r.done == nil {
		return nil
	}
	r.cancel()
	err := <-r.done
	r.done = nil
	return err
}
