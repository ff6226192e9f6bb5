// Package webhook serves the validating admission webhook for
// SchedulingProfiles, so that `kubectl apply`, `--dry-run=server`,
// `kubectl diff` and a GitOps sync refuse a profile the operator would not
// build, with the messages its status would show. The check is
// profilebuild.Checker's, the compiler the SchedulingProfile controller uses;
// what only the cluster can tell (an extender's TLS Secret, a schedulerName
// an older profile claims) stays a status matter, and the latter is
// returned as a warning.
//
// The webhook server runs on every replica, leader or standby:
// controller-runtime starts webhook servers before caches and never puts
// them behind leader election. Its certificate is the operator's own
// (Certificates), unless a directory of mounted ones is named.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// The webhook configuration config/webhook installs; `make manifests`
// generates it from this marker. failurePolicy=Fail: while no replica
// answers, creating or changing a profile is refused and a GitOps sync
// retries, rather than an invalid spec reaching the cluster unchecked
// (docs/install.md). timeoutSeconds=10 leaves room for a TLS handshake and
// a slow API server around Budget.
//
// +kubebuilder:webhook:path=/validate-scheduling-schedprofiles-io-v1alpha1-schedulingprofile,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=10,groups=scheduling.schedprofiles.io,resources=schedulingprofiles,verbs=create;update,versions=v1alpha1,name=vschedulingprofile.scheduling.schedprofiles.io,admissionReviewVersions=v1

// Budget bounds how long validating one profile may take: well inside the
// configuration's timeoutSeconds, so a slow check is refused with this
// webhook's own message rather than the API server's timeout.
const Budget = 5 * time.Second

// Register serves the webhook on mgr's webhook server. v validates specs;
// profiles lists the SchedulingProfiles already stored, for the warning
// about a schedulerName an older profile claims and for maxShadows, the
// number of shadow profiles allowed. reg, when not nil, exports the
// webhook's metrics.
func Register(mgr ctrl.Manager, v *profilebuild.Checker, profiles client.Reader, maxShadows int, reg prometheus.Registerer) error {
	panics := newPanicCounter()
	if reg != nil {
		if err := reg.Register(panics); err != nil {
			return fmt.Errorf("registering the admission webhook's metrics: %w", err)
		}
	}
	return ctrl.NewWebhookManagedBy(mgr, &schedulingv1alpha1.SchedulingProfile{}).
		WithValidator(&profileValidator{checker: v, profiles: profiles, maxShadows: maxShadows, budget: Budget,
			builds: make(chan struct{}, MaxConcurrentBuilds), panics: panics}).
		Complete()
}

// newPanicCounter counts validations that panicked: a plugin factory or
// its args handling failed in a way no spec should be able to cause.
func newPanicCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "profile_scheduler_admission_webhook_panics_total",
		Help: "Number of SchedulingProfile validations in the admission webhook that panicked and were refused as an internal error.",
	})
}

// profileValidator checks SchedulingProfiles on create and update.
type profileValidator struct {
	checker    *profilebuild.Checker
	profiles   client.Reader
	maxShadows int
	budget     time.Duration
	// builds holds a token per validation building an instance, taken
	// before it starts and given back when it ends, also after its
	// request ran out of time: anyone who can reach the webhook's port
	// can send reviews, and each may build a spec of up to 1 MiB.
	builds chan struct{}
	// panics counts validations that panicked.
	panics prometheus.Counter
}

// MaxConcurrentBuilds bounds the instances the webhook builds at once; a
// request that finds them all busy waits within its budget.
const MaxConcurrentBuilds = 4

var _ admission.Validator[*schedulingv1alpha1.SchedulingProfile] = (*profileValidator)(nil)

func (p *profileValidator) ValidateCreate(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) (admission.Warnings, error) {
	return p.validate(ctx, sp)
}

// ValidateUpdate checks a changed spec only: an update of metadata or of
// nothing (labels, annotations, finalizers, owner references) must go
// through even when the operator's plugins no longer build the spec, or a
// profile could not even be deleted with a finalizer on it.
func (p *profileValidator) ValidateUpdate(ctx context.Context, old, sp *schedulingv1alpha1.SchedulingProfile) (admission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec, sp.Spec) {
		return nil, nil
	}
	return p.validate(ctx, sp)
}

// ValidateDelete is never called: the configuration registers create and
// update only, and a profile may always be deleted.
func (p *profileValidator) ValidateDelete(context.Context, *schedulingv1alpha1.SchedulingProfile) (admission.Warnings, error) {
	return nil, nil
}

func (p *profileValidator) validate(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) (admission.Warnings, error) {
	logger := klog.FromContext(ctx).WithValues("schedulingProfile", klog.KObj(sp))
	ctx, cancel := context.WithTimeout(klog.NewContext(ctx, logger), p.budget)
	defer cancel()
	if err := shadowLimit(ctx, p.profiles, sp, p.maxShadows); err != nil {
		return nil, err
	}
	// Building an instance runs plugin factories, which do not all heed
	// ctx; the answer is given when the budget runs out, and a build
	// still running then finishes and is closed on its own.
	outOfTime := func() error {
		logger.Info("Validating a profile ran out of time", "budget", p.budget)
		return fmt.Errorf("SchedulingProfile %s was not validated within %s, so nothing was changed; try again, and if it recurs the operator's log says what was slow", sp.Name, p.budget)
	}
	select {
	case p.builds <- struct{}{}:
	case <-ctx.Done():
		return nil, outOfTime()
	}
	// refused gets the spec's refusals, or nil and a closed panicked
	// when the check panicked.
	refused := make(chan profilebuild.Refusals, 1)
	panicked := make(chan struct{})
	go func() {
		defer func() { <-p.builds }()
		// Every replica serves the webhook: a panic left to kill this
		// goroutine would take the whole process, the scheduling loop
		// with it, and a spec that causes one could take every replica.
		defer func() {
			if r := recover(); r != nil {
				p.panics.Inc()
				logger.Error(nil, "Validating a profile panicked", "panic", r, "stack", string(debug.Stack()))
				close(panicked)
			}
		}()
		refused <- p.checker.Check(ctx, sp)
	}()
	var refusals profilebuild.Refusals
	select {
	case refusals = <-refused:
	case <-panicked:
		return nil, fmt.Errorf("SchedulingProfile %s %s", sp.Name, internalErrorMessage)
	case <-ctx.Done():
		return nil, outOfTime()
	}
	if len(refusals) > 0 {
		return nil, denial(sp.Name, refusals)
	}
	return p.warnings(ctx, sp), nil
}

// internalErrorMessage refuses a spec whose validation panicked: the fault
// is the operator's, which its log and
// profile_scheduler_admission_webhook_panics_total show.
const internalErrorMessage = "was not validated: an internal error occurred in the operator, so nothing was changed; the operator's log has the details"

// denial words every refusal after the object, as kubectl prints it:
// `admission webhook "vschedulingprofile.scheduling.schedprofiles.io"
// denied the request: SchedulingProfile gpu cannot be built: ...`. Status
// says "Generation 3 cannot be built: ..." of the same spec.
func denial(name string, refusals profilebuild.Refusals) error {
	subject := "SchedulingProfile " + name
	if refusals.Reason() == schedulingv1alpha1.ReasonReservedSchedulerName {
		return fmt.Errorf("%s: %s", subject, refusals.Message(subject))
	}
	return errors.New(refusals.Message(subject))
}

// warnings says when an older profile claims sp's schedulerName: not a
// refusal, since which profile serves a name is decided among stored
// objects, as status reports it.
func (p *profileValidator) warnings(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) admission.Warnings {
	if sp.Spec.ShadowOf != nil {
		// A shadow claims no schedulerName.
		return nil
	}
	var list schedulingv1alpha1.SchedulingProfileList
	if err := p.profiles.List(ctx, &list); err != nil {
		klog.FromContext(ctx).Error(err, "Listing SchedulingProfiles for the schedulerName warning")
		return nil
	}
	name := profilebuild.SchedulerName(sp)
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name == sp.Name || !other.DeletionTimestamp.IsZero() || other.Spec.ShadowOf != nil || profilebuild.SchedulerName(other) != name {
			continue
		}
		// A profile being created is newer than every stored one.
		if sp.CreationTimestamp.IsZero() || profilebuild.Older(other, sp) {
			return admission.Warnings{fmt.Sprintf("schedulerName %s is claimed by the older SchedulingProfile %s; this one will not serve while that one does", name, other.Name)}
		}
	}
	return nil
}
