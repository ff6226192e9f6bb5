package defaultbinder_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestDefaultBinder(t *testing.T) {
	pod := st.MakePod().Name("p").UID("uid-1").Obj()
	internal := apierrors.NewInternalError(errors.New("etcd leader changed"))
	unavailable := apierrors.NewServiceUnavailable("try again")
	conflict := apierrors.NewConflict(v1.Resource("pods"), "p", errors.New("changed"))
	bound := &v1.Binding{ObjectMeta: pod.ObjectMeta, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}
	tests := []struct {
		name string
		// injectErrs are returned by the first calls, in order.
		injectErrs  []error
		wantBinding *v1.Binding
		wantCalls   int
		wantErr     string
	}{
		{
			name:        "binds with the pod's UID as precondition",
			wantBinding: bound,
			wantCalls:   1,
		},
		{
			name:       "API error",
			injectErrs: []error{errors.New("broken")},
			wantCalls:  1,
			wantErr:    `running Bind plugin "DefaultBinder": binding pod default/p to node n1: broken`,
		},
		// Upstream 1.37 retries a binding refused by a transient server error.
		{
			name:        "server errors are retried",
			injectErrs:  []error{internal, unavailable},
			wantBinding: bound,
			wantCalls:   3,
		},
		{
			name:       "retries stop after four attempts",
			injectErrs: []error{unavailable, unavailable, unavailable, unavailable},
			wantCalls:  4,
			wantErr:    `running Bind plugin "DefaultBinder": binding pod default/p to node n1: try again`,
		},
		{
			name:       "a conflict is not retried",
			injectErrs: []error{conflict},
			wantCalls:  1,
			wantErr:    `running Bind plugin "DefaultBinder": binding pod default/p to node n1: ` + conflict.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *v1.Binding
			calls := 0
			client := fake.NewClientset(pod)
			client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
				if action.GetSubresource() != "binding" {
					return false, nil, nil
				}
				calls++
				if calls <= len(tt.injectErrs) {
					return true, nil, tt.injectErrs[calls-1]
				}
				got = action.(clienttesting.CreateAction).GetObject().(*v1.Binding)
				return true, got, nil
			})
			fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(), nil, runtime.WithClientSet(client))
			s := fwk.RunBindPlugins(t.Context(), framework.NewCycleState(), pod, "n1")
			var gotErr string
			if err := s.AsError(); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBinding, got); diff != "" {
				t.Errorf("binding (-want +got):\n%s", diff)
			}
			if calls != tt.wantCalls {
				t.Errorf("%d binding calls, want %d", calls, tt.wantCalls)
			}
		})
	}
	// The framework refuses nothing at build time without a client: the
	// error surfaces when binding.
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(defaultbinder.Name, 0)), nil)
	if s := fwk.RunBindPlugins(t.Context(), framework.NewCycleState(), pod, "n1"); !s.IsError() {
		t.Errorf("bind without client: got %v, want an error", s)
	}
}
