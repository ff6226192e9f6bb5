package unsupportedfeatures_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	plugintestregistry "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/unsupportedfeatures"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// stand-in takes the place of a plugin the guard asks for. Only its name
// and extension points matter: it filters and scores nothing.
type standIn struct{ name string }

func (p *standIn) Name() string { return p.name }
func (p *standIn) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}
func (p *standIn) Score(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) (int64, *framework.Status) {
	return 0, nil
}
func (p *standIn) ScoreExtensions() framework.ScoreExtensions { return nil }

// registry holds the guard, the plugins a profile needs, and stand-ins for
// InterPodAffinity and PodTopologySpread. Only those two count as built.
func registry(t *testing.T) runtime.Registry {
	built := sets.New("InterPodAffinity", "PodTopologySpread")
	r := runtime.Registry{}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.Register(queuesort.Name, queuesort.New, runtime.ArgsSpec{}))
	must(r.Register(defaultbinder.Name, defaultbinder.New, runtime.ArgsSpec{}))
	must(r.Register(unsupportedfeatures.Name, unsupportedfeatures.NewFactory(built.Has), runtime.ArgsSpec{}))
	for _, name := range sets.List(built) {
		must(r.Register(name, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
			return &standIn{name: name}, nil
		}, runtime.ArgsSpec{}))
	}
	return r
}

func TestUnsupportedFeatures(t *testing.T) {
	const (
		claimPlugins = "the VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone plugins: not available in profile-scheduler yet"
	)
	ipa := st.Plugin("InterPodAffinity", 0)
	pts := st.Plugin("PodTopologySpread", 0)
	guard := st.Plugin(unsupportedfeatures.Name, 0)
	antiAffinityHolder := st.MakePod().Name("holder").Node("n1").Label("app", "db").PodAntiAffinity(st.PodAffinityTerm("app", "web", "kubernetes.io/hostname")).Obj()
	tests := []struct {
		name     string
		profile  *configv1.KubeSchedulerProfile
		pod      *v1.Pod
		existing []*v1.Pod
		// wantReasons are the guard's reasons; none means the pod passes.
		wantReasons []string
	}{
		{
			name:    "a plain pod passes",
			profile: st.PluginProfile(guard),
			pod:     st.MakePod().Name("p").Container("img").Obj(),
		},
		{
			name:        "persistent volume claims",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").PVC("data").PVC("logs").Obj(),
			wantReasons: []string{"pod uses persistentVolumeClaim volumes, which need " + claimPlugins},
		},
		{
			name:        "generic ephemeral volumes",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").EphemeralVolume("scratch").Obj(),
			wantReasons: []string{"pod uses ephemeral volumes, which need " + claimPlugins},
		},
		{
			name:    "shared disks and migrated in-tree volumes",
			profile: st.PluginProfile(guard),
			pod: st.MakePod().Name("p").
				Volume(v1.Volume{Name: "a", VolumeSource: v1.VolumeSource{RBD: &v1.RBDVolumeSource{}}}).
				Volume(v1.Volume{Name: "b", VolumeSource: v1.VolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{}}}).Obj(),
			wantReasons: []string{
				"pod uses rbd volumes, which need the VolumeRestrictions plugin: not available in profile-scheduler yet",
				"pod uses azureDisk volumes, which need the NodeVolumeLimits plugin: not available in profile-scheduler yet",
			},
		},
		{
			name:    "volumes no plugin checks pass",
			profile: st.PluginProfile(guard),
			pod: st.MakePod().Name("p").
				Volume(v1.Volume{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}).
				Volume(v1.Volume{Name: "b", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}).
				Volume(v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}}).Obj(),
		},
		{
			name:        "resource claims",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").ResourceClaim("gpu", "gpu-template").Obj(),
			wantReasons: []string{"pod uses resource claims, which need the DynamicResources plugin: not available in profile-scheduler yet"},
		},
		{
			name:        "pod affinity without InterPodAffinity",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").PodAffinity(st.PodAffinityTerm("app", "db", "zone")).Obj(),
			wantReasons: []string{"pod uses pod affinity, which needs the InterPodAffinity plugin: not enabled in this profile"},
		},
		{
			name:    "pod anti-affinity with InterPodAffinity",
			profile: st.PluginProfile(guard, ipa),
			pod:     st.MakePod().Name("p").PodAntiAffinity(st.PodAffinityTerm("app", "db", "zone")).Obj(),
		},
		{
			name: "required anti-affinity needs InterPodAffinity at Filter",
			profile: func() *configv1.KubeSchedulerProfile {
				p := st.PluginProfile(guard, ipa)
				p.Plugins.Filter.Disabled = []configv1.Plugin{ipa}
				return p
			}(),
			pod: st.MakePod().Name("p").PodAntiAffinity(st.PodAffinityTerm("app", "db", "zone")).
				PreferredPodAffinity(10, st.PodAffinityTerm("app", "cache", "zone")).Obj(),
			wantReasons: []string{"pod uses pod affinity and anti-affinity, which needs the InterPodAffinity plugin: not enabled at Filter in this profile"},
		},
		{
			name: "preferred anti-affinity only needs InterPodAffinity at Score",
			profile: func() *configv1.KubeSchedulerProfile {
				p := st.PluginProfile(guard, ipa)
				p.Plugins.Filter.Disabled = []configv1.Plugin{ipa}
				return p
			}(),
			pod: st.MakePod().Name("p").PreferredPodAntiAffinity(10, st.PodAffinityTerm("app", "db", "zone")).Obj(),
		},
		{
			name:        "topology spread without PodTopologySpread",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").SpreadConstraint(1, "zone", v1.DoNotSchedule, "app", "web").Obj(),
			wantReasons: []string{"pod uses topologySpreadConstraints, which need the PodTopologySpread plugin: not enabled in this profile"},
		},
		{
			name:    "topology spread with PodTopologySpread",
			profile: st.PluginProfile(guard, pts),
			pod:     st.MakePod().Name("p").SpreadConstraint(1, "zone", v1.ScheduleAnyway, "app", "web").Obj(),
		},
		{
			name:        "matching the anti-affinity of a pod already placed",
			profile:     st.PluginProfile(guard),
			pod:         st.MakePod().Name("p").Label("app", "web").Obj(),
			existing:    []*v1.Pod{antiAffinityHolder},
			wantReasons: []string{"pod matches the required anti-affinity of pods already on nodes, which needs the InterPodAffinity plugin: not enabled in this profile"},
		},
		{
			name:     "not matching the anti-affinity of a pod already placed",
			profile:  st.PluginProfile(guard),
			pod:      st.MakePod().Name("p").Label("app", "api").Obj(),
			existing: []*v1.Pod{antiAffinityHolder},
		},
		{
			name:     "another namespace is not selected by default",
			profile:  st.PluginProfile(guard),
			pod:      st.MakePod().Name("p").Namespace("other").Label("app", "web").Obj(),
			existing: []*v1.Pod{antiAffinityHolder},
		},
		{
			name:     "a pod already placed with InterPodAffinity in the profile",
			profile:  st.PluginProfile(guard, ipa),
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{antiAffinityHolder},
		},
		{
			name:    "every missing feature is a reason",
			profile: st.PluginProfile(guard),
			pod: st.MakePod().Name("p").PVC("data").ResourceClaim("gpu", "t").
				SpreadConstraint(1, "zone", v1.ScheduleAnyway, "app", "web").Obj(),
			wantReasons: []string{
				"pod uses persistentVolumeClaim volumes, which need " + claimPlugins,
				"pod uses resource claims, which need the DynamicResources plugin: not available in profile-scheduler yet",
				"pod uses topologySpreadConstraints, which need the PodTopologySpread plugin: not enabled in this profile",
			},
		},
	}
	nodes := []*v1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.existing, nodes)
			fwk := st.NewFramework(t, registry(t), tt.profile, snapshot)
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			var want *framework.Status
			wantMessage := ""
			if len(tt.wantReasons) > 0 {
				want = framework.NewStatus(framework.UnschedulableAndUnresolvable, tt.wantReasons...).WithPlugin(unsupportedfeatures.Name)
				wantMessage = fmt.Sprintf("0/2 nodes are available: %s.", strings.Join(tt.wantReasons, ", "))
			}
			if diff := cmp.Diff(want, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMessage, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnsupportedFeaturesNew(t *testing.T) {
	// New knows nothing about what is built: a missing plugin is reported as
	// not enabled in the profile.
	r := plugintestregistry.New(map[string]runtime.Factory{unsupportedfeatures.Name: unsupportedfeatures.New})
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n").Obj()})
	fwk := st.NewFramework(t, r, st.PluginProfile(st.Plugin(unsupportedfeatures.Name, 0)), snapshot)
	got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").ResourceClaim("c", "t").Obj())
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod uses resource claims, which need the DynamicResources plugin: not enabled in this profile").WithPlugin(unsupportedfeatures.Name)
	if diff := cmp.Diff(want, got.PreFilter); diff != "" {
		t.Errorf("PreFilter (-want +got):\n%s", diff)
	}
}

func TestUnsupportedFeaturesEvents(t *testing.T) {
	fwk := st.NewFramework(t, registry(t), st.PluginProfile(st.Plugin(unsupportedfeatures.Name, 0)), nil)
	pod := st.MakePod().Name("p").Label("app", "web").Obj()
	deleted := framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
	tests := []struct {
		name   string
		event  framework.ClusterEvent
		oldObj any
		want   framework.QueueingHint
	}{
		{"a pod with required anti-affinity went away", deleted, st.MakePod().Name("h").Node("n").PodAntiAffinity(st.PodAffinityTerm("app", "web", "zone")).Obj(), framework.Queue},
		{"a pod without anti-affinity went away", deleted, st.MakePod().Name("h").Node("n").Obj(), framework.QueueSkip},
		{"a node was added", framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, nil, framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var newObj any
			if tt.event.Resource == framework.Node {
				newObj = st.MakeNode().Name("n").Obj()
			}
			got, err := st.QueueingHint(t.Context(), fwk, unsupportedfeatures.Name, tt.event, pod, tt.oldObj, newObj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkUnsupportedFeatures(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node { return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj() })
	var pods []*v1.Pod
	for i := 0; i < len(nodes); i += 50 {
		pods = append(pods, st.MakePod().Name(fmt.Sprintf("holder-%d", i)).Node(nodes[i].Name).Label("app", "db").
			PodAntiAffinity(st.PodAffinityTerm("app", "db", "kubernetes.io/hostname")).Obj())
	}
	snapshot := st.NewSnapshot(pods, nodes)
	r := plugintestregistry.New(map[string]runtime.Factory{unsupportedfeatures.Name: unsupportedfeatures.New})
	fwk := st.NewFramework(b, r, st.PluginProfile(st.Plugin(unsupportedfeatures.Name, 0)), snapshot, runtime.WithParallelism(1))
	b.Run("PreFilter", func(b *testing.B) {
		// PreFilter is where the guard works; Filter has nothing to run.
		st.BenchmarkFilter(b, fwk, snapshot, st.MakePod().Name("p").Label("app", "web").Container("img").
			Volume(v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}).Obj())
	})
}

// fakeDRA resolves extended resources to DeviceClasses, all the guard reads.
type fakeDRA map[v1.ResourceName]*resourceapi.DeviceClass

func (f fakeDRA) ResourceClaims() framework.ResourceClaimTracker               { return nil }
func (f fakeDRA) ResourceSlices() framework.ResourceSliceLister                { return nil }
func (f fakeDRA) DeviceClasses() framework.DeviceClassLister                   { return nil }
func (f fakeDRA) DeviceClassResolver() framework.DeviceClassResolver           { return f }
func (f fakeDRA) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass { return f[name] }

// TestExtendedResourcesBackedByDRA: an extended resource a DeviceClass
// provides, by its explicit or implicit name, needs DynamicResources,
// which NodeResourcesFit leaves it to; one no class provides (a device
// plugin's) needs nothing.
func TestExtendedResourcesBackedByDRA(t *testing.T) {
	dra := fakeDRA{
		"example.com/gpu": {ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}},
		v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "fpga"): {ObjectMeta: metav1.ObjectMeta{Name: "fpga"}},
	}
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n").Obj()})
	fwk := st.NewFramework(t, registry(t), st.PluginProfile(st.Plugin(unsupportedfeatures.Name, 0)), snapshot, runtime.WithSharedDRAManager(dra))
	pod := func(resources ...v1.ResourceName) *v1.Pod {
		p := st.MakePod().Name("p").Obj()
		p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}}
		for _, r := range resources {
			p.Spec.Containers[0].Resources.Requests[r] = resource.MustParse("1")
		}
		return p
	}
	// The test registry does not provide DynamicResources.
	needs := framework.NewStatus(framework.UnschedulableAndUnresolvable,
		"pod requests extended resources backed by DRA, which need the DynamicResources plugin: not available in profile-scheduler yet").WithPlugin(unsupportedfeatures.Name)
	tests := []struct {
		name string
		pod  *v1.Pod
		want *framework.Status
	}{
		{name: "device plugin resource", pod: pod("example.com/nic", "cpu")},
		{name: "explicit name", pod: pod("example.com/gpu"), want: needs},
		{name: "implicit name", pod: pod(v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "fpga")), want: needs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if diff := cmp.Diff(tt.want, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
		})
	}
}
