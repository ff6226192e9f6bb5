package manualapproval

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Name is the plugin's name in profiles.
const Name = "ManualApproval"

// Decisions looks up what people decided for pods. The operator backs it
// with its WaitingPods; the plugin knows nothing of how they are stored.
type Decisions interface {
	// Decision returns the decision on the pod q names, if one was made for
	// that very pod and belongs to the profile holding it, or nil when
	// there is none.
	Decision(ctx context.Context, q Query) (*Decision, error)
}

// Query names the pod whose decision is looked up, and the profile whose
// instance holds it: a decision made while another profile held the pod
// is not this one's.
type Query struct {
	Namespace string
	Name      string
	// PodUID is the pod's UID: a decision for an earlier pod of the same
	// name does not apply.
	PodUID types.UID
	// Profile is the schedulerName the holding instance serves.
	Profile string
}

// Decision is a person's decision on a pod.
type Decision struct {
	// Approve is true for an approval, false for a rejection.
	Approve bool
	// DecidedBy is who decided.
	DecidedBy string
	// Reason is why, if they said.
	Reason string
}

// RejectionMessage is how a rejection reads on the pod.
func (d *Decision) RejectionMessage() string {
	msg := "rejected at Permit"
	if d.DecidedBy != "" {
		msg += " by " + d.DecidedBy
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}

// Option configures the plugin's factory.
type Option func(*options)

type options struct {
	clock clock.WithDelayedExecution
}

// WithClock sets the clock that measures approval windows (tests).
func WithClock(clk clock.WithDelayedExecution) Option {
	return func(o *options) { o.clock = clk }
}

// Register adds the plugin, backed by decisions, to r.
func Register(r fwkruntime.Registry, decisions Decisions, opts ...Option) error {
	return r.Register(Name, NewFactory(decisions, opts...), fwkruntime.TypedArgs(func() *ManualApprovalArgs { return &ManualApprovalArgs{} }, SetDefaults, Validate))
}

// NewFactory returns the plugin factory, backed by decisions.
func NewFactory(decisions Decisions, opts ...Option) fwkruntime.Factory {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	return func(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
		args, ok := obj.(*ManualApprovalArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type ManualApprovalArgs, got %T", obj)
		}
		pods, err := selector(args.PodSelector)
		if err != nil {
			return nil, err
		}
		namespaces, err := selector(args.NamespaceSelector)
		if err != nil {
			return nil, err
		}
		pl := &manualApproval{
			handle:     h,
			decisions:  decisions,
			pods:       pods,
			namespaces: namespaces,
			window:     args.ApprovalWindow.Duration,
			onTimeout:  args.OnTimeout,
			clock:      o.clock,
			holds:      map[types.UID]*hold{},
		}
		if !namespaces.Empty() {
			// Requested here so the informer starts with the instance.
			pl.nsLister = h.SharedInformerFactory().Core().V1().Namespaces().Lister()
		}
		return pl, nil
	}
}

type manualApproval struct {
	handle     framework.Handle
	decisions  Decisions
	pods       labels.Selector
	namespaces labels.Selector
	nsLister   corelisters.NamespaceLister
	window     time.Duration
	onTimeout  TimeoutAction
	clock      clock.WithDelayedExecution

	// mu guards holds and closed. A timer's callback holds mu while it
	// checks that its hold is still the pod's current one and allows the
	// pod, so the two are one step. The timer is armed in WaitStarted, once
	// the pod waits, not in Permit: a short window could otherwise end
	// before the waiting pod exists, and its approval would be lost. Lock
	// order: mu, then the framework's waiting-pod locks (Allow) and the
	// clock's (AfterFunc, Stop); the framework never calls the plugin
	// while holding its own locks. Allow may call the profile's gang
	// plugin (Coscheduling's HoldChanged), which takes its own lock under
	// mu and never calls this plugin. The real clock runs callbacks on
	// their own goroutine; a fake clock runs them inside Step under its
	// lock, so a test must not Step while Permit, WaitStarted, Unreserve,
	// PostBind or Close run.
	mu sync.Mutex
	// holds maps a pod UID to its current hold when onTimeout is Approve.
	holds map[types.UID]*hold
	// closed is set by Close; no timer is armed after it.
	closed bool
}

// hold is one stay of a pod at this plugin's Permit when onTimeout is
// Approve: the timer that approves the pod when the window ends, nil until
// the pod waits. Its address
// is its identity. It is stored in the cycle's state so that Unreserve and
// PostBind stop exactly the timer of their own cycle, and the timer's
// callback acts only while its hold is the pod's current one.
type hold struct {
	timer clock.Timer
}

func (h *hold) stop() {
	if h.timer != nil {
		h.timer.Stop()
	}
}

// Clone returns h itself: a hold belongs to one cycle and is never copied.
func (h *hold) Clone() framework.StateData { return h }

// holdKey is where Permit records the cycle's hold in CycleState.
const holdKey framework.StateKey = "Permit" + Name

var (
	_ framework.PreFilterPlugin         = (*manualApproval)(nil)
	_ framework.PermitPlugin            = (*manualApproval)(nil)
	_ framework.WaitStartedPermitPlugin = (*manualApproval)(nil)
	_ framework.PermitTimeoutExtension  = (*manualApproval)(nil)
	_ framework.ReservePlugin           = (*manualApproval)(nil)
	_ framework.PostBindPlugin          = (*manualApproval)(nil)
	_ framework.EnqueueExtensions       = (*manualApproval)(nil)
	_ io.Closer                         = (*manualApproval)(nil)
)

func (pl *manualApproval) Name() string { return Name }

// MaxPermitTimeout lets the approval window exceed the 15-minute cap of
// ordinary Permit plugins.
func (pl *manualApproval) MaxPermitTimeout() time.Duration {
	// The margin keeps the runtime's own timer, a backstop for
	// onTimeout: Approve, from firing before the plugin's.
	return MaxApprovalWindow + approveMargin
}

// approveMargin is how much later than the window the runtime's timer fires
// when the plugin itself approves on timeout.
const approveMargin = time.Minute

// PreFilter keeps a pod that a person rejected from taking a node again.
func (pl *manualApproval) PreFilter(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	selected, err := pl.selects(pod)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if !selected {
		return nil, framework.NewStatus(framework.Skip)
	}
	d, err := pl.decision(ctx, pod)
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("looking up the decision on pod %s: %w", klog.KObj(pod), err))
	}
	if d != nil && !d.Approve {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, d.RejectionMessage())
	}
	return nil, nil
}

func (pl *manualApproval) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Permit holds a selected pod unless an approval for it is already recorded.
func (pl *manualApproval) Permit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (*framework.Status, time.Duration) {
	if pl.onTimeout == TimeoutApprove {
		// The pod reaching Permit again means its earlier stay here is
		// over, even where Unreserve or PostBind did not say so (the
		// plugin enabled at Permit alone).
		pl.forget(pod.UID, nil)
	}
	selected, err := pl.selects(pod)
	if err != nil {
		return framework.AsStatus(err), 0
	}
	if !selected {
		return nil, 0
	}
	d, err := pl.decision(ctx, pod)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("looking up the decision on pod %s: %w", klog.KObj(pod), err)), 0
	}
	if d != nil {
		if d.Approve {
			return nil, 0
		}
		return framework.NewStatus(framework.Unschedulable, d.RejectionMessage()), 0
	}
	klog.FromContext(ctx).V(3).Info("Holding pod for approval", "pod", klog.KObj(pod), "node", nodeName, "window", pl.window)
	if pl.onTimeout == TimeoutApprove {
		pl.hold(state, pod.UID)
		return framework.NewStatus(framework.Wait), pl.window + approveMargin
	}
	return framework.NewStatus(framework.Wait), pl.window
}

// hold records a new hold of the pod as its current one and in state; its
// timer starts when the pod waits.
func (pl *manualApproval) hold(state *framework.CycleState, uid types.UID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		// The instance is retired: the framework rejects the pod at once.
		return
	}
	h := &hold{}
	pl.holds[uid] = h
	state.Write(holdKey, h)
}

// WaitStarted starts the timer that approves the waiting pod when its
// window ends, if the pod's current hold has none yet.
func (pl *manualApproval) WaitStarted(ctx context.Context, wp framework.WaitingPod) {
	logger := klog.FromContext(ctx)
	pod := wp.GetPod()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	h := pl.holds[pod.UID]
	if h == nil || h.timer != nil {
		// Not held with onTimeout Approve, resolved, or closed.
		return
	}
	h.timer = pl.clock.AfterFunc(pl.window, func() {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		if pl.holds[pod.UID] != h {
			// Resolved, superseded by a later hold, or closed.
			return
		}
		delete(pl.holds, pod.UID)
		logger.V(3).Info("Approval window ended, approving pod", "pod", klog.KObj(pod), "window", pl.window)
		wp.Allow(Name)
	})
}

// forget stops the timer of the pod's hold h, or of its current hold when h
// is nil, and drops the hold. A later hold of the pod is left alone.
func (pl *manualApproval) forget(uid types.UID, h *hold) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	cur := pl.holds[uid]
	if h == nil {
		h = cur
	}
	if h == nil {
		return
	}
	h.stop()
	if cur == h {
		delete(pl.holds, uid)
	}
}

// forgetCycle forgets the hold this cycle's Permit armed, if any.
func (pl *manualApproval) forgetCycle(state *framework.CycleState, uid types.UID) {
	if pl.onTimeout != TimeoutApprove {
		return
	}
	h, err := framework.ReadAs[*hold](state, holdKey)
	if err != nil {
		// Permit did not hold the pod in this cycle.
		return
	}
	pl.forget(uid, h)
}

// Reserve does nothing; the plugin is a Reserve plugin for Unreserve.
func (pl *manualApproval) Reserve(context.Context, *framework.CycleState, *v1.Pod, string) *framework.Status {
	return nil
}

// Unreserve ends the hold of a cycle that failed after Permit: the pod was
// rejected, timed out, deleted while held, or its binding failed.
func (pl *manualApproval) Unreserve(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ string) {
	pl.forgetCycle(state, pod.UID)
}

// PostBind ends the hold of a cycle whose pod was allowed and bound.
func (pl *manualApproval) PostBind(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ string) {
	pl.forgetCycle(state, pod.UID)
}

// Close stops every timer; the framework rejects the pods still held.
func (pl *manualApproval) Close() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.closed = true
	for uid, h := range pl.holds {
		h.stop()
		delete(pl.holds, uid)
	}
	return nil
}

// EventsToRegister is empty: no cluster event resolves a rejection by a
// person. The operator activates a pod when its decision changes.
func (pl *manualApproval) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return nil, nil
}

func (pl *manualApproval) selects(pod *v1.Pod) (bool, error) {
	if !pl.pods.Matches(labels.Set(pod.Labels)) {
		return false, nil
	}
	if pl.nsLister == nil {
		return true, nil
	}
	ns, err := pl.nsLister.Get(pod.Namespace)
	if err != nil {
		return false, fmt.Errorf("looking up namespace %s: %w", pod.Namespace, err)
	}
	return pl.namespaces.Matches(labels.Set(ns.Labels)), nil
}

// selector is LabelSelectorAsSelector, except that an unset selector selects
// everything, as the args document.
func selector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// decision looks up the decision on pod for this instance's profile.
func (pl *manualApproval) decision(ctx context.Context, pod *v1.Pod) (*Decision, error) {
	return pl.decisions.Decision(ctx, Query{Namespace: pod.Namespace, Name: pod.Name, PodUID: pod.UID, Profile: pl.handle.ProfileName()})
}
