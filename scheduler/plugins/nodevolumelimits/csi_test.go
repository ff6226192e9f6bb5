package nodevolumelimits

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	nodeName   = "node-1"
	ns         = metav1.NamespaceDefault
	testDriver = "csi.example.com"
	ebsDriver  = "ebs.csi.aws.com"
	gceDriver  = "pd.csi.storage.gke.io"
)

// newFramework builds a real framework instance running only this plugin,
// with objs put straight into the informers' stores: the plugin only reads
// them through listers and the VolumeAttachment index.
func newFramework(tb testing.TB, snapshot framework.SharedLister, objs ...k8sruntime.Object) framework.Framework {
	tb.Helper()
	r := registry.New(map[string]runtime.Factory{Name: New})
	opts := append(st.Informers(tb, objs...), runtime.WithParallelism(1))
	return st.NewFramework(tb, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot, opts...)
}

func csiNode(name string, drivers map[string]*int32) *storagev1.CSINode {
	w := st.MakeCSINode(name)
	for d, count := range drivers {
		w.Driver(d, name, count)
	}
	return w.Obj()
}

func volumeAttachment(name, attacher, pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: attacher,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)},
		},
	}
}

func ebsInline(name, volumeID string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: volumeID}}}
}

func gceInline(name, pdName string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: pdName}}}
}

// storage is the volumes every filter case can use: claims csi-0..csi-4
// bound to CSI volumes of testDriver, ebs-csi-0/1 bound to CSI EBS volumes,
// ebs-intree-0/1 bound to in-tree EBS PVs, gce-intree-0 bound to an
// in-tree GCE PD, nfs-0 bound to an NFS PV (not migratable), unbound
// claims of a CSI, an in-tree EBS and no StorageClass, and csi-lost whose
// PV is gone.
func storage() []k8sruntime.Object {
	var objs []k8sruntime.Object
	for i := range 5 {
		pv := fmt.Sprintf("pv-csi-%d", i)
		objs = append(objs,
			st.MakePV(pv).CSI(testDriver, fmt.Sprintf("handle-%d", i)).Obj(),
			st.MakePVC(ns, fmt.Sprintf("csi-%d", i)).Bound(pv).Obj())
	}
	for i := range 2 {
		csiPV, inTreePV := fmt.Sprintf("pv-ebs-csi-%d", i), fmt.Sprintf("pv-ebs-intree-%d", i)
		objs = append(objs,
			st.MakePV(csiPV).CSI(ebsDriver, fmt.Sprintf("vol-csi-%d", i)).Obj(),
			st.MakePVC(ns, fmt.Sprintf("ebs-csi-%d", i)).Bound(csiPV).Obj(),
			st.MakePV(inTreePV).AWSEBS(fmt.Sprintf("vol-intree-%d", i)).Obj(),
			st.MakePVC(ns, fmt.Sprintf("ebs-intree-%d", i)).Bound(inTreePV).Obj())
	}
	gcePV := st.MakePV("pv-gce-intree-0").Obj()
	gcePV.Spec.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: "disk-0"}
	nfsPV := st.MakePV("pv-nfs-0").Obj()
	nfsPV.Spec.NFS = &v1.NFSVolumeSource{Server: "nfs", Path: "/"}
	objs = append(objs,
		gcePV, st.MakePVC(ns, "gce-intree-0").Bound("pv-gce-intree-0").Obj(),
		nfsPV, st.MakePVC(ns, "nfs-0").Bound("pv-nfs-0").Obj(),
		st.MakeStorageClass("csi-sc").Provisioner(testDriver).WaitForFirstConsumer().Obj(),
		st.MakeStorageClass("ebs-sc").Provisioner("kubernetes.io/aws-ebs").WaitForFirstConsumer().Obj(),
		st.MakePVC(ns, "unbound-csi").StorageClass("csi-sc").Obj(),
		st.MakePVC(ns, "unbound-ebs").StorageClass("ebs-sc").Obj(),
		st.MakePVC(ns, "unbound-no-class").Obj(),
		st.MakePVC(ns, "unbound-unknown-class").StorageClass("gone").Obj(),
		st.MakePVC(ns, "csi-lost").StorageClass("csi-sc").VolumeName("pv-gone").Obj(),
	)
	return objs
}

// onNode returns a pod bound to the test node using the given claims.
func onNode(name string, claims ...string) *v1.Pod {
	p := st.MakePod().Name(name).Node(nodeName)
	for _, c := range claims {
		p.PVC(c)
	}
	return p.Obj()
}

func incoming(claims ...string) *st.PodWrapper {
	p := st.MakePod().Name("incoming")
	for _, c := range claims {
		p.PVC(c)
	}
	return p
}

// verdict is what Filter (after PreFilter) decided for the node.
type verdict struct {
	Code    framework.Code
	Message string
}

func TestFilter(t *testing.T) {
	limit := func(n int32) *int32 { return &n }
	ephemeralPod := st.MakePod().Name("abc").EphemeralVolume("xyz").Obj()
	tests := []struct {
		name     string
		pod      *v1.Pod
		existing []*v1.Pod
		// csiNode is the node's CSINode; nil means none.
		csiNode *storagev1.CSINode
		extra   []k8sruntime.Object
		want    verdict
	}{
		{
			name:     "fits below the limit",
			pod:      incoming("csi-1").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
		},
		{
			name:     "attach limit reached",
			pod:      incoming("csi-2").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0"), onNode("b", "csi-1")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:    "the pod alone needs more than the limit",
			pod:     incoming("csi-0", "csi-1", "csi-2").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
			want:    verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "a volume already used on the node is counted once",
			pod:      incoming("csi-0").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0"), onNode("b", "csi-1", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
		},
		{
			name:    "the same claim twice in the pod is counted once",
			pod:     incoming("csi-0").Volume(v1.Volume{Name: "again", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "csi-0"}}}).Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
		},
		{
			name:     "other drivers do not count against the limit",
			pod:      incoming("csi-1").Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-csi-0", "ebs-csi-1")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1), ebsDriver: limit(2)}),
		},
		{
			name:     "a driver without allocatable count has no limit",
			pod:      incoming("csi-2").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0", "csi-1")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: nil}),
		},
		{
			name:     "a node without CSINode has no limit",
			pod:      incoming("csi-2").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0", "csi-1")},
		},
		{
			name:    "a VolumeAttachment of the node counts",
			pod:     incoming("csi-1").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{volumeAttachment("va-0", testDriver, "pv-csi-0", nodeName)},
			want:    verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:    "a VolumeAttachment of another node does not count",
			pod:     incoming("csi-1").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{volumeAttachment("va-0", testDriver, "pv-csi-0", "node-2")},
		},
		{
			name:     "a VolumeAttachment of a volume used by a pod on the node is counted once",
			pod:      incoming("csi-1").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
			extra:    []k8sruntime.Object{volumeAttachment("va-0", testDriver, "pv-csi-0", nodeName)},
		},
		{
			name:    "VolumeAttachments without attacher, of a missing PV or of a non-CSI PV do not count",
			pod:     incoming("csi-1").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra: []k8sruntime.Object{
				volumeAttachment("va-0", "", "pv-csi-0", nodeName),
				volumeAttachment("va-1", testDriver, "pv-gone", nodeName),
				volumeAttachment("va-2", testDriver, "pv-nfs-0", nodeName),
			},
		},
		{
			// As upstream: the pod's own volumes are only deduplicated
			// against pods on the node, not against VolumeAttachments.
			name:    "the pod's volume attached but unused on the node counts twice",
			pod:     incoming("csi-0").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{volumeAttachment("va-0", testDriver, "pv-csi-0", nodeName)},
			want:    verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "an in-tree EBS PV of the pod counts against the EBS CSI driver",
			pod:      incoming("ebs-intree-0").Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{ebsDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "in-tree EBS PVs on the node count against the EBS CSI driver",
			pod:      incoming("ebs-csi-0").Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-intree-0"), onNode("b", "ebs-intree-1")},
			csiNode:  csiNode(nodeName, map[string]*int32{ebsDriver: limit(2)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "in-tree EBS migration does not depend on the migrated-plugins annotation",
			pod:      incoming("ebs-intree-0").Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-csi-0")},
			csiNode:  st.MakeCSINode(nodeName).Annotation(v1.MigratedPluginsAnnotationKey, "kubernetes.io/gce-pd").Driver(ebsDriver, nodeName, limit(1)).Obj(),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "an inline EBS volume counts against the EBS CSI driver",
			pod:      st.MakePod().Name("incoming").Volume(ebsInline("data", "vol-inline")).Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{ebsDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "an inline GCE PD counts against the PD CSI driver",
			pod:      st.MakePod().Name("incoming").Volume(gceInline("data", "disk-1")).Obj(),
			existing: []*v1.Pod{onNode("a", "gce-intree-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{gceDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "the same in-tree GCE PD inline and as a PV is counted once",
			pod:      st.MakePod().Name("incoming").Volume(gceInline("data", "disk-0")).Obj(),
			existing: []*v1.Pod{onNode("a", "gce-intree-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{gceDriver: limit(1)}),
		},
		{
			name:     "a non-migratable in-tree PV does not count",
			pod:      incoming("nfs-0").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
		},
		{
			name:     "an unbound claim counts against its StorageClass's provisioner",
			pod:      incoming("unbound-csi").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "an unbound claim of an in-tree EBS class counts against the EBS CSI driver",
			pod:      incoming("unbound-ebs").Obj(),
			existing: []*v1.Pod{onNode("a", "ebs-csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{ebsDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "a claim whose PV is gone counts against its StorageClass's provisioner",
			pod:      incoming("csi-lost").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:     "unbound claims without or with an unknown StorageClass do not count",
			pod:      incoming("unbound-no-class", "unbound-unknown-class").Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
		},
		{
			name:     "a missing claim of a pod on the node does not count",
			pod:      incoming("csi-1").Obj(),
			existing: []*v1.Pod{onNode("a", "missing")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
		},
		{
			name:    "a missing claim of the pod is unresolvable",
			pod:     incoming("missing").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			want:    verdict{framework.UnschedulableAndUnresolvable, `looking up PVC default/missing: persistentvolumeclaim "missing" not found`},
		},
		{
			name:    "a missing claim of the pod is unresolvable on a node without CSINode too",
			pod:     incoming("missing").Obj(),
			want:    verdict{framework.UnschedulableAndUnresolvable, `looking up PVC default/missing: persistentvolumeclaim "missing" not found`},
			csiNode: nil,
		},
		{
			name:     "an ephemeral volume counts",
			pod:      ephemeralPod,
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:    []k8sruntime.Object{st.MakePVC(ns, "abc-xyz").OwnedBy(ephemeralPod).StorageClass("csi-sc").Obj()},
			want:     verdict{framework.Unschedulable, "node(s) exceed max volume count"},
		},
		{
			name:    "an ephemeral volume fits below the limit",
			pod:     ephemeralPod,
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{st.MakePVC(ns, "abc-xyz").OwnedBy(ephemeralPod).Bound("pv-csi-3").Obj()},
		},
		{
			name:    "an ephemeral volume whose claim is missing is unresolvable",
			pod:     ephemeralPod,
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			want:    verdict{framework.UnschedulableAndUnresolvable, `looking up PVC default/abc-xyz: persistentvolumeclaim "abc-xyz" not found`},
		},
		{
			name:    "an ephemeral volume whose claim is not the pod's is an error",
			pod:     ephemeralPod,
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{st.MakePVC(ns, "abc-xyz").StorageClass("csi-sc").Obj()},
			want:    verdict{framework.Error, "PVC default/abc-xyz was not created for pod default/abc (pod is not owner)"},
		},
		// preventPodSchedulingIfMissing (VolumeLimitScaling, on since 1.37),
		// the cases of upstream's TestVolumeLimitScalingGate and more.
		{
			name:    "driver missing from the CSINode, CSIDriver without preventPodSchedulingIfMissing",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, nil),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).Obj()},
		},
		{
			name:    "driver missing from the CSINode, CSIDriver with preventPodSchedulingIfMissing false",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, nil),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(false).Obj()},
		},
		{
			name:    "driver missing from the CSINode, CSIDriver with preventPodSchedulingIfMissing",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, nil),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
			want:    verdict{framework.Unschedulable, "ebs.csi.aws.com CSI driver is not installed on the node"},
		},
		{
			name:  "no CSINode, CSIDriver with preventPodSchedulingIfMissing",
			pod:   incoming("ebs-csi-0").Obj(),
			extra: []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
			want:  verdict{framework.Unschedulable, "ebs.csi.aws.com CSI driver is not installed on the node"},
		},
		{
			name:    "driver on the node within its limit, CSIDriver with preventPodSchedulingIfMissing",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{ebsDriver: limit(2)}),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
		},
		{
			name:    "driver on the node without a limit, CSIDriver with preventPodSchedulingIfMissing",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{ebsDriver: nil}),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
		},
		{
			name:    "driver missing from the CSINode, no CSIDriver",
			pod:     incoming("ebs-csi-0").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
		},
		{
			name:    "missing driver checked before the limits",
			pod:     incoming("ebs-csi-0", "csi-0", "csi-1").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(1)}),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
			want:    verdict{framework.Unschedulable, "ebs.csi.aws.com CSI driver is not installed on the node"},
		},
		{
			name:    "unbound claim checked against its StorageClass's provisioner",
			pod:     incoming("unbound-csi").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{ebsDriver: limit(2)}),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(testDriver).PreventPodSchedulingIfMissing(true).Obj()},
			want:    verdict{framework.Unschedulable, "csi.example.com CSI driver is not installed on the node"},
		},
		{
			name:    "in-tree EBS volume checked against the CSI driver it migrates to",
			pod:     incoming("ebs-intree-0").Obj(),
			csiNode: csiNode(nodeName, map[string]*int32{testDriver: limit(2)}),
			extra:   []k8sruntime.Object{st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj()},
			want:    verdict{framework.Unschedulable, "ebs.csi.aws.com CSI driver is not installed on the node"},
		},
		{
			name:    "two drivers missing: the first by name is reported",
			pod:     incoming("ebs-csi-0", "csi-0").Obj(),
			csiNode: csiNode(nodeName, nil),
			extra: []k8sruntime.Object{
				st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj(),
				st.MakeCSIDriver(testDriver).PreventPodSchedulingIfMissing(true).Obj(),
			},
			want: verdict{framework.Unschedulable, "csi.example.com CSI driver is not installed on the node"},
		},
		{
			name:     "pods with only other volumes skip the plugin",
			pod:      st.MakePod().Name("incoming").Volume(v1.Volume{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}).Obj(),
			existing: []*v1.Pod{onNode("a", "csi-0")},
			csiNode:  csiNode(nodeName, map[string]*int32{testDriver: limit(0)}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append(storage(), tt.extra...)
			if tt.csiNode != nil {
				objs = append(objs, tt.csiNode)
			}
			snapshot := st.NewSnapshot(tt.existing, []*v1.Node{st.MakeNode().Name(nodeName).Obj()})
			fwk := newFramework(t, snapshot, objs...)
			res := st.RunCycle(context.Background(), fwk, snapshot, tt.pod)
			got := verdict{}
			switch {
			case res.Err != nil:
				got = verdict{framework.Error, res.Err.Error()}
			case res.Filter[nodeName] != nil:
				s := res.Filter[nodeName]
				got = verdict{s.Code(), s.Message()}
			}
			if tt.want.Code == framework.Error {
				// The framework wraps internal errors with the plugin's name.
				tt.want.Message = fmt.Sprintf("running %q filter plugin: %s", Name, tt.want.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreFilter(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		wantSkip bool
	}{
		{name: "no volumes", pod: st.MakePod().Name("p").Obj(), wantSkip: true},
		{name: "secrets and config maps", pod: st.MakePod().Name("p").
			Volume(v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}).
			Volume(v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}}).Obj(), wantSkip: true},
		{name: "non-migratable in-tree inline volume", pod: st.MakePod().Name("p").
			Volume(v1.Volume{Name: "n", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}}).Obj(), wantSkip: true},
		{name: "PVC", pod: st.MakePod().Name("p").PVC("csi-0").Obj()},
		{name: "ephemeral volume", pod: st.MakePod().Name("p").EphemeralVolume("e").Obj()},
		{name: "migratable inline volume", pod: st.MakePod().Name("p").Volume(ebsInline("e", "vol-1")).Obj()},
	}
	fwk := newFramework(t, st.NewSnapshot(nil, nil), storage()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if _, s, _ := fwk.RunPreFilterPlugins(context.Background(), state, tt.pod); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			if diff := cmp.Diff(tt.wantSkip, state.GetSkipFilterPlugins().Has(Name)); diff != "" {
				t.Errorf("Filter skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnschedulableMessage checks the message the scheduler reports, as
// kube-scheduler would write it.
func TestUnschedulableMessage(t *testing.T) {
	limit := int32(1)
	nodes := []*v1.Node{st.MakeNode().Name("node-1").Obj(), st.MakeNode().Name("node-2").Obj(), st.MakeNode().Name("node-3").Obj()}
	existing := []*v1.Pod{
		st.MakePod().Name("a").Node("node-1").PVC("csi-0").Obj(),
		st.MakePod().Name("b").Node("node-2").PVC("csi-1").Obj(),
	}
	snapshot := st.NewSnapshot(existing, nodes)
	objs := append(storage(),
		csiNode("node-1", map[string]*int32{testDriver: &limit}),
		csiNode("node-2", map[string]*int32{testDriver: &limit}),
		csiNode("node-3", map[string]*int32{testDriver: &limit}),
		volumeAttachment("va-3", testDriver, "pv-csi-3", "node-3"))
	fwk := newFramework(t, snapshot, objs...)
	got := st.RunCycle(context.Background(), fwk, snapshot, incoming("csi-2").Obj()).Message
	want := "0/3 nodes are available: 3 node(s) exceed max volume count."
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}

	got = st.RunCycle(context.Background(), fwk, snapshot, incoming("missing").Obj()).Message
	want = `0/3 nodes are available: 3 looking up PVC default/missing: persistentvolumeclaim "missing" not found.`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

// TestDriverNotInstalled checks the verdicts and the message the scheduler
// reports for nodes missing a driver that asks for it, on a cluster of
// three nodes: node-1 with the test driver, node-2 with the EBS driver,
// node-3 without a CSINode.
func TestDriverNotInstalled(t *testing.T) {
	limit := int32(4)
	nodes := []*v1.Node{st.MakeNode().Name("node-1").Obj(), st.MakeNode().Name("node-2").Obj(), st.MakeNode().Name("node-3").Obj()}
	snapshot := st.NewSnapshot(nil, nodes)
	objs := append(storage(),
		csiNode("node-1", map[string]*int32{testDriver: &limit}),
		csiNode("node-2", map[string]*int32{ebsDriver: &limit}),
		st.MakeCSIDriver(testDriver).PreventPodSchedulingIfMissing(true).Obj(),
		st.MakeCSIDriver(ebsDriver).PreventPodSchedulingIfMissing(true).Obj())
	fwk := newFramework(t, snapshot, objs...)

	notInstalled := func(driver string) verdict {
		return verdict{framework.Unschedulable, driver + " CSI driver is not installed on the node"}
	}
	res := st.RunCycle(context.Background(), fwk, snapshot, incoming("csi-0").Obj())
	got := map[string]verdict{}
	for node, s := range res.Filter {
		if s != nil {
			got[node] = verdict{s.Code(), s.Message()}
		}
	}
	want := map[string]verdict{"node-2": notInstalled(testDriver), "node-3": notInstalled(testDriver)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}

	msg := st.RunCycle(context.Background(), fwk, snapshot, incoming("ebs-csi-0", "csi-0").Obj()).Message
	wantMsg := "0/3 nodes are available: 1 ebs.csi.aws.com CSI driver is not installed on the node, 2 csi.example.com CSI driver is not installed on the node."
	if diff := cmp.Diff(wantMsg, msg); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

// TestTwoInstances checks that a second instance sharing the informers
// (another profile) reuses the VolumeAttachment index.
func TestTwoInstances(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil))
	if _, err := New(context.Background(), nil, fwk); err != nil {
		t.Errorf("second instance: %v", err)
	}
}

// TestFilterWithoutPreFilter checks that Filter resolves the pod itself
// when PreFilter did not run in the cycle.
func TestFilterWithoutPreFilter(t *testing.T) {
	limit := int32(1)
	existing := []*v1.Pod{onNode("a", "csi-0")}
	snapshot := st.NewSnapshot(existing, []*v1.Node{st.MakeNode().Name(nodeName).Obj()})
	fwk := newFramework(t, snapshot, append(storage(), csiNode(nodeName, map[string]*int32{testDriver: &limit}))...)
	pl, err := New(context.Background(), nil, fwk)
	if err != nil {
		t.Fatal(err)
	}
	ni, err := snapshot.Get(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	for claim, want := range map[string]verdict{
		"csi-0": {},
		"csi-1": {framework.Unschedulable, "node(s) exceed max volume count"},
	} {
		s := pl.(framework.FilterPlugin).Filter(context.Background(), framework.NewCycleState(), incoming(claim).Obj(), ni)
		got := verdict{}
		if s != nil {
			got = verdict{s.Code(), s.Message()}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("claim %s: verdict (-want +got):\n%s", claim, diff)
		}
	}
}
