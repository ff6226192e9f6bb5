package framework

import (
	"context"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Extender is one HTTP extender of a profile, as the Handle gives it
// (upstream's fwk.Extender). Calls take a context so that cancelling a
// cycle or a binding cancels the request.
type Extender interface {
	// Name identifies the extender: its urlPrefix.
	Name() string
	// Filter returns the nodes that fit pod, a subset of nodes, and the
	// nodes refused with their reasons: failed (Unschedulable) and
	// failedAndUnresolvable.
	Filter(ctx context.Context, pod *v1.Pod, nodes []*NodeInfo) (feasible []*NodeInfo, failed, failedAndUnresolvable extenderv1.FailedNodesMap, err error)
	// Prioritize scores nodes for pod (0 to extenderv1.MaxExtenderPriority)
	// and returns the scores with the extender's weight.
	Prioritize(ctx context.Context, pod *v1.Pod, nodes []*NodeInfo) (extenderv1.HostPriorityList, int64, error)
	// Bind binds pod to node.
	Bind(ctx context.Context, pod *v1.Pod, node string) error
	// IsBinder reports whether the extender binds.
	IsBinder() bool
	// IsInterested reports whether the extender sees pod: it manages none
	// of the resources, or pod requests one it manages.
	IsInterested(pod *v1.Pod) bool
	// IsPrioritizer reports whether the extender scores.
	IsPrioritizer() bool
	// IsFilter reports whether the extender filters.
	IsFilter() bool
	// ProcessPreemption returns the preemption candidates (victims per
	// node) the extender accepts, possibly with fewer victims.
	ProcessPreemption(ctx context.Context, pod *v1.Pod, victims map[string]*extenderv1.Victims) (map[string]*extenderv1.Victims, error)
	// SupportsPreemption reports whether the extender takes part in preemption.
	SupportsPreemption() bool
	// IsIgnorable reports whether scheduling goes on when the extender fails.
	IsIgnorable() bool
}
