package volumebinding

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-helpers/storage/volume"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	plugintestregistry "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	zoneKey     = v1.LabelTopologyZone
	provisioner = "csi.example.com"
	// capDriver tracks storage capacity.
	capDriver = "cap.example.com"
)

// env is a framework instance running VolumeBinding over a fake client.
// Objects given to newEnv are put into the informers' stores directly
// (and into the client, for PreBind).
type env struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	fwk     framework.Framework
}

func registry(tb testing.TB) runtime.Registry {
	tb.Helper()
	r := plugintestregistry.New(nil)
	if err := r.Register(Name, New, runtime.ArgsSpec{Validate: func(o k8sruntime.Object) error {
		return ValidateArgs(o.(*configv1.VolumeBindingArgs))
	}}); err != nil {
		tb.Fatal(err)
	}
	return r
}

func profile(args *configv1.VolumeBindingArgs) *configv1.KubeSchedulerProfile {
	return st.WithPluginArgs(st.PluginProfile(st.Plugin(Name, 1)), Name, args)
}

func newEnv(tb testing.TB, snapshot framework.SharedLister, args *configv1.VolumeBindingArgs, objs ...k8sruntime.Object) *env {
	tb.Helper()
	client, factory := st.InformerFactory(tb, objs...)
	fwk := st.NewFramework(tb, registry(tb), profile(args), snapshot,
		runtime.WithClientSet(client), runtime.WithInformerFactory(factory))
	return &env{client: client, factory: factory, fwk: fwk}
}

// storageObjects is the cluster the Filter tests run on: zone a (n1) and
// zone b (n2), classes for each binding mode and provisioning case.
func storageObjects() []k8sruntime.Object {
	return []k8sruntime.Object{
		st.MakeStorageClass("immediate").Obj(),
		st.MakeStorageClass("local").WaitForFirstConsumer().Obj(),
		st.MakeStorageClass("zonal").WaitForFirstConsumer().Provisioner(provisioner).AllowedTopology(zoneKey, "a").Obj(),
		st.MakeStorageClass("anywhere").WaitForFirstConsumer().Provisioner(provisioner).Obj(),
		st.MakeStorageClass("tracked").WaitForFirstConsumer().Provisioner(capDriver).Obj(),
		st.MakeStorageClass("unset-mode").BindingMode(nil).Obj(),
		st.MakeCSIDriver(capDriver).StorageCapacity(true).Obj(),
		st.MakeCSIStorageCapacity("kube-system", "cap-a", "tracked").Topology(zoneKey, "a").Capacity("10Gi").Obj(),
		st.MakeCSIStorageCapacity("kube-system", "cap-b", "tracked").Topology(zoneKey, "b").Capacity("100Gi").MaximumVolumeSize("1Gi").Obj(),

		st.MakePV("pv-a").StorageClass("local").Capacity("5Gi").NodeAffinityIn(zoneKey, "a").ClaimRef("default", "bound-a", "bound-a").Phase(v1.VolumeBound).Obj(),
		st.MakePVC("default", "bound-a").StorageClass("local").Request("1Gi").Bound("pv-a").Obj(),
		st.MakePVC("default", "bound-missing").StorageClass("local").Request("1Gi").Bound("gone").Obj(),
		st.MakePVC("default", "bound-free").Request("1Gi").Bound("pv-free").Obj(),
		st.MakePV("pv-free").Capacity("1Gi").ClaimRef("default", "bound-free", "bound-free").Phase(v1.VolumeBound).Obj(),

		st.MakePV("pv-b-small").StorageClass("local").Capacity("1Gi").NodeAffinityIn(zoneKey, "b").Obj(),
		st.MakePV("pv-b-large").StorageClass("local").Capacity("10Gi").NodeAffinityIn(zoneKey, "b").Obj(),
		st.MakePVC("default", "wffc").StorageClass("local").Request("1Gi").Obj(),
		st.MakePV("pv-reserved").StorageClass("local").Capacity("1Gi").NodeAffinityIn(zoneKey, "a").ClaimRef("default", "wants-reserved", "").Obj(),
		st.MakePVC("default", "wants-reserved").StorageClass("local").Request("1Gi").Obj(),
		st.MakePVC("default", "wffc-big").StorageClass("local").Request("8Gi").Obj(),
		st.MakePVC("default", "wffc-huge").StorageClass("local").Request("50Gi").Obj(),
		st.MakePVC("default", "zonal").StorageClass("zonal").Request("1Gi").Obj(),
		st.MakePVC("default", "anywhere-on-n2").StorageClass("anywhere").Request("1Gi").Annotation(volume.AnnSelectedNode, "n2").Obj(),
		st.MakePVC("default", "tracked-5").StorageClass("tracked").Request("5Gi").Obj(),
		st.MakePVC("default", "tracked-20").StorageClass("tracked").Request("20Gi").Obj(),
		st.MakePVC("default", "tracked-any-size").StorageClass("tracked").Obj(),

		st.MakePVC("default", "immediate").StorageClass("immediate").Request("1Gi").Obj(),
		st.MakePVC("default", "no-class-object").StorageClass("nowhere").Request("1Gi").Obj(),
		st.MakePVC("default", "prebound").StorageClass("local").Request("1Gi").VolumeName("pv-b-small").Obj(),
		st.MakePVC("default", "lost").StorageClass("local").VolumeName("gone").Phase(v1.ClaimLost).Obj(),
		st.MakePVC("default", "deleting").StorageClass("local").Deleting().Obj(),
		st.MakePVC("default", "unset-mode").StorageClass("unset-mode").Obj(),
		st.MakePVC("default", "no-class").Request("1Gi").Obj(),
		st.MakePVC("default", "p-eph").StorageClass("anywhere").Request("1Gi").OwnedBy(st.MakePod().Name("p").Obj()).Obj(),
		st.MakePVC("default", "q-eph").StorageClass("anywhere").Request("1Gi").Obj(),
	}
}

func testNodes() []*v1.Node {
	return []*v1.Node{
		st.MakeNode().Name("n1").Label(zoneKey, "a").Obj(),
		st.MakeNode().Name("n2").Label(zoneKey, "b").Obj(),
	}
}

func TestFilter(t *testing.T) {
	uu := func(reasons ...string) *framework.Status {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...).WithPlugin(Name)
	}
	pod := func() *st.PodWrapper { return st.MakePod().Name("p") }
	tests := []struct {
		name          string
		pod           *v1.Pod
		wantPreFilter *framework.Status
		want          map[string]*framework.Status
		wantMessage   string
	}{
		{
			name: "no claims: Filter skipped",
			pod:  pod().Volume(v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}).Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name:          "missing claim",
			pod:           pod().PVC("missing").Obj(),
			wantPreFilter: uu(`persistentvolumeclaim "missing" not found`),
			want:          map[string]*framework.Status{"n1": uu(`persistentvolumeclaim "missing" not found`), "n2": uu(`persistentvolumeclaim "missing" not found`)},
			wantMessage:   `0/2 nodes are available: persistentvolumeclaim "missing" not found.`,
		},
		{
			name:          "ephemeral claim not created yet",
			pod:           st.MakePod().Name("r").EphemeralVolume("eph").Obj(),
			wantPreFilter: uu(`waiting for ephemeral volume controller to create the persistentvolumeclaim "r-eph"`),
			want: map[string]*framework.Status{
				"n1": uu(`waiting for ephemeral volume controller to create the persistentvolumeclaim "r-eph"`),
				"n2": uu(`waiting for ephemeral volume controller to create the persistentvolumeclaim "r-eph"`),
			},
			wantMessage: `0/2 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim "r-eph".`,
		},
		{
			name:          "ephemeral claim of another owner",
			pod:           st.MakePod().Name("q").EphemeralVolume("eph").Obj(),
			wantPreFilter: uu("PVC default/q-eph was not created for pod default/q (pod is not owner)"),
			want: map[string]*framework.Status{
				"n1": uu("PVC default/q-eph was not created for pod default/q (pod is not owner)"),
				"n2": uu("PVC default/q-eph was not created for pod default/q (pod is not owner)"),
			},
			wantMessage: "0/2 nodes are available: PVC default/q-eph was not created for pod default/q (pod is not owner).",
		},
		{
			name: "ephemeral claim owned by the pod is provisioned anywhere",
			pod:  pod().EphemeralVolume("eph").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name:          "lost claim",
			pod:           pod().PVC("lost").Obj(),
			wantPreFilter: uu(`persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"`),
			want: map[string]*framework.Status{
				"n1": uu(`persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"`),
				"n2": uu(`persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"`),
			},
			wantMessage: `0/2 nodes are available: persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone".`,
		},
		{
			name:          "claim being deleted",
			pod:           pod().PVC("deleting").Obj(),
			wantPreFilter: uu(`persistentvolumeclaim "deleting" is being deleted`),
			want:          map[string]*framework.Status{"n1": uu(`persistentvolumeclaim "deleting" is being deleted`), "n2": uu(`persistentvolumeclaim "deleting" is being deleted`)},
			wantMessage:   `0/2 nodes are available: persistentvolumeclaim "deleting" is being deleted.`,
		},
		{
			name:          "unbound immediate claim",
			pod:           pod().PVC("bound-a").PVC("immediate").Obj(),
			wantPreFilter: uu(ErrReasonUnboundImmediate),
			want:          map[string]*framework.Status{"n1": uu(ErrReasonUnboundImmediate), "n2": uu(ErrReasonUnboundImmediate)},
			wantMessage:   "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
		},
		{
			name:          "claim of a class that does not exist counts as immediate",
			pod:           pod().PVC("no-class-object").Obj(),
			wantPreFilter: uu(ErrReasonUnboundImmediate),
			want:          map[string]*framework.Status{"n1": uu(ErrReasonUnboundImmediate), "n2": uu(ErrReasonUnboundImmediate)},
			wantMessage:   "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
		},
		{
			name:          "WaitForFirstConsumer claim pre-bound by its user is left to the PV controller",
			pod:           pod().PVC("prebound").Obj(),
			wantPreFilter: uu(ErrReasonUnboundImmediate),
			want:          map[string]*framework.Status{"n1": uu(ErrReasonUnboundImmediate), "n2": uu(ErrReasonUnboundImmediate)},
			wantMessage:   "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
		},
		{
			name: "bound PV with node affinity",
			pod:  pod().PVC("bound-a").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": uu(ErrReasonNodeConflict)},
		},
		{
			name: "bound PV without node affinity",
			pod:  pod().PVC("bound-free").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
		{
			name:        "claim bound to a PV that does not exist",
			pod:         pod().PVC("bound-missing").Obj(),
			want:        map[string]*framework.Status{"n1": uu(ErrReasonPVNotExist), "n2": uu(ErrReasonPVNotExist)},
			wantMessage: "0/2 nodes are available: 2 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s).",
		},
		{
			name: "WaitForFirstConsumer claim matches an available PV",
			pod:  pod().PVC("wffc").Obj(),
			want: map[string]*framework.Status{"n1": uu(ErrReasonBindConflict), "n2": nil},
		},
		{
			// The PVs of zone b would fit, but a PV reserved for the claim
			// is the only one it may get.
			name: "PV reserved for the claim by its user",
			pod:  pod().PVC("wants-reserved").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": uu(ErrReasonBindConflict)},
		},
		{
			name: "two claims need two PVs",
			pod:  pod().PVC("wffc-big").PVC("wffc").Obj(),
			want: map[string]*framework.Status{"n1": uu(ErrReasonBindConflict), "n2": nil},
		},
		{
			name:        "no PV is large enough and the class cannot provision",
			pod:         pod().PVC("wffc-huge").Obj(),
			want:        map[string]*framework.Status{"n1": uu(ErrReasonBindConflict), "n2": uu(ErrReasonBindConflict)},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
		},
		{
			name:        "bound PV and WaitForFirstConsumer PV in different zones",
			pod:         pod().PVC("bound-a").PVC("wffc").Obj(),
			want:        map[string]*framework.Status{"n1": uu(ErrReasonBindConflict), "n2": uu(ErrReasonNodeConflict)},
			wantMessage: "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) didn't match PersistentVolume's node affinity.",
		},
		{
			name: "provisioning limited by allowedTopologies",
			pod:  pod().PVC("zonal").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": uu(ErrReasonBindConflict)},
		},
		{
			name: "provisioning already started for another node",
			pod:  pod().PVC("anywhere-on-n2").Obj(),
			want: map[string]*framework.Status{"n1": uu(ErrReasonBindConflict), "n2": nil},
		},
		{
			name: "tracked capacity large enough in one zone",
			pod:  pod().PVC("tracked-5").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": uu(ErrReasonNotEnoughSpace)},
		},
		{
			name:        "tracked capacity too small everywhere",
			pod:         pod().PVC("tracked-20").Obj(),
			want:        map[string]*framework.Status{"n1": uu(ErrReasonNotEnoughSpace), "n2": uu(ErrReasonNotEnoughSpace)},
			wantMessage: "0/2 nodes are available: 2 node(s) did not have enough free storage.",
		},
		{
			name: "claim without a size is not checked against capacity",
			pod:  pod().PVC("tracked-any-size").Obj(),
			want: map[string]*framework.Status{"n1": nil, "n2": nil},
		},
	}
	snapshot := st.NewSnapshot(nil, testNodes())
	e := newEnv(t, snapshot, nil, storageObjects()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), e.fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.wantPreFilter, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got.Filter); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantMessage, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterErrors covers configurations upstream treats as internal
// errors rather than rejections.
func TestFilterErrors(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantErr string
	}{
		{name: "class without binding mode", pod: st.MakePod().Name("p").PVC("unset-mode").Obj(), wantErr: `VolumeBindingMode not set for StorageClass "unset-mode"`},
	}
	snapshot := st.NewSnapshot(nil, testNodes())
	e := newEnv(t, snapshot, nil, storageObjects()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), e.fwk, snapshot, tt.pod)
			if got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want one containing %q", got.Err, tt.wantErr)
			}
		})
	}
}

func TestCSIMigration(t *testing.T) {
	// An in-tree EBS PV carries its zone in the legacy label; once the
	// node's CSINode reports the plugin migrated, the PV is read in its
	// CSI form whose topology uses the CSI driver's key.
	pv := st.MakePV("ebs").AWSEBS("vol-1").Capacity("1Gi").ClaimRef("default", "ebs", "ebs").Obj()
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
		st.LabelTerm(v1.LabelTopologyZone, v1.NodeSelectorOpIn, "a"),
	}}}
	claim := st.MakePVC("default", "ebs").Bound("ebs").Obj()
	nodes := []*v1.Node{
		st.MakeNode().Name("plain").Label(v1.LabelTopologyZone, "a").Obj(),
		st.MakeNode().Name("migrated").Label(v1.LabelTopologyZone, "a").Obj(),
		st.MakeNode().Name("migrated-csi-zone").Label(v1.LabelTopologyZone, "a").Label("topology.ebs.csi.aws.com/zone", "a").Obj(),
	}
	snapshot := st.NewSnapshot(nil, nodes)
	e := newEnv(t, snapshot, nil, pv, claim,
		st.MakeCSINode("migrated").Annotation(v1.MigratedPluginsAnnotationKey, "kubernetes.io/aws-ebs").Obj(),
		st.MakeCSINode("migrated-csi-zone").Annotation(v1.MigratedPluginsAnnotationKey, "kubernetes.io/gce-pd,kubernetes.io/aws-ebs").Obj(),
	)
	got := st.RunCycle(t.Context(), e.fwk, snapshot, st.MakePod().Name("p").PVC("ebs").Obj())
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	want := map[string]*framework.Status{
		"plain":             nil,
		"migrated":          framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeConflict).WithPlugin(Name),
		"migrated-csi-zone": nil,
	}
	if diff := cmp.Diff(want, got.Filter); diff != "" {
		t.Errorf("Filter (-want +got):\n%s", diff)
	}
}

func TestBoundPVChangedAfterPreFilter(t *testing.T) {
	// PreFilter compiles the bound PV's node affinity once; a PV the
	// informer updated meanwhile is checked as it is now, as upstream
	// checks it on every node.
	pv := st.MakePV("pv").Capacity("1Gi").NodeAffinityIn(zoneKey, "a").ClaimRef("default", "data", "data").Phase(v1.VolumeBound).Obj()
	claim := st.MakePVC("default", "data").Request("1Gi").Bound("pv").Obj()
	snapshot := st.NewSnapshot(nil, testNodes())
	e := newEnv(t, snapshot, nil, pv, claim)
	pod := st.MakePod().Name("p").PVC("data").Obj()
	state := framework.NewCycleState()
	if _, s, _ := e.fwk.RunPreFilterPlugins(t.Context(), state, pod); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	moved := st.MakePV("pv").ResourceVersion("2").Capacity("1Gi").NodeAffinityIn(zoneKey, "b").ClaimRef("default", "data", "data").Phase(v1.VolumeBound).Obj()
	if err := e.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Update(moved); err != nil {
		t.Fatal(err)
	}
	nodes, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*framework.Status{}
	for _, ni := range nodes {
		got[ni.Node().Name] = e.fwk.RunFilterPlugins(t.Context(), state, pod, ni)
	}
	want := map[string]*framework.Status{
		"n1": framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeConflict).WithPlugin(Name),
		"n2": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Filter (-want +got):\n%s", diff)
	}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    *configv1.VolumeBindingArgs
		wantErr string
	}{
		{name: "defaults"},
		{name: "zero timeout", args: &configv1.VolumeBindingArgs{BindTimeoutSeconds: ptr.To[int64](0)}},
		{name: "negative timeout", args: &configv1.VolumeBindingArgs{BindTimeoutSeconds: ptr.To[int64](-1)},
			wantErr: "bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"},
		{name: "shape", args: &configv1.VolumeBindingArgs{Shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}}},
		{name: "empty shape is defaulted", args: &configv1.VolumeBindingArgs{Shape: []configv1.UtilizationShapePoint{}}},
		{name: "invalid shape", args: &configv1.VolumeBindingArgs{Shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 11}}},
			wantErr: "shape[0].score: Invalid value: 11: not in valid range [0, 10]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.BuildFramework(registry(t), profile(tt.args), nil)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("error = %q, want one containing %q", got, tt.wantErr)
			}
		})
	}

	// At 1.37's default gates (StorageCapacityScoring on) the shape is
	// checked as upstream does.
	shapeTests := []struct {
		name    string
		shape   []configv1.UtilizationShapePoint
		wantErr string
	}{
		{name: "valid", shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}},
		{name: "empty", shape: []configv1.UtilizationShapePoint{}, wantErr: "shape: Required value: at least one point must be specified"},
		{name: "not increasing", shape: []configv1.UtilizationShapePoint{{Utilization: 50, Score: 0}, {Utilization: 50, Score: 10}},
			wantErr: "shape[1].utilization: Invalid value: 50: values must be sorted in increasing order"},
		{name: "out of range", shape: []configv1.UtilizationShapePoint{{Utilization: -1, Score: 11}},
			wantErr: "[shape[0].utilization: Invalid value: -1: not in valid range [0, 100], shape[0].score: Invalid value: 11: not in valid range [0, 10]]"},
	}
	for _, tt := range shapeTests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateArgs(&configv1.VolumeBindingArgs{BindTimeoutSeconds: ptr.To[int64](600), Shape: tt.shape})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}

	// With the gate off (upstream's 1.36 default) a shape is refused.
	off := features{storageCapacityScoring: false, volumeAttributesClass: true}
	if err := validateArgs(&configv1.VolumeBindingArgs{Shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 10}}}, off); err == nil ||
		!strings.Contains(err.Error(), "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring") {
		t.Errorf("shape without the gate: %v", err)
	}

	// Defaults match upstream's, in the plugin and in the runtime's
	// defaulting of pluginConfig.
	wantDefaults := &configv1.VolumeBindingArgs{
		BindTimeoutSeconds: ptr.To[int64](600),
		Shape:              []configv1.UtilizationShapePoint{{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}},
	}
	args, err := getArgs(nil, defaultFeatures())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantDefaults, args); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	args = &configv1.VolumeBindingArgs{}
	runtime.SetDefaultsVolumeBindingArgs(args)
	if diff := cmp.Diff(wantDefaults, args); diff != "" {
		t.Errorf("runtime defaults (-want +got):\n%s", diff)
	}
	args, err = getArgs(nil, off)
	if err != nil {
		t.Fatal(err)
	}
	if args.Shape != nil {
		t.Errorf("default shape without the gate = %v, want none", args.Shape)
	}
}

// TestScore runs upstream 1.37.2's score cases (volume_binding_test.go)
// through a framework instance at the default gates, where
// StorageCapacityScoring is on: the weighted score of VolumeBinding (weight
// 1) on each node that passed Filter.
func TestScore(t *testing.T) {
	const (
		hostname = v1.LabelHostname
		wait     = "wait-sc"
		waitHDD  = "wait-hdd-sc"
		tracked  = "wait-sc-with-storage-capacity"
	)
	nodes := []*v1.Node{
		st.MakeNode().Name("node-a").Label(hostname, "node-a").Obj(),
		st.MakeNode().Name("node-b").Label(hostname, "node-b").Obj(),
		st.MakeNode().Name("node-c").Label(hostname, "node-c").Obj(),
	}
	pv := func(name, class, size, node string) *v1.PersistentVolume {
		return st.MakePV(name).StorageClass(class).Capacity(size).NodeAffinityIn(hostname, node).Phase(v1.VolumeAvailable).Obj()
	}
	capacity := func(node, size string) *storagev1.CSIStorageCapacity {
		return st.MakeCSIStorageCapacity("kube-system", node, tracked).Topology(hostname, node).Capacity(size).Obj()
	}
	classes := []k8sruntime.Object{
		st.MakeStorageClass(wait).WaitForFirstConsumer().Obj(),
		st.MakeStorageClass(waitHDD).WaitForFirstConsumer().Obj(),
		st.MakeStorageClass(tracked).WaitForFirstConsumer().Provisioner(capDriver).Obj(),
		st.MakeCSIDriver(capDriver).StorageCapacity(true).Obj(),
	}
	localPVs := []k8sruntime.Object{
		pv("pv-a-0", wait, "200Gi", "node-a"), pv("pv-a-1", wait, "200Gi", "node-a"),
		pv("pv-b-0", wait, "100Gi", "node-b"), pv("pv-b-1", wait, "100Gi", "node-b"),
	}
	capacities := []k8sruntime.Object{capacity("node-a", "100Gi"), capacity("node-b", "50Gi"), capacity("node-c", "10Gi")}
	tests := []struct {
		name string
		pod  *v1.Pod
		objs []k8sruntime.Object
		args *configv1.VolumeBindingArgs
		// want is VolumeBinding's score on each node that passed Filter.
		want map[string]int64
	}{
		{
			name: "pod without claims scores 0 everywhere",
			pod:  st.MakePod().Name("pod-a").Obj(),
			want: map[string]int64{"node-a": 0, "node-b": 0, "node-c": 0},
		},
		{
			name: "local volumes with close capacity are preferred",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-a").Obj(),
			objs: append([]k8sruntime.Object{st.MakePVC("default", "pvc-a").StorageClass(wait).Request("50Gi").Obj()}, localPVs...),
			want: map[string]int64{"node-a": 75, "node-b": 50},
		},
		{
			name: "local volumes with close capacity are preferred (multiple pvcs)",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-0").PVC("pvc-1").Obj(),
			objs: append([]k8sruntime.Object{
				st.MakePVC("default", "pvc-0").StorageClass(wait).Request("50Gi").Obj(),
				st.MakePVC("default", "pvc-1").StorageClass(waitHDD).Request("100Gi").Obj(),
				pv("pv-a-2", waitHDD, "200Gi", "node-a"), pv("pv-a-3", waitHDD, "200Gi", "node-a"),
				pv("pv-b-2", waitHDD, "100Gi", "node-b"), pv("pv-b-3", waitHDD, "100Gi", "node-b"),
			}, localPVs...),
			want: map[string]int64{"node-a": 63, "node-b": 25},
		},
		{
			name: "storage capacity score",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-dynamic").Obj(),
			objs: append([]k8sruntime.Object{st.MakePVC("default", "pvc-dynamic").StorageClass(tracked).Request("10Gi").Obj()}, capacities...),
			want: map[string]int64{"node-a": 90, "node-b": 80, "node-c": 0},
		},
		{
			name: "storage capacity score with static binds",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-dynamic").PVC("pvc-static").Obj(),
			objs: append([]k8sruntime.Object{
				st.MakePVC("default", "pvc-dynamic").StorageClass(tracked).Request("10Gi").Obj(),
				st.MakePVC("default", "pvc-static").StorageClass(wait).Request("50Gi").Obj(),
				pv("pv-static-a", wait, "100Gi", "node-a"), pv("pv-static-b", wait, "100Gi", "node-b"), pv("pv-static-c", wait, "100Gi", "node-c"),
			}, capacities...),
			want: map[string]int64{"node-a": 50, "node-b": 50, "node-c": 50},
		},
		{
			name: "dynamic provisioning with multiple PVCs of the same StorageClass",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-dynamic-0").PVC("pvc-dynamic-1").Obj(),
			objs: []k8sruntime.Object{
				st.MakePVC("default", "pvc-dynamic-0").StorageClass(tracked).Request("50Gi").Obj(),
				st.MakePVC("default", "pvc-dynamic-1").StorageClass(tracked).Request("50Gi").Obj(),
				capacity("node-a", "100Gi"),
			},
			want: map[string]int64{"node-a": 0},
		},
		{
			name: "prefer node with least allocatable (custom shape)",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-dynamic").Obj(),
			objs: []k8sruntime.Object{
				st.MakePVC("default", "pvc-dynamic").StorageClass(tracked).Request("10Gi").Obj(),
				capacity("node-a", "100Gi"), capacity("node-b", "20Gi"), capacity("node-c", "10Gi"),
			},
			args: &configv1.VolumeBindingArgs{BindTimeoutSeconds: ptr.To[int64](300),
				Shape: []configv1.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}},
			want: map[string]int64{"node-a": 10, "node-b": 50, "node-c": 100},
		},
		{
			name: "prefer node with maximum allocatable",
			pod:  st.MakePod().Name("pod-a").PVC("pvc-dynamic").Obj(),
			objs: []k8sruntime.Object{
				st.MakePVC("default", "pvc-dynamic").StorageClass(tracked).Request("10Gi").Obj(),
				capacity("node-a", "100Gi"), capacity("node-b", "20Gi"), capacity("node-c", "10Gi"),
			},
			want: map[string]int64{"node-a": 90, "node-b": 50, "node-c": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			e := newEnv(t, snapshot, tt.args, append(tt.objs, classes...)...)
			ctx := t.Context()
			state := framework.NewCycleState()
			if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, tt.pod); !s.IsSuccess() && !s.IsSkip() {
				t.Fatal(s)
			}
			all, _ := snapshot.NodeInfos().List()
			var feasible []*framework.NodeInfo
			for _, ni := range all {
				if s := e.fwk.RunFilterPlugins(ctx, state, tt.pod, ni); s.IsSuccess() {
					feasible = append(feasible, ni)
				}
			}
			if s := e.fwk.RunPreScorePlugins(ctx, state, tt.pod, feasible); !s.IsSuccess() {
				t.Fatal(s)
			}
			scores, s := e.fwk.RunScorePlugins(ctx, state, tt.pod, feasible)
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			got := map[string]int64{}
			for _, ns := range scores {
				for _, ps := range ns.Scores {
					if ps.Name == Name {
						got[ns.Name] = ps.Score
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("VolumeBinding scores (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScoreSkippedWithoutGate: with StorageCapacityScoring off (upstream's
// 1.36 default) PreScore skips Score.
func TestScoreSkippedWithoutGate(t *testing.T) {
	snapshot := st.NewSnapshot(nil, testNodes())
	e := newEnv(t, snapshot, nil, storageObjects()...)
	pl, err := newWithFeatures(t.Context(), nil, e.fwk, features{storageCapacityScoring: false, volumeAttributesClass: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	pod := st.MakePod().Name("p").PVC("wffc").Obj()
	state := framework.NewCycleState()
	infos, _ := snapshot.NodeInfos().List()
	if _, s := pl.PreFilter(t.Context(), state, pod, infos); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.PreScore(t.Context(), state, pod, infos); !s.IsSkip() {
		t.Errorf("PreScore = %v, want Skip", s)
	}
}

func TestEventsToRegister(t *testing.T) {
	e := newEnv(t, nil, nil)
	want := []st.Registration{
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add | framework.Update}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}, Hinted: true},
		// Upstream gives PV and Node events no hint: every one of them queues.
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}},
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}},
		{Event: framework.ClusterEvent{Resource: framework.CSINode, ActionType: framework.Add | framework.Update}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.CSIDriver, ActionType: framework.Update}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.CSIStorageCapacity, ActionType: framework.Add | framework.Update}, Hinted: true},
	}
	if diff := cmp.Diff(want, st.Registrations(t, e.fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestQueueingHints(t *testing.T) {
	e := newEnv(t, nil, nil)
	pod := st.MakePod().Name("p").PVC("c").EphemeralVolume("eph").
		Volume(v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: capDriver}}}).Obj()
	sc := st.MakeStorageClass("sc").WaitForFirstConsumer().Provisioner(provisioner).Obj()
	zonalSC := st.MakeStorageClass("sc").WaitForFirstConsumer().Provisioner(provisioner).AllowedTopology(zoneKey, "a").Obj()
	scWithParams := sc.DeepCopy()
	scWithParams.Parameters = map[string]string{"type": "ssd"}
	capSmall := st.MakeCSIStorageCapacity("ns", "c", "sc").Capacity("1Gi").Obj()
	capLarge := st.MakeCSIStorageCapacity("ns", "c", "sc").Capacity("2Gi").Obj()
	capMaxSmall := st.MakeCSIStorageCapacity("ns", "c", "sc").Capacity("10Gi").MaximumVolumeSize("1Gi").Obj()
	capNone := st.MakeCSIStorageCapacity("ns", "c", "sc").Obj()
	tracked := st.MakeCSIDriver(capDriver).StorageCapacity(true).Obj()
	untracked := st.MakeCSIDriver(capDriver).StorageCapacity(false).Obj()
	unset := st.MakeCSIDriver(capDriver).Obj()
	otherTracked := st.MakeCSIDriver("other").StorageCapacity(true).Obj()
	otherUntracked := st.MakeCSIDriver("other").StorageCapacity(false).Obj()
	csiNode := st.MakeCSINode("n1").Obj()
	csiNodeMigrated := st.MakeCSINode("n1").Annotation(v1.MigratedPluginsAnnotationKey, "kubernetes.io/aws-ebs").Obj()
	csiNodeOtherChange := st.MakeCSINode("n1").Driver("d", "n1", nil).Obj()

	ev := func(r framework.EventResource, a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: r, ActionType: a}
	}
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{name: "own claim added", event: ev(framework.PersistentVolumeClaim, framework.Add), newObj: st.MakePVC("default", "c").Obj(), want: framework.Queue},
		{name: "own ephemeral claim added", event: ev(framework.PersistentVolumeClaim, framework.Add), newObj: st.MakePVC("default", "p-eph").Obj(), want: framework.Queue},
		{name: "own claim updated", event: ev(framework.PersistentVolumeClaim, framework.Update), oldObj: st.MakePVC("default", "c").Obj(), newObj: st.MakePVC("default", "c").Bound("pv").Obj(), want: framework.Queue},
		{name: "other claim", event: ev(framework.PersistentVolumeClaim, framework.Add), newObj: st.MakePVC("default", "d").Obj(), want: framework.QueueSkip},
		{name: "same name, other namespace", event: ev(framework.PersistentVolumeClaim, framework.Add), newObj: st.MakePVC("other", "c").Obj(), want: framework.QueueSkip},
		{name: "claim deleted is not registered", event: ev(framework.PersistentVolumeClaim, framework.Delete), oldObj: st.MakePVC("default", "c").Obj(), want: framework.QueueSkip},

		{name: "class added", event: ev(framework.StorageClass, framework.Add), newObj: sc, want: framework.Queue},
		{name: "class topologies changed", event: ev(framework.StorageClass, framework.Update), oldObj: sc, newObj: zonalSC, want: framework.Queue},
		{name: "class parameters changed", event: ev(framework.StorageClass, framework.Update), oldObj: sc, newObj: scWithParams, want: framework.QueueSkip},

		{name: "PV added", event: ev(framework.PersistentVolume, framework.Add), newObj: st.MakePV("pv").Obj(), want: framework.Queue},
		{name: "PV updated", event: ev(framework.PersistentVolume, framework.Update), oldObj: st.MakePV("pv").Obj(), newObj: st.MakePV("pv").Capacity("1Gi").Obj(), want: framework.Queue},
		{name: "PV deleted is not registered", event: ev(framework.PersistentVolume, framework.Delete), oldObj: st.MakePV("pv").Obj(), want: framework.QueueSkip},

		{name: "node added", event: ev(framework.Node, framework.Add), newObj: st.MakeNode().Name("n").Obj(), want: framework.Queue},
		{name: "node labels", event: ev(framework.Node, framework.UpdateNodeLabel), oldObj: st.MakeNode().Name("n").Obj(), newObj: st.MakeNode().Name("n").Label("a", "b").Obj(), want: framework.Queue},
		{name: "node taints are not registered", event: ev(framework.Node, framework.UpdateNodeTaint), oldObj: st.MakeNode().Name("n").Obj(), newObj: st.MakeNode().Name("n").Obj(), want: framework.QueueSkip},

		{name: "CSINode added", event: ev(framework.CSINode, framework.Add), newObj: csiNode, want: framework.Queue},
		{name: "CSINode migrated plugins changed", event: ev(framework.CSINode, framework.Update), oldObj: csiNode, newObj: csiNodeMigrated, want: framework.Queue},
		{name: "CSINode other change", event: ev(framework.CSINode, framework.Update), oldObj: csiNode, newObj: csiNodeOtherChange, want: framework.QueueSkip},

		{name: "capacity added", event: ev(framework.CSIStorageCapacity, framework.Add), newObj: capSmall, want: framework.Queue},
		{name: "capacity grew", event: ev(framework.CSIStorageCapacity, framework.Update), oldObj: capSmall, newObj: capLarge, want: framework.Queue},
		{name: "capacity shrank", event: ev(framework.CSIStorageCapacity, framework.Update), oldObj: capLarge, newObj: capSmall, want: framework.QueueSkip},
		{name: "capacity appeared", event: ev(framework.CSIStorageCapacity, framework.Update), oldObj: capNone, newObj: capSmall, want: framework.Queue},
		{name: "maximum volume size caps the growth", event: ev(framework.CSIStorageCapacity, framework.Update), oldObj: capLarge, newObj: capMaxSmall, want: framework.QueueSkip},

		{name: "driver stops tracking capacity", event: ev(framework.CSIDriver, framework.Update), oldObj: tracked, newObj: untracked, want: framework.Queue},
		{name: "driver unsets tracking", event: ev(framework.CSIDriver, framework.Update), oldObj: tracked, newObj: unset, want: framework.Queue},
		{name: "driver starts tracking capacity", event: ev(framework.CSIDriver, framework.Update), oldObj: untracked, newObj: tracked, want: framework.QueueSkip},
		{name: "driver the pod does not use", event: ev(framework.CSIDriver, framework.Update), oldObj: otherTracked, newObj: otherUntracked, want: framework.QueueSkip},
		{name: "driver added is not registered", event: ev(framework.CSIDriver, framework.Add), newObj: tracked, want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(context.Background(), e.fwk, Name, tt.event, pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFilterClaimOrder: claims are matched smallest first, and claims of
// equal size in the order sort.Sort leaves them, as upstream does. From
// 13 claims on that order is not the pod's volume order: here sort.Sort
// puts claim c07 first among the 1Gi claims, where a stable sort would
// put c05. Only one PV carries the label a selector may ask for, and it is
// the smallest, so the first 1Gi claim takes it.
func TestFilterClaimOrder(t *testing.T) {
	small := map[int]bool{5: true, 7: true, 8: true, 9: true, 10: true, 12: true}
	tests := []struct {
		name string
		// selective is the claim that only accepts the labelled PV.
		selective int
		want      *framework.Status
	}{
		{name: "the claim sorted first gets the labelled PV", selective: 7},
		{
			name:      "the labelled PV is gone before the claim that needs it",
			selective: 5,
			want:      framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonBindConflict).WithPlugin(Name),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []k8sruntime.Object{
				st.MakeStorageClass("local").WaitForFirstConsumer().Obj(),
				st.MakePV("labelled").StorageClass("local").Capacity("1Gi").Label("tier", "gold").Obj(),
			}
			pod := st.MakePod().Name("p")
			for i := range 13 {
				name := fmt.Sprintf("c%02d", i)
				// 12 PVs of 2Gi for the 12 claims not served by the labelled PV.
				if i < 12 {
					objs = append(objs, st.MakePV("pv-"+name).StorageClass("local").Capacity("2Gi").Obj())
				}
				claim := st.MakePVC("default", name).StorageClass("local").Request("2Gi")
				if small[i] {
					claim.Request("1Gi")
				}
				if i == tt.selective {
					claim.Selector("tier", "gold")
				}
				objs = append(objs, claim.Obj())
				pod.PVC(name)
			}
			nodes := []*v1.Node{st.MakeNode().Name("n1").Obj()}
			snapshot := st.NewSnapshot(nil, nodes)
			e := newEnv(t, snapshot, nil, objs...)
			got := st.RunCycle(t.Context(), e.fwk, snapshot, pod.Obj())
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(map[string]*framework.Status{"n1": tt.want}, got.Filter); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}
