package manualapproval

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

var _ framework.SignPlugin = (*manualApproval)(nil)

// SignPod adds nothing to the signature: this plugin only refuses a pod
// as a whole at PreFilter (when a person rejected the pod), before
// any node is filtered, and has no say on nodes or scores. Without it a
// profile running this plugin would never batch.
func (*manualApproval) SignPod(context.Context, *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return nil, nil
}
