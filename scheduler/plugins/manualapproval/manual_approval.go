package manualapproval

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Name is the plugin's name in profiles.
const Name = "ManualApproval"

// Decisions looks up what people decided for pods. The operator backs it
// with its WaitingPod informer.
type Decisions interface {
	// Decision returns the decided spec of the WaitingPod namespace/name if
	// it was made for the pod with uid, or nil when there is none.
	Decision(ctx context.Context, namespace, name string, uid types.UID) (*schedulingv1alpha1.WaitingPodSpec, error)
}

// Register adds the plugin, backed by decisions, to r.
func Register(r fwkruntime.Registry, decisions Decisions) error {
	return r.Register(Name, NewFactory(decisions), fwkruntime.TypedArgs(func() *ManualApprovalArgs { return &ManualApprovalArgs{} }, SetDefaults, Validate))
}

// NewFactory returns the plugin factory, backed by decisions.
func NewFactory(decisions Decisions) fwkruntime.Factory {
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
}

var (
	_ framework.PreFilterPlugin        = (*manualApproval)(nil)
	_ framework.PermitPlugin           = (*manualApproval)(nil)
	_ framework.PermitTimeoutExtension = (*manualApproval)(nil)
	_ framework.EnqueueExtensions      = (*manualApproval)(nil)
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
	d, err := pl.decisions.Decision(ctx, pod.Namespace, pod.Name, pod.UID)
	if err != nil {
		return nil, framework.AsStatus(fmt.Errorf("looking up the decision on pod %s: %w", klog.KObj(pod), err))
	}
	if d != nil && d.Decision == schedulingv1alpha1.DecisionReject {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, RejectionMessage(d))
	}
	return nil, nil
}

func (pl *manualApproval) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Permit holds a selected pod unless an approval for it is already recorded.
func (pl *manualApproval) Permit(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeName string) (*framework.Status, time.Duration) {
	selected, err := pl.selects(pod)
	if err != nil {
		return framework.AsStatus(err), 0
	}
	if !selected {
		return nil, 0
	}
	d, err := pl.decisions.Decision(ctx, pod.Namespace, pod.Name, pod.UID)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("looking up the decision on pod %s: %w", klog.KObj(pod), err)), 0
	}
	if d != nil {
		if d.Decision == schedulingv1alpha1.DecisionApprove {
			return nil, 0
		}
		return framework.NewStatus(framework.Unschedulable, RejectionMessage(d)), 0
	}
	klog.FromContext(ctx).V(3).Info("Holding pod for approval", "pod", klog.KObj(pod), "node", nodeName, "window", pl.window)
	if pl.onTimeout == TimeoutApprove {
		uid := pod.UID
		time.AfterFunc(pl.window, func() {
			if wp := pl.handle.GetWaitingPod(uid); wp != nil {
				wp.Allow(Name)
			}
		})
		return framework.NewStatus(framework.Wait), pl.window + approveMargin
	}
	return framework.NewStatus(framework.Wait), pl.window
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

// RejectionMessage is how a person's rejection reads on the pod.
func RejectionMessage(d *schedulingv1alpha1.WaitingPodSpec) string {
	msg := "rejected at Permit"
	if d.DecidedBy != "" {
		msg += " by " + d.DecidedBy
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}
