package plugins_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	schedcache "github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

func TestDefaultPlugins(t *testing.T) {
	want := &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{
		{Name: "SchedulingGates"},
		{Name: "PrioritySort"},
		{Name: "UnsupportedFeatures"},
		{Name: "NodeName"},
		{Name: "NodeUnschedulable"},
		{Name: "TaintToleration", Weight: ptr.To[int32](3)},
		{Name: "NodeAffinity", Weight: ptr.To[int32](2)},
		{Name: "NodePorts"},
		{Name: "NodeResourcesFit", Weight: ptr.To[int32](1)},
		{Name: "VolumeRestrictions"},
		{Name: "NodeVolumeLimits"},
		{Name: "VolumeBinding"},
		{Name: "VolumeZone"},
		{Name: "PodTopologySpread", Weight: ptr.To[int32](2)},
		{Name: "InterPodAffinity", Weight: ptr.To[int32](2)},
		{Name: "DynamicResources", Weight: ptr.To[int32](2)},
		{Name: "DefaultPreemption"},
		{Name: "NodeResourcesBalancedAllocation", Weight: ptr.To[int32](1)},
		{Name: "ImageLocality", Weight: ptr.To[int32](1)},
		{Name: "DefaultBinder"},
		{Name: "NodeDeclaredFeatures"},
	}}}
	if diff := cmp.Diff(want, plugins.DefaultPlugins()); diff != "" {
		t.Errorf("DefaultPlugins (-want +got):\n%s", diff)
	}
	var wantOmitted []string
	if diff := cmp.Diff(wantOmitted, plugins.OmittedDefaultPlugins()); diff != "" {
		t.Errorf("OmittedDefaultPlugins (-want +got):\n%s", diff)
	}
	// Every default plugin is registered, and every omitted one is not.
	r := plugins.NewInTreeRegistry()
	for _, p := range plugins.DefaultPlugins().MultiPoint.Enabled {
		if _, ok := r[p.Name]; !ok {
			t.Errorf("default plugin %s is not registered", p.Name)
		}
	}
	for _, name := range plugins.OmittedDefaultPlugins() {
		if _, ok := r[name]; ok {
			t.Errorf("omitted plugin %s is registered", name)
		}
	}
}

func TestOmittedDefaultPluginsFor(t *testing.T) {
	all := plugins.OmittedDefaultPlugins()
	tests := []struct {
		name    string
		profile *configv1.KubeSchedulerProfile
		want    []string
	}{
		{name: "no profile", want: all},
		{name: "no plugins", profile: &configv1.KubeSchedulerProfile{}, want: all},
		{
			name: "disabled at multiPoint",
			profile: &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
				Disabled: []configv1.Plugin{{Name: "DynamicResources"}, {Name: "DefaultPreemption"}},
			}}},
			want: slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "DynamicResources" || s == "DefaultPreemption" }),
		},
		{
			name: "all defaults disabled",
			profile: &configv1.KubeSchedulerProfile{Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{
				Disabled: []configv1.Plugin{{Name: "*"}},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plugins.OmittedDefaultPluginsFor(tt.profile)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func newDefaultFramework(tb testing.TB, profile *configv1.KubeSchedulerProfile, snapshot framework.SharedLister, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	if snapshot == nil {
		snapshot = st.NewSnapshot(nil, nil)
	}
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), profile, snapshot,
		append([]runtime.Option{runtime.WithDefaultPlugins(plugins.DefaultPlugins())}, opts...)...)
}

func names(set configv1.PluginSet) []string {
	var out []string
	for _, p := range set.Enabled {
		name := p.Name
		if p.Weight != nil {
			name = fmt.Sprintf("%s(%d)", name, *p.Weight)
		}
		out = append(out, name)
	}
	return out
}

func TestDefaultProfile(t *testing.T) {
	fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, nil)
	got := fwk.ListPlugins()
	want := map[string][]string{
		"PreEnqueue": {"SchedulingGates", "DynamicResources", "DefaultPreemption"},
		"QueueSort":  {"PrioritySort"},
		"PreFilter": {"UnsupportedFeatures", "NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
			"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity", "DynamicResources", "NodeDeclaredFeatures"},
		"Filter": {"NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
			"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
			"DynamicResources", "NodeDeclaredFeatures"},
		"PostFilter": {"DynamicResources", "DefaultPreemption"},
		"PreScore": {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding", "PodTopologySpread", "InterPodAffinity",
			"NodeResourcesBalancedAllocation", "ImageLocality"},
		"Score": {"TaintToleration(3)", "NodeAffinity(2)", "NodeResourcesFit(1)", "VolumeBinding(1)", "PodTopologySpread(2)", "InterPodAffinity(2)",
			"DynamicResources(2)", "NodeResourcesBalancedAllocation(1)", "ImageLocality(1)"},
		"Reserve": {"VolumeBinding", "DynamicResources"},
		"PreBind": {"VolumeBinding", "DynamicResources"},
		"Bind":    {"DefaultBinder"},
	}
	gotMap := map[string][]string{
		"PreEnqueue": names(got.PreEnqueue), "QueueSort": names(got.QueueSort), "PreFilter": names(got.PreFilter),
		"Filter": names(got.Filter), "PostFilter": names(got.PostFilter), "PreScore": names(got.PreScore),
		"Score": names(got.Score), "Reserve": names(got.Reserve), "PreBind": names(got.PreBind), "Bind": names(got.Bind),
	}
	if diff := cmp.Diff(want, gotMap); diff != "" {
		t.Errorf("resolved default profile (-want +got):\n%s", diff)
	}
	for _, empty := range []configv1.PluginSet{got.Permit, got.PostBind} {
		if len(empty.Enabled) != 0 {
			t.Errorf("unexpected plugins %v", names(empty))
		}
	}
}

type res = map[v1.ResourceName]string

func TestDefaultProfileBehaviour(t *testing.T) {
	t.Run("unschedulable message", func(t *testing.T) {
		nodes := []*v1.Node{
			st.MakeNode().Name("small1").Capacity(res{"cpu": "1", "memory": "4Gi"}).Obj(),
			st.MakeNode().Name("small2").Capacity(res{"cpu": "1", "memory": "4Gi"}).Obj(),
			st.MakeNode().Name("small3").Capacity(res{"cpu": "1", "memory": "4Gi"}).Obj(),
			st.MakeNode().Name("gpu1").Capacity(res{"cpu": "8", "memory": "4Gi"}).Taint("gpu", "true", v1.TaintEffectNoSchedule).Obj(),
			st.MakeNode().Name("gpu2").Capacity(res{"cpu": "8", "memory": "4Gi"}).Taint("gpu", "true", v1.TaintEffectNoSchedule).Obj(),
		}
		snapshot := st.NewSnapshot(nil, nodes)
		fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, snapshot)
		got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").Req(res{"cpu": "2"}).Obj())
		want := "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu."
		if diff := cmp.Diff(want, got.Message); diff != "" {
			t.Errorf("message (-want +got):\n%s", diff)
		}
	})
	t.Run("weighted scores", func(t *testing.T) {
		nodes := []*v1.Node{
			st.MakeNode().Name("a").Capacity(res{"cpu": "4", "memory": "8Gi"}).Taint("spot", "true", v1.TaintEffectPreferNoSchedule).Obj(),
			st.MakeNode().Name("b").Capacity(res{"cpu": "4", "memory": "8Gi"}).Label("zone", "z1").Image(500*1024*1024, "nginx:latest").Obj(),
		}
		snapshot := st.NewSnapshot(nil, nodes)
		fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, snapshot)
		pod := st.MakePod().Name("p").Req(res{"cpu": "1", "memory": "2Gi"}).
			PreferredNodeAffinity(1, st.LabelTerm("zone", v1.NodeSelectorOpIn, "z1")).Obj()
		pod.Spec.Containers[0].Image = "nginx"
		got := st.RunCycle(t.Context(), fwk, snapshot, pod)
		// TaintToleration 0/100 ×3, NodeAffinity 0/100 ×2, NodeResourcesFit
		// 75 ×1, BalancedAllocation 75 ×1, ImageLocality 0/23 ×1.
		want := map[string]int64{"a": 150, "b": 673}
		if diff := cmp.Diff(want, got.Scores); diff != "" {
			t.Errorf("scores (-want +got):\n%s", diff)
		}
	})
	t.Run("node features a pod needs", func(t *testing.T) {
		nodes := []*v1.Node{
			st.MakeNode().Name("old-kubelet").Capacity(res{"cpu": "4", "memory": "8Gi"}).Obj(),
			st.MakeNode().Name("new-kubelet").Capacity(res{"cpu": "4", "memory": "8Gi"}).DeclaredFeatures("RestartAllContainersOnContainerExits").Obj(),
		}
		snapshot := st.NewSnapshot(nil, nodes)
		fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, snapshot)
		got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").RestartAllContainersOn(42).Obj())
		want := map[string]*framework.Status{
			"old-kubelet": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match Pod's required features").WithPlugin("NodeDeclaredFeatures"),
			"new-kubelet": nil,
		}
		if diff := cmp.Diff(want, got.Filter); diff != "" {
			t.Errorf("filter (-want +got):\n%s", diff)
		}
	})
	t.Run("resource claims", func(t *testing.T) {
		nodes := []*v1.Node{st.MakeNode().Name("gpu").Obj(), st.MakeNode().Name("cpu").Obj()}
		snapshot := st.NewSnapshot(nil, nodes)
		gpuClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "default", UID: "gpu-uid"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "req", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: gpuClass.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		}
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-slice"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("gpu"),
				Pool: resourceapi.ResourcePool{Name: "gpu", ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "gpu-0"}}},
		}
		client := fake.NewClientset(gpuClass, claim, slice)
		f := informers.NewSharedInformerFactory(client, 0)
		ctx, cancel := context.WithCancel(t.Context())
		dra, err := dynamicresources.NewManager(ctx, client, f)
		if err != nil {
			t.Fatal(err)
		}
		f.Start(ctx.Done())
		defer func() { cancel(); f.Shutdown() }()
		f.WaitForCacheSync(ctx.Done())
		cache.WaitForCacheSync(ctx.Done(), dra.ClaimEvents().HasSynced, dra.SliceEvents().HasSynced, dra.DeviceClassEvents().HasSynced)
		fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, snapshot,
			runtime.WithClientSet(client), runtime.WithInformerFactory(f), runtime.WithSharedDRAManager(dra))

		pod := st.MakePod().Namespace("default").Name("p").Obj()
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		got := st.RunCycle(t.Context(), fwk, snapshot, pod)
		want := map[string]*framework.Status{
			"gpu": nil,
			"cpu": framework.NewStatus(framework.UnschedulableAndUnresolvable, "cannot allocate all claims").WithPlugin("DynamicResources"),
		}
		if diff := cmp.Diff(want, got.Filter); diff != "" {
			t.Errorf("filter (-want +got):\n%s", diff)
		}

		// An extended resource backed by DRA: devices of the class on the
		// node that has some; NodeResourcesFit leaves it to DynamicResources.
		got = st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Namespace("default").Name("q").Req(map[v1.ResourceName]string{"example.com/gpu": "1"}).Obj())
		want = map[string]*framework.Status{
			"gpu": nil,
			"cpu": framework.NewStatus(framework.UnschedulableAndUnresolvable, "cannot allocate all claims").WithPlugin("DynamicResources"),
		}
		if diff := cmp.Diff(want, got.Filter); diff != "" {
			t.Errorf("extended resource filter (-want +got):\n%s", diff)
		}
	})
}

// A profile as a user pastes it from a kube-scheduler configuration.
const pastedProfiles = `
- schedulerName: bin-packing
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
        weight: 5
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      - name: ImageLocality
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 1
        - name: memory
          weight: 3
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - key: pool
              operator: In
              values: [batch]
- schedulerName: ratio
  plugins:
    multiPoint:
      disabled:
      - name: '*'
      enabled:
      - name: PrioritySort
      - name: NodeResourcesFit
        weight: 1
      - name: DefaultBinder
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources:
        - name: cpu
          weight: 2
        - name: memory
          weight: 1
        requestedToCapacityRatio:
          shape:
          - utilization: 0
            score: 0
          - utilization: 50
            score: 8
          - utilization: 100
            score: 10
`

func TestPastedUpstreamProfiles(t *testing.T) {
	var profiles []configv1.KubeSchedulerProfile
	if err := yaml.UnmarshalStrict([]byte(pastedProfiles), &profiles); err != nil {
		t.Fatal(err)
	}
	nodes := []*v1.Node{
		st.MakeNode().Name("busy").Label("pool", "batch").Capacity(res{"cpu": "4", "memory": "8Gi"}).Obj(),
		st.MakeNode().Name("empty").Label("pool", "batch").Capacity(res{"cpu": "4", "memory": "8Gi"}).Obj(),
		st.MakeNode().Name("web").Label("pool", "web").Capacity(res{"cpu": "4", "memory": "8Gi"}).Obj(),
	}
	existing := []*v1.Pod{st.MakePod().Name("e").Node("busy").Req(res{"cpu": "2", "memory": "1Gi"}).Obj()}
	pod := st.MakePod().Name("p").Req(res{"cpu": "1", "memory": "1Gi"}).Obj()
	enforced := framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match scheduler-enforced node affinity").WithPlugin("NodeAffinity")

	tests := []struct {
		profile    *configv1.KubeSchedulerProfile
		wantScore  []string
		wantFilter map[string]*framework.Status
		wantScores map[string]int64
	}{
		{
			profile:    &profiles[0],
			wantScore:  []string{"TaintToleration(3)", "NodeAffinity(2)", "NodeResourcesFit(5)", "VolumeBinding(1)", "PodTopologySpread(2)", "InterPodAffinity(2)", "DynamicResources(2)"},
			wantFilter: map[string]*framework.Status{"busy": nil, "empty": nil, "web": enforced},
			// MostAllocated with memory weighted 3: busy (75 + 25×3)/4 = 37,
			// empty (25 + 12×3)/4 = 15; ×5, plus TaintToleration 100 ×3.
			wantScores: map[string]int64{"busy": 300 + 37*5, "empty": 300 + 15*5},
		},
		{
			profile:    &profiles[1],
			wantScore:  []string{"NodeResourcesFit(1)"},
			wantFilter: map[string]*framework.Status{"busy": nil, "empty": nil, "web": nil},
			// Shape scores ×10. busy: cpu 75% → 80+(100-80)×25/50 = 90,
			// memory 25% → 80×25/50 = 40: round((90×2 + 40)/3) = 73.
			// empty: cpu 25% → 40, memory 12% → 80×12/50 = 19: round(99/3) = 33.
			wantScores: map[string]int64{"busy": 73, "empty": 33, "web": 33},
		},
	}
	for _, tt := range tests {
		t.Run(*tt.profile.SchedulerName, func(t *testing.T) {
			snapshot := st.NewSnapshot(existing, nodes)
			fwk := newDefaultFramework(t, tt.profile, snapshot)
			if diff := cmp.Diff(tt.wantScore, names(fwk.ListPlugins().Score)); diff != "" {
				t.Errorf("score plugins (-want +got):\n%s", diff)
			}
			got := st.RunCycle(t.Context(), fwk, snapshot, pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.wantFilter, got.Filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantScores, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPastedPodGroupPoints pins what upstream 1.37.2 does with its default
// gates: its expanded default profile lists DefaultPreemption under
// podGroupPostFilter and NodeResourcesFit under placementScore, points
// that only run for pod groups behind gates that are off. Pasted, they
// load and change nothing.
func TestPastedPodGroupPoints(t *testing.T) {
	const pasted = `
plugins:
  placementScore:
    enabled:
    - name: NodeResourcesFit
      weight: 1
  podGroupPostFilter:
    enabled:
    - name: DefaultPreemption
`
	var profile configv1.KubeSchedulerProfile
	if err := yaml.UnmarshalStrict([]byte(pasted), &profile); err != nil {
		t.Fatal(err)
	}
	nodes := []*v1.Node{
		st.MakeNode().Name("a").Capacity(res{"cpu": "4", "memory": "8Gi"}).Obj(),
		st.MakeNode().Name("b").Capacity(res{"cpu": "2", "memory": "8Gi"}).Obj(),
	}
	snapshot := st.NewSnapshot(nil, nodes)
	pod := st.MakePod().Name("p").Req(res{"cpu": "1", "memory": "1Gi"}).Obj()
	plain := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, snapshot)
	withPoints := newDefaultFramework(t, &profile, snapshot)
	if diff := cmp.Diff(plain.ListPlugins(), withPoints.ListPlugins()); diff != "" {
		t.Errorf("plugins (-default +pasted):\n%s", diff)
	}
	if diff := cmp.Diff(st.RunCycle(t.Context(), plain, snapshot, pod), st.RunCycle(t.Context(), withPoints, snapshot, pod)); diff != "" {
		t.Errorf("cycle (-default +pasted):\n%s", diff)
	}
}

// TestWorkloadPlugins builds what upstream 1.37.2's default profile adds
// with its workload gates on: the plugins construct from the in-tree
// registry and run at upstream's points, with upstream's weight.
func TestWorkloadPlugins(t *testing.T) {
	profile := st.MultiPointProfile(
		st.Plugin("GangScheduling", 0),
		st.Plugin("TopologyPlacementGenerator", 0),
		st.Plugin("PodGroupPodsCount", 1),
	)
	podGroups := st.NewPodGroups(nil, nil)
	fwk := newDefaultFramework(t, profile, st.NewSnapshot(nil, nil).WithPodGroups(podGroups),
		runtime.WithWorkloadGates(runtime.WorkloadGates{GenericWorkload: true, TopologyAwareWorkloadScheduling: true}),
		runtime.WithPodGroupManager(podGroups))
	got := fwk.ListPlugins()
	want := map[string][]string{
		"PreEnqueue":        {"SchedulingGates", "DynamicResources", "DefaultPreemption", "GangScheduling"},
		"Permit":            {"GangScheduling"},
		"PlacementGenerate": {"TopologyPlacementGenerator"},
		"PlacementScore":    {"NodeResourcesFit(1)", "PodGroupPodsCount(1)"},
	}
	gotPoints := map[string][]string{
		"PreEnqueue":        names(got.PreEnqueue),
		"Permit":            names(got.Permit),
		"PlacementGenerate": names(got.PlacementGenerate),
		"PlacementScore":    names(got.PlacementScore),
	}
	if diff := cmp.Diff(want, gotPoints); diff != "" {
		t.Errorf("plugins (-want +got):\n%s", diff)
	}
}

// TestDeferredPodScheduling: the in-tree registry holds DeferredPodScheduling
// built with upstream's default gates, so with
// InPlacePodVerticalScalingSchedulerPreemption off it is inert: a bound pod
// whose resize was deferred is not rejected at Permit.
func TestDeferredPodScheduling(t *testing.T) {
	reg, ok := plugins.NewInTreeRegistry()["DeferredPodScheduling"]
	if !ok {
		t.Fatal("DeferredPodScheduling is not registered")
	}
	fwk := newDefaultFramework(t, &configv1.KubeSchedulerProfile{}, nil)
	p, err := reg.Factory(t.Context(), nil, fwk)
	if err != nil {
		t.Fatal(err)
	}
	deferred := st.MakePod().Name("p").Node("n").Condition(v1.PodResizePending, v1.ConditionTrue, v1.PodReasonDeferred).Obj()
	if s, _ := p.(framework.PermitPlugin).Permit(t.Context(), framework.NewCycleState(), deferred, "n"); !s.IsSuccess() {
		t.Errorf("Permit of a deferred resize: %v, want success", s)
	}
}

func TestPastedProfileWithInvalidArgs(t *testing.T) {
	const profile = `
schedulerName: typo
pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: MostAllocated
      resources:
      - name: cpu
        wieght: 2
`
	var p configv1.KubeSchedulerProfile
	if err := yaml.UnmarshalStrict([]byte(profile), &p); err != nil {
		t.Fatal(err)
	}
	_, err := st.BuildFramework(plugins.NewInTreeRegistry(), &p, nil, runtime.WithDefaultPlugins(plugins.DefaultPlugins()))
	want := `PluginConfig plugin "NodeResourcesFit": decoding args: unknown field "scoringStrategy.resources[0].wieght"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

// TestDefaultPreemptionGenericWorkload: the in-tree DefaultPreemption
// preempts for pod groups (upstream's GenericWorkload behaviour) exactly in
// instances that are workload-aware; in the others it is built as without
// the gate, whatever the operator's gates.
func TestDefaultPreemptionGenericWorkload(t *testing.T) {
	const withoutFeature = "pod group preemption: DefaultPreemption was built without the GenericWorkload feature"
	on := runtime.WorkloadGates{GenericWorkload: true}
	tests := []struct {
		name           string
		profile        *configv1.KubeSchedulerProfile
		gates          runtime.WorkloadGates
		wantAware      bool
		wantPostFilter []string
		wantMessage    string
	}{
		{
			name:      "a profile enabling GangScheduling with the gate on",
			profile:   st.MultiPointProfile(st.Plugin("GangScheduling", 0)),
			gates:     on,
			wantAware: true,
			// As upstream's default plugins: DynamicResources frees the
			// claims of a group that did not fit, before preemption.
			wantPostFilter: []string{"DynamicResources", "DefaultPreemption"},
			wantMessage:    "pod group preemption: No preemption victims found for incoming preemptor",
		},
		{
			name:        "the default profile with the gate on",
			profile:     &configv1.KubeSchedulerProfile{},
			gates:       on,
			wantMessage: withoutFeature,
		},
		{
			name:        "the default profile with the gate off",
			profile:     &configv1.KubeSchedulerProfile{},
			wantMessage: withoutFeature,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			podGroups := st.NewPodGroups(nil, nil)
			// The scheduler cache's snapshot: pod-group preemption mutates it.
			fwk := newDefaultFramework(t, tt.profile, schedcache.NewEmptySnapshot(),
				runtime.WithWorkloadGates(tt.gates), runtime.WithPodGroupManager(podGroups))
			if fwk.WorkloadAware() != tt.wantAware {
				t.Fatalf("WorkloadAware() = %v, want %v", fwk.WorkloadAware(), tt.wantAware)
			}
			if diff := cmp.Diff(tt.wantPostFilter, names(fwk.ListPlugins().PodGroupPostFilter)); diff != "" {
				t.Errorf("PodGroupPostFilter plugins (-want +got):\n%s", diff)
			}
			// The plugin as the registry builds it for this instance.
			p, err := plugins.NewInTreeRegistry()["DefaultPreemption"].Factory(t.Context(), nil, fwk)
			if err != nil {
				t.Fatal(err)
			}
			pgInfo := &framework.PodGroupInfo{
				Namespace:       "default",
				Name:            "pg",
				Type:            framework.PodGroupKeyType,
				UnscheduledPods: []*v1.Pod{st.MakePod().Name("m1").PodGroupName("pg").Priority(10).Obj()},
				PodGroup:        &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pg"}},
			}
			unplaced := func(context.Context) (*framework.PodGroupAssignments, *framework.Status) {
				return nil, framework.NewStatus(framework.Unschedulable)
			}
			_, s := p.(framework.PodGroupPostFilterPlugin).PodGroupPostFilter(t.Context(), framework.NewCycleState(), pgInfo, unplaced)
			if diff := cmp.Diff(tt.wantMessage, s.Message()); diff != "" {
				t.Errorf("PodGroupPostFilter message (-want +got):\n%s", diff)
			}
		})
	}
}
