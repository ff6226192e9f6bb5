package defaultbinder_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
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
	tests := []struct {
		name        string
		injectErr   error
		wantBinding *v1.Binding
		wantErr     string
	}{
		{
			name: "binds with the pod's UID as precondition",
			wantBinding: &v1.Binding{
				ObjectMeta: pod.ObjectMeta,
				Target:     v1.ObjectReference{Kind: "Node", Name: "n1"},
			},
		},
		{
			name:      "API error",
			injectErr: errors.New("conflict"),
			wantErr:   `running Bind plugin "DefaultBinder": binding pod default/p to node n1: conflict`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *v1.Binding
			client := fake.NewClientset(pod)
			client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
				if action.GetSubresource() != "binding" {
					return false, nil, nil
				}
				if tt.injectErr != nil {
					return true, nil, tt.injectErr
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
		})
	}
	// The framework refuses nothing at build time without a client: the
	// error surfaces when binding.
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(defaultbinder.Name, 0)), nil)
	if s := fwk.RunBindPlugins(t.Context(), framework.NewCycleState(), pod, "n1"); !s.IsError() {
		t.Errorf("bind without client: got %v, want an error", s)
	}
}
