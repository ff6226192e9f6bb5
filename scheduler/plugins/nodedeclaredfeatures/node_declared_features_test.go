package nodedeclaredfeatures_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/nodedeclaredfeatures"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// Feature names as the kubelet declares them.
const (
	restartAll    = "RestartAllContainersOnContainerExits"
	userNSHostNet = "UserNamespacesHostNetworkSupport"
	mountOptions  = "VolumeBindMountOptions"
	webSockets    = "ExtendWebSocketsToKubelet"
)

func newFramework(tb testing.TB, snapshot *st.Snapshot, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(nodedeclaredfeatures.Name, 0)), snapshot, opts...)
}

func TestNodeDeclaredFeatures(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("none").Obj(),
		st.MakeNode().Name("restart").DeclaredFeatures(webSockets, restartAll).Obj(),
		st.MakeNode().Name("userns").DeclaredFeatures(userNSHostNet).Obj(),
		st.MakeNode().Name("all").DeclaredFeatures(restartAll, "SomeFutureFeature", userNSHostNet, mountOptions).Obj(),
	}
	rejected := framework.NewStatus(framework.UnschedulableAndUnresolvable, nodedeclaredfeatures.ErrReason).WithPlugin(nodedeclaredfeatures.Name)
	tests := []struct {
		name       string
		pod        *v1.Pod
		wantSkip   bool
		wantFilter map[string]*framework.Status
	}{
		{
			name:       "a pod needing nothing skips Filter",
			pod:        st.MakePod().Name("p").Container("img").Obj(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"none": nil, "restart": nil, "userns": nil, "all": nil},
		},
		{
			name:       "a rule restarting all containers needs RestartAllContainersOnContainerExits",
			pod:        st.MakePod().Name("p").RestartAllContainersOn(42).Obj(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": nil, "userns": rejected, "all": nil},
		},
		{
			name: "so does such a rule on an init container",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Container("img").RestartAllContainersOn(1).Obj()
				p.Spec.InitContainers, p.Spec.Containers = p.Spec.Containers[1:], p.Spec.Containers[:1]
				return p
			}(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": nil, "userns": rejected, "all": nil},
		},
		{
			name: "a rule that restarts only its container needs nothing",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").RestartAllContainersOn(42).Obj()
				p.Spec.Containers[0].RestartPolicyRules[0].Action = v1.ContainerRestartRuleActionRestart
				return p
			}(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"none": nil, "restart": nil, "userns": nil, "all": nil},
		},
		{
			name:       "host network in a user namespace needs UserNamespacesHostNetworkSupport",
			pod:        st.MakePod().Name("p").Container("img").HostNetwork(true).HostUsers(false).Obj(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": rejected, "userns": nil, "all": nil},
		},
		{
			name:       "host network with host users needs nothing",
			pod:        st.MakePod().Name("p").Container("img").HostNetwork(true).Obj(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"none": nil, "restart": nil, "userns": nil, "all": nil},
		},
		{
			name:       "every feature must be declared",
			pod:        st.MakePod().Name("p").RestartAllContainersOn(42).HostNetwork(true).HostUsers(false).Obj(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": rejected, "userns": rejected, "all": nil},
		},
		{
			// 1.36.3 did not know VolumeBindMountOptions; 1.37.2 requires
			// it, and its kubelets declare it only with the alpha
			// VolumeBindMountOptions gate on.
			name: "bind mount options need VolumeBindMountOptions",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Container("img").Obj()
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{"nosuid"}}}
				return p
			}(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": rejected, "userns": rejected, "all": nil},
		},
		{
			name: "so do bind mount options of an init container",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").InitContainer("init").Container("img").Obj()
				p.Spec.InitContainers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{"noexec"}}}
				return p
			}(),
			wantFilter: map[string]*framework.Status{"none": rejected, "restart": rejected, "userns": rejected, "all": nil},
		},
		{
			// A memory-backed emptyDir resize needs
			// InPlacePodVerticalScalingMemoryBackedVolumes on update
			// only, never to schedule.
			name: "a memory-backed volume needs nothing to schedule",
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Container("img").Obj()
				size := resource.MustParse("1Gi")
				p.Spec.Volumes = []v1.Volume{{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}}}
				return p
			}(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"none": nil, "restart": nil, "userns": nil, "all": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			fwk := newFramework(t, snapshot)
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if got.PreFilter != nil {
				t.Errorf("PreFilter = %v, want success", got.PreFilter)
			}
			if diff := cmp.Diff(tt.wantFilter, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			state := framework.NewCycleState()
			if _, s, _ := fwk.RunPreFilterPlugins(t.Context(), state, tt.pod); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			if diff := cmp.Diff(tt.wantSkip, state.GetSkipFilterPlugins().Has(nodedeclaredfeatures.Name)); diff != "" {
				t.Errorf("Filter skipped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeDeclaredFeaturesMessage(t *testing.T) {
	snapshot := st.NewSnapshot(nil, []*v1.Node{
		st.MakeNode().Name("n1").Obj(),
		st.MakeNode().Name("n2").DeclaredFeatures(webSockets).Obj(),
	})
	got := st.RunCycle(t.Context(), newFramework(t, snapshot), snapshot, st.MakePod().Name("p").RestartAllContainersOn(42).Obj())
	want := "0/2 nodes are available: 2 node(s) didn't match Pod's required features."
	if diff := cmp.Diff(want, got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestNodeDeclaredFeaturesEvents(t *testing.T) {
	fwk := newFramework(t, nil)
	wantEvents := []framework.ClusterEvent{
		{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeDeclaredFeature},
		{Resource: framework.TargetPod, ActionType: framework.Update},
	}
	if diff := cmp.Diff(wantEvents, st.RegisteredEvents(t, fwk, nodedeclaredfeatures.Name)); diff != "" {
		t.Errorf("registered events (-want +got):\n%s", diff)
	}

	pod := st.MakePod().Name("p").UID("p").RestartAllContainersOn(42).Obj()
	restartOnly := pod.DeepCopy()
	restartOnly.Spec.Containers[0].RestartPolicyRules[0].Action = v1.ContainerRestartRuleActionRestart
	relabelled := pod.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	other := st.MakePod().Name("other").UID("other").Obj()
	otherNowNeedsOne := st.MakePod().Name("other").UID("other").RestartAllContainersOn(42).Obj()

	nodeAdd := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
	featuresChanged := framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeDeclaredFeature}
	podUpdate := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.Update}
	podRelabelled := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel}
	tests := []struct {
		name   string
		event  framework.ClusterEvent
		oldObj any
		newObj any
		want   framework.QueueingHint
	}{
		{"node added, even declaring nothing", nodeAdd, nil, st.MakeNode().Name("n").Obj(), framework.Queue},
		{"node declares a feature", featuresChanged, st.MakeNode().Name("n").Obj(), st.MakeNode().Name("n").DeclaredFeatures(restartAll).Obj(), framework.Queue},
		{"node stops declaring a feature", featuresChanged, st.MakeNode().Name("n").DeclaredFeatures(restartAll).Obj(), st.MakeNode().Name("n").Obj(), framework.Queue},
		{"node's features unchanged", featuresChanged, st.MakeNode().Name("n").DeclaredFeatures(restartAll).Obj(), st.MakeNode().Name("n").DeclaredFeatures(restartAll).Obj(), framework.QueueSkip},
		{"node relabelled", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}, st.MakeNode().Name("n").Obj(), st.MakeNode().Name("n").Label("a", "b").Obj(), framework.QueueSkip},
		{"the pod no longer needs a feature", podUpdate, pod, restartOnly, framework.Queue},
		{"the pod needs the same features", podRelabelled, pod, relabelled, framework.QueueSkip},
		// Upstream 1.37 registers TargetPod only: other pending pods'
		// updates are not its events.
		{"another pending pod's needs changed", framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Update}, other, otherNowNeedsOne, framework.QueueSkip},
		{"a bound pod was updated", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Update}, other, other, framework.QueueSkip},
		{"a pod was deleted", framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, other, nil, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, nodedeclaredfeatures.Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkNodeDeclaredFeatures(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		n := st.MakeNode().Name(fmt.Sprintf("node-%d", i))
		// Every tenth node runs a kubelet too old to declare features.
		if i%10 != 0 {
			n.DeclaredFeatures(webSockets, "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers", restartAll)
		}
		return n.Obj()
	})
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(b, snapshot, runtime.WithParallelism(1))
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").RestartAllContainersOn(42).Obj())
	})
}
