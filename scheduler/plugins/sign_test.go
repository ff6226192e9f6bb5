package plugins_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// signature signs pod with a real instance of profile built from the
// in-tree plugins, and decodes it; nil when the pod cannot be signed.
func signature(t *testing.T, profile *configv1.KubeSchedulerProfile, pod *v1.Pod, opts ...runtime.Option) map[string]any {
	t.Helper()
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), profile, st.NewSnapshot(nil, nil), opts...)
	sig := fwk.SignPod(context.Background(), pod)
	if sig == nil {
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal(sig, &out); err != nil {
		t.Fatalf("signature %q is not JSON: %v", sig, err)
	}
	return out
}

// decoded is v as it comes back from a signature's JSON.
func decoded(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSignPod checks each plugin's fragments, and the pods and profiles
// upstream cannot sign, through a real framework instance. The profiles
// hold PrioritySort and DefaultBinder besides the plugin under test;
// neither takes part in signing.
func TestSignPod(t *testing.T) {
	sched := func(extra map[string]any) map[string]any {
		out := map[string]any{framework.SchedulerNameSignerName: "default-scheduler"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	pod := func() *st.PodWrapper { return st.MakePod().Name("p").SchedulerName("default-scheduler") }
	term := func(key string, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}}}
	}
	ptsArgs := func(a *configv1.PodTopologySpreadArgs) []configv1.PluginConfig {
		return []configv1.PluginConfig{{Name: "PodTopologySpread", Args: k8sruntime.RawExtension{Object: a}}}
	}
	tests := []struct {
		name    string
		plugins []string
		args    []configv1.PluginConfig
		pod     *v1.Pod
		opts    []runtime.Option
		// want is the decoded signature; nil means unsignable.
		want map[string]any
	}{
		{
			name:    "NodeName signs spec.nodeName",
			plugins: []string{"NodeName"},
			pod:     pod().Obj(),
			want:    sched(map[string]any{framework.NodeNameSignerName: ""}),
		},
		{
			name:    "tolerations are sorted by key then value, NodeUnschedulable and TaintToleration agree",
			plugins: []string{"NodeUnschedulable", "TaintToleration"},
			pod: pod().Toleration("b", v1.TolerationOpEqual, "1", v1.TaintEffectNoSchedule).
				Toleration("a", v1.TolerationOpEqual, "2", v1.TaintEffectNoSchedule).Obj(),
			want: sched(map[string]any{framework.TolerationsSignerName: []any{
				map[string]any{"key": "a", "operator": "Equal", "value": "2", "effect": "NoSchedule"},
				map[string]any{"key": "b", "operator": "Equal", "value": "1", "effect": "NoSchedule"},
			}}),
		},
		{
			name:    "NodeAffinity signs affinity and nodeSelector",
			plugins: []string{"NodeAffinity"},
			pod:     pod().NodeSelector(map[string]string{"disk": "ssd"}).RequiredNodeAffinity(term("zone", "b", "a")).PreferredNodeAffinity(5, term("rack", "r1")).Obj(),
			want: sched(map[string]any{
				framework.NodeSelectorSignerName: map[string]any{"disk": "ssd"},
				framework.NodeAffinitySignerName: map[string]any{
					"Required":  []any{`{"MatchExpressions":["{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}"],"MatchFields":[]}`},
					"Preferred": []any{`{"Weight":5,"Preference":{"MatchExpressions":["{\"key\":\"rack\",\"operator\":\"In\",\"values\":[\"r1\"]}"],"MatchFields":[]}}`},
				},
			}),
		},
		{
			name:    "NodeAffinity without affinity",
			plugins: []string{"NodeAffinity"},
			pod:     pod().Obj(),
			want:    sched(map[string]any{framework.NodeSelectorSignerName: nil, framework.NodeAffinitySignerName: nil}),
		},
		{
			name:    "NodePorts signs the sorted set of host ports",
			plugins: []string{"NodePorts"},
			pod:     pod().HostPort("", v1.ProtocolTCP, 8080).HostPort("", v1.ProtocolUDP, 53).HostPort("", v1.ProtocolUDP, 8080).Obj(),
			want:    sched(map[string]any{framework.HostPortsSignerName: []any{53.0, 8080.0}}),
		},
		{
			name:    "NodeResourcesFit and BalancedAllocation sign the same requests",
			plugins: []string{"NodeResourcesFit", "NodeResourcesBalancedAllocation"},
			pod:     pod().Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Overhead(map[v1.ResourceName]string{v1.ResourceCPU: "100m"}).Obj(),
			want: sched(map[string]any{framework.ResourcesSignerName: decoded(t, &framework.Resource{
				MilliCPU: 1100, Memory: 1 << 30,
			})}),
		},
		{
			name:    "the storage plugins sign volumes other than ConfigMaps and Secrets",
			plugins: []string{"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"},
			pod: pod().PVC("data").
				Volume(v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}}).
				Volume(v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}).Obj(),
			want: sched(map[string]any{framework.VolumesSignerName: []any{`{"persistentVolumeClaim":{"claimName":"data"}}`}}),
		},
		{
			name:    "InterPodAffinity signs labels",
			plugins: []string{"InterPodAffinity"},
			pod:     pod().Label("app", "web").Obj(),
			want:    sched(map[string]any{framework.LabelsSignerName: map[string]any{"app": "web"}}),
		},
		{
			name:    "InterPodAffinity ignoring existing pods' preferred terms leaves labels out",
			plugins: []string{"InterPodAffinity"},
			args: []configv1.PluginConfig{{Name: "InterPodAffinity", Args: k8sruntime.RawExtension{Object: &configv1.InterPodAffinityArgs{
				IgnorePreferredTermsOfExistingPods: true,
			}}}},
			pod:  pod().Label("app", "web").Obj(),
			want: sched(nil),
		},
		{
			name:    "pod anti-affinity is unsignable",
			plugins: []string{"InterPodAffinity"},
			pod:     pod().PodAntiAffinity(v1.PodAffinityTerm{TopologyKey: v1.LabelHostname}).Obj(),
		},
		{
			name:    "PodTopologySpread's system default constraints make every pod unsignable",
			plugins: []string{"PodTopologySpread"},
			pod:     pod().Obj(),
		},
		{
			name:    "PodTopologySpread with defaultingType List and no constraints signs with no fragment",
			plugins: []string{"PodTopologySpread"},
			args:    ptsArgs(&configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting}),
			pod:     pod().Obj(),
			want:    sched(nil),
		},
		{
			name:    "a pod's own spread constraints are unsignable",
			plugins: []string{"PodTopologySpread"},
			args:    ptsArgs(&configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting}),
			pod:     pod().SpreadConstraint(1, v1.LabelTopologyZone, v1.DoNotSchedule, "app", "web").Obj(),
		},
		{
			name:    "ImageLocality signs the set of container and init container images, normalized; image volumes are left out",
			plugins: []string{"ImageLocality"},
			pod:     pod().Container("nginx").Container("busybox:1.36").InitContainer("nginx:latest").ImageVolume("v", "data:1").Obj(),
			want:    sched(map[string]any{framework.ImageNamesSignerName: []any{"busybox:1.36", "nginx:latest"}}),
		},
		{
			name:    "NodeDeclaredFeatures signs a pod that needs no feature with an empty set",
			plugins: []string{"NodeDeclaredFeatures"},
			pod:     pod().Container("img").Obj(),
			want:    sched(map[string]any{framework.FeaturesSignerName: "000000000"}),
		},
		{
			name:    "NodeDeclaredFeatures signs the features the pod needs, one bit per feature 1.37.2 knows, in name order (RestartAllContainersOnContainerExits and UserNamespacesHostNetworkSupport before VolumeBindMountOptions, last)",
			plugins: []string{"NodeDeclaredFeatures"},
			pod:     pod().RestartAllContainersOn(42).HostNetwork(true).HostUsers(false).Obj(),
			want:    sched(map[string]any{framework.FeaturesSignerName: "000000110"}),
		},
		{
			name:    "UnsupportedFeatures signs with no fragment",
			plugins: []string{"UnsupportedFeatures"},
			pod:     pod().Obj(),
			want:    sched(nil),
		},
		{
			name:    "plugins at other points do not take part",
			plugins: []string{"SchedulingGates", "DefaultPreemption"},
			pod:     pod().Obj(),
			want:    sched(nil),
		},
		{
			name:    "batching turned off signs nothing",
			plugins: []string{"NodeName"},
			pod:     pod().Obj(),
			opts:    []runtime.Option{runtime.WithOpportunisticBatching(false)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []configv1.Plugin
			for _, n := range tt.plugins {
				ps = append(ps, st.Plugin(n, 0))
			}
			profile := st.PluginProfile(ps...)
			profile.PluginConfig = tt.args
			got := signature(t, profile, tt.pod, tt.opts...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("signature (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignPodDefaultProfile pins upstream's consequence of PodTopologySpread
// signing: the default profile (defaultingType System) signs no pod, so
// it never batches; without PodTopologySpread it signs every plain pod,
// and pods that differ only in what no plugin looks at sign alike.
func TestSignPodDefaultProfile(t *testing.T) {
	a := st.MakePod().Name("a").UID("a").SchedulerName("default-scheduler").Label("app", "web").Container("nginx").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).
		Volume(v1.Volume{Name: "token", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "a-token"}}}).Obj()
	b := a.DeepCopy()
	b.Name, b.UID = "b", "b"
	b.Spec.Volumes[0].Secret.SecretName = "b-token"
	c := a.DeepCopy()
	c.Labels["app"] = "db"

	defaults := runtime.WithDefaultPlugins(plugins.DefaultPlugins())
	if got := signature(t, &configv1.KubeSchedulerProfile{}, a, defaults); got != nil {
		t.Errorf("the default profile signed a pod: %v", got)
	}
	noSpread := &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
		Disabled: []configv1.Plugin{{Name: "PodTopologySpread"}},
	}}}
	sa, sb, sc := signature(t, noSpread, a, defaults), signature(t, noSpread, b, defaults), signature(t, noSpread, c, defaults)
	if sa == nil {
		t.Fatal("the default profile without PodTopologySpread did not sign a plain pod")
	}
	if diff := cmp.Diff(sa, sb); diff != "" {
		t.Errorf("pods differing only in their Secret volume sign differently (-a +b):\n%s", diff)
	}
	if cmp.Equal(sa, sc) {
		t.Error("pods with different labels sign alike, though InterPodAffinity reads labels")
	}
}

// TestSignPodOrder: the signature does not depend on the order plugins
// sign in (the runtime lets those that refuse pods sign first): the
// default profile's plugins, in order and reversed, sign a pod that every
// fragment describes alike.
func TestSignPodOrder(t *testing.T) {
	pod := st.MakePod().Name("p").SchedulerName("default-scheduler").Label("app", "web").
		Container("nginx").InitContainer("busybox:1.36").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).
		HostPort("", v1.ProtocolTCP, 8080).NodeSelector(map[string]string{"disk": "ssd"}).
		Toleration("a", v1.TolerationOpEqual, "1", v1.TaintEffectNoSchedule).PVC("data").Obj()
	var forward, reversed []configv1.Plugin
	for _, p := range plugins.DefaultPlugins().MultiPoint.Enabled {
		forward = append(forward, st.Plugin(p.Name, 0))
	}
	for i := len(forward) - 1; i >= 0; i-- {
		reversed = append(reversed, forward[i])
	}
	args := []configv1.PluginConfig{{Name: "PodTopologySpread", Args: k8sruntime.RawExtension{Object: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting}}}}
	in, back := st.PluginProfile(forward...), st.PluginProfile(reversed...)
	in.PluginConfig, back.PluginConfig = args, args
	sigIn, sigBack := signature(t, in, pod), signature(t, back, pod)
	if len(sigIn) != 11 {
		t.Fatalf("the default profile's plugins signed %v, want the schedulerName and the 10 kinds of fragment", sigIn)
	}
	if diff := cmp.Diff(sigIn, sigBack); diff != "" {
		t.Errorf("signature (-in order +reversed):\n%s", diff)
	}
}
