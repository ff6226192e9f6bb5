package podtopologyspread

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	zoneKey     = v1.LabelTopologyZone
	hostnameKey = v1.LabelHostname
)

// newFramework builds a real framework instance running only this plugin
// (weight 1). objs (Services, ReplicaSets, ...) are put straight into the
// informers' stores, which the plugin reads through listers.
func newFramework(tb testing.TB, snapshot framework.SharedLister, args *configv1.PodTopologySpreadArgs, objs ...k8sruntime.Object) framework.Framework {
	tb.Helper()
	return st.NewFramework(tb, registryOf(tb), profileWith(args), snapshot, st.Informers(tb, objs...)...)
}

// registryOf holds only this plugin, with its args validation as the
// in-tree registry registers it.
func registryOf(tb testing.TB) runtime.Registry {
	tb.Helper()
	r := registry.New(nil)
	if err := r.Register(Name, New, runtime.ArgsSpec{Validate: func(obj k8sruntime.Object) error { return ValidateArgs(obj.(*configv1.PodTopologySpreadArgs)) }}); err != nil {
		tb.Fatal(err)
	}
	return r
}

func profileWith(args *configv1.PodTopologySpreadArgs) *configv1.KubeSchedulerProfile {
	return st.WithPluginArgs(st.MultiPointProfile(st.Plugin(queuesort.Name, 0), st.Plugin(Name, 1), st.Plugin(defaultbinder.Name, 0)), Name, args)
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    *configv1.PodTopologySpreadArgs
		wantErr string
	}{
		{name: "defaults"},
		{name: "list defaulting without constraints", args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting}},
		{name: "list defaulting with constraints", args: &configv1.PodTopologySpreadArgs{
			DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
				{MaxSkew: 2, TopologyKey: zoneKey, WhenUnsatisfiable: v1.ScheduleAnyway},
			},
		}},
		{name: "system defaulting refuses constraints", args: &configv1.PodTopologySpreadArgs{
			DefaultingType:     configv1.SystemDefaulting,
			DefaultConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule}},
		}, wantErr: `defaultingType: Invalid value: "System": when .defaultConstraints are not empty`},
		{name: "unknown defaulting type", args: &configv1.PodTopologySpreadArgs{DefaultingType: "Other"},
			wantErr: `defaultingType: Unsupported value: "Other": supported values: "System", "List"`},
		{name: "bad constraints", args: &configv1.PodTopologySpreadArgs{
			DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 0, TopologyKey: "", WhenUnsatisfiable: "Sometimes", LabelSelector: &metav1.LabelSelector{}},
			},
		}, wantErr: `[defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf), ` +
			`defaultConstraints[0].topologyKey: Required value: can not be empty, ` +
			`defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway", ` +
			`defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod]`},
		{name: "repeated constraint", args: &configv1.PodTopologySpreadArgs{
			DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
				{MaxSkew: 2, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
			},
		}, wantErr: `defaultConstraints[1]: Duplicate value: "{topology.kubernetes.io/zone, DoNotSchedule}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk, err := st.BuildFramework(registryOf(t), profileWith(tt.args), st.NewSnapshot(nil, nil))
			if err == nil {
				_ = fwk.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("error = %q, want one containing %q", got, tt.wantErr)
			}
		})
	}

	// Without args the factory applies upstream's defaults itself.
	pl, err := New(context.Background(), nil, newFramework(t, st.NewSnapshot(nil, nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	pts := pl.(*podTopologySpread)
	if !pts.systemDefaulted || len(pts.defaultConstraints) != 2 {
		t.Errorf("defaults: systemDefaulted=%v constraints=%v", pts.systemDefaulted, pts.defaultConstraints)
	}
}

func TestEventsToRegister(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil), nil)
	got := st.RegisteredEvents(t, fwk, Name)
	want := []framework.ClusterEvent{
		{Resource: framework.AssignedPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete},
		{Resource: framework.TargetPod, ActionType: framework.UpdatePodToleration | framework.UpdatePodLabel},
		{Resource: framework.Node, ActionType: framework.Add | framework.Delete | framework.UpdateNodeLabel | framework.UpdateNodeTaint},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIsSchedulableAfterPodChange(t *testing.T) {
	pod := st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").Obj()
	honor := st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").Obj()
	honor.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
	tolerating := honor.DeepCopy()
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
	web := st.MakePod().Name("w").Label("app", "web").Node("n1").Obj()
	other := st.MakePod().Name("o").Label("app", "db").Node("n1").Obj()
	assigned := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: a}
	}
	target := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.TargetPod, ActionType: a}
	}
	tests := []struct {
		name           string
		pod            *v1.Pod
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{name: "added matching pod", pod: pod, event: assigned(framework.Add), newObj: web, want: framework.Queue},
		{name: "added unrelated pod", pod: pod, event: assigned(framework.Add), newObj: other, want: framework.QueueSkip},
		{name: "added pod in another namespace", pod: pod, event: assigned(framework.Add), newObj: st.MakePod().Name("w").Namespace("x").Label("app", "web").Node("n1").Obj(), want: framework.QueueSkip},
		{name: "added pod not placed", pod: pod, event: assigned(framework.Add), newObj: st.MakePod().Name("w").Label("app", "web").Obj(), want: framework.QueueSkip},
		{name: "deleted matching pod", pod: pod, event: assigned(framework.Delete), oldObj: web, want: framework.Queue},
		{name: "deleted unrelated pod", pod: pod, event: assigned(framework.Delete), oldObj: other, want: framework.QueueSkip},
		{name: "label update starts matching", pod: pod, event: assigned(framework.UpdatePodLabel), oldObj: other, newObj: st.MakePod().Name("o").Label("app", "web").Node("n1").Obj(), want: framework.Queue},
		{name: "label update keeps not matching", pod: pod, event: assigned(framework.UpdatePodLabel), oldObj: other, newObj: st.MakePod().Name("o").Label("app", "cache").Node("n1").Obj(), want: framework.QueueSkip},
		{name: "own new toleration with nodeTaintsPolicy Honor", pod: honor, event: target(framework.UpdatePodToleration), oldObj: honor, newObj: tolerating, want: framework.Queue},
		{name: "own new toleration without Honor", pod: pod, event: target(framework.UpdatePodToleration), oldObj: pod, newObj: func() *v1.Pod {
			p := pod.DeepCopy()
			p.Spec.Tolerations = tolerating.Spec.Tolerations
			return p
		}(), want: framework.QueueSkip},
		{name: "own labels stop matching its constraint", pod: pod, event: target(framework.UpdatePodLabel), oldObj: pod, newObj: st.MakePod().Name("p").Label("app", "db").Obj(), want: framework.Queue},
		{name: "own labels change unrelated to its constraint", pod: pod, event: target(framework.UpdatePodLabel), oldObj: pod, newObj: st.MakePod().Name("p").Label("app", "web").Label("x", "y").Obj(), want: framework.QueueSkip},
		// Upstream 1.37 registers AssignedPod and TargetPod events only.
		{name: "another pending pod's labels are not registered", pod: pod, event: framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodLabel},
			oldObj: st.MakePod().Name("o").Label("app", "db").NominatedNodeName("n1").Obj(), newObj: st.MakePod().Name("o").Label("app", "web").NominatedNodeName("n1").Obj(), want: framework.QueueSkip},
		{name: "the pod's own deletion is not registered", pod: pod, event: target(framework.Delete), oldObj: pod, want: framework.QueueSkip},
	}
	fwk := newFramework(t, st.NewSnapshot(nil, nil), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, Name, tt.event, tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	pod := st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").Obj()
	plain := st.MakeNode().Name("n").Obj()
	inA := st.MakeNode().Name("n").Label(zoneKey, "a").Obj()
	inB := st.MakeNode().Name("n").Label(zoneKey, "b").Obj()
	taintedA := st.MakeNode().Name("n").Label(zoneKey, "a").Taint("k", "v", v1.TaintEffectNoSchedule).Obj()
	tests := []struct {
		name           string
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{name: "added node with the key", newObj: inA, want: framework.Queue},
		{name: "added node without the key", newObj: plain, want: framework.QueueSkip},
		{name: "deleted node with the key", oldObj: inA, want: framework.Queue},
		{name: "deleted node without the key", oldObj: plain, want: framework.QueueSkip},
		{name: "node gains the key", oldObj: plain, newObj: inA, want: framework.Queue},
		{name: "node loses the key", oldObj: inA, newObj: plain, want: framework.Queue},
		{name: "node changes domain", oldObj: inA, newObj: inB, want: framework.Queue},
		{name: "node changes taints", oldObj: inA, newObj: taintedA, want: framework.Queue},
		{name: "unrelated label change", oldObj: inA, newObj: st.MakeNode().Name("n").Label(zoneKey, "a").Label("x", "y").Obj(), want: framework.QueueSkip},
	}
	pl := &podTopologySpread{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterNodeChange(klog.Background(), pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
