// Package defaultbinder provides DefaultBinder, the Bind plugin that binds a
// pod by creating its pods/binding subresource, as kube-scheduler 1.37.2
// does: a binding refused by a transient server error is retried.
package defaultbinder

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "DefaultBinder"

type defaultBinder struct {
	handle framework.Handle
}

var _ framework.BindPlugin = (*defaultBinder)(nil)

// New returns the plugin; it takes no args. The client comes from the
// handle when a pod is bound, so an instance can be built without one.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return &defaultBinder{handle: h}, nil
}

func (*defaultBinder) Name() string { return Name }

// Bind posts a Binding for the pod. Errors are returned as they are: the
// runtime wraps them with the plugin's name. The UID precondition makes the API
// server refuse the binding if the pod was deleted and recreated under the
// same name since it was scheduled. As upstream 1.37, an internal error, an
// unavailable server or a refused connection is retried with client-go's
// DefaultBackoff (4 attempts within about a third of a second) before the
// binding cycle fails; a conflict is not retried.
func (b *defaultBinder) Bind(ctx context.Context, _ *framework.CycleState, p *v1.Pod, nodeName string) *framework.Status {
	cs := b.handle.ClientSet()
	if cs == nil {
		return framework.AsStatus(errors.New("no Kubernetes client configured"))
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	klog.FromContext(ctx).V(3).Info("Attempting to bind pod to node", "pod", klog.KObj(p), "node", klog.KRef("", nodeName))
	bind := func() error { return cs.CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{}) }
	if err := retry.OnError(retry.DefaultBackoff, retriable, bind); err != nil {
		return framework.AsStatus(fmt.Errorf("binding pod %s/%s to node %s: %w", p.Namespace, p.Name, nodeName, err))
	}
	return nil
}

// retriable is upstream's util.Retriable: errors a second attempt may not
// get.
func retriable(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionRefused(err)
}
