package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

func localClass(mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "local"},
		Provisioner:       SimulatedProvisionerName,
		VolumeBindingMode: &mode,
	}
}

// handedOver is a claim of the local class for which the scheduler picked
// node-1 and the PV binder named this provisioner.
func handedOver() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "data", UID: "1234",
			Annotations: map[string]string{
				volume.AnnSelectedNode:       "node-1",
				volume.AnnStorageProvisioner: SimulatedProvisionerName,
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("local"),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func TestClaimToProvision(t *testing.T) {
	type result struct {
		Node string
		OK   bool
	}
	wffc := localClass(storagev1.VolumeBindingWaitForFirstConsumer)
	tests := []struct {
		name  string
		claim func(*corev1.PersistentVolumeClaim)
		class *storagev1.StorageClass
		want  result
	}{
		{name: "selected node and handed over", class: wffc, want: result{"node-1", true}},
		{
			name: "handed over with the beta annotation",
			claim: func(c *corev1.PersistentVolumeClaim) {
				delete(c.Annotations, volume.AnnStorageProvisioner)
				c.Annotations[volume.AnnBetaStorageProvisioner] = SimulatedProvisionerName
			},
			class: wffc, want: result{"node-1", true},
		},
		{
			name:  "no node selected yet",
			claim: func(c *corev1.PersistentVolumeClaim) { delete(c.Annotations, volume.AnnSelectedNode) },
			class: wffc,
		},
		{
			name:  "not handed over by the PV binder yet",
			claim: func(c *corev1.PersistentVolumeClaim) { delete(c.Annotations, volume.AnnStorageProvisioner) },
			class: wffc,
		},
		{
			name:  "handed to another provisioner",
			claim: func(c *corev1.PersistentVolumeClaim) { c.Annotations[volume.AnnStorageProvisioner] = "ebs.csi.aws.com" },
			class: wffc,
		},
		{
			name:  "already bound",
			claim: func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" },
			class: wffc,
		},
		{
			name:  "being deleted",
			claim: func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) },
			class: wffc,
		},
		{name: "immediate binding class", class: localClass(storagev1.VolumeBindingImmediate)},
		{name: "class without binding mode", class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: SimulatedProvisionerName}},
		{
			name:  "class of another provisioner",
			class: &storagev1.StorageClass{ObjectMeta: wffc.ObjectMeta, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: wffc.VolumeBindingMode},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := handedOver()
			if tt.claim != nil {
				tt.claim(claim)
			}
			var got result
			got.Node, got.OK = claimToProvision(claim, tt.class)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("claimToProvision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumeForClaim(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	block := corev1.PersistentVolumeBlock
	want := func(edit func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "pvc-1234",
				Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "local.profile-scheduler.dev/simulated"},
			},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
				StorageClassName:              "local",
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					Local: &corev1.LocalVolumeSource{Path: "/mnt/profile-scheduler-simulated/pvc-1234"},
				},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"host-1"},
					}}}},
				}},
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "data", UID: "1234"},
			},
		}
		if edit != nil {
			edit(pv)
		}
		return pv
	}
	tests := []struct {
		name    string
		claim   func(*corev1.PersistentVolumeClaim)
		class   func(*storagev1.StorageClass)
		want    *corev1.PersistentVolume
		wantErr string
	}{
		{name: "filesystem claim, default reclaim policy", want: want(nil)},
		{
			name: "class reclaim policy and mount options, block claim",
			claim: func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeMode = &block
				c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
				c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
			},
			class: func(c *storagev1.StorageClass) {
				c.ReclaimPolicy = &retain
				c.MountOptions = []string{"noatime"}
			},
			want: want(func(pv *corev1.PersistentVolume) {
				pv.Spec.VolumeMode = &block
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
				pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("5Gi")
				pv.Spec.PersistentVolumeReclaimPolicy = retain
				pv.Spec.MountOptions = []string{"noatime"}
			}),
		},
		{
			name:    "no storage request",
			claim:   func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil },
			wantErr: "the claim requests no storage",
		},
		{
			name:    "no access modes",
			claim:   func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = nil },
			wantErr: "the claim has no access modes",
		},
		{
			name:    "selector",
			claim:   func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} },
			wantErr: "claims with a selector are not provisioned",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := handedOver()
			if tt.claim != nil {
				tt.claim(claim)
			}
			class := localClass(storagev1.VolumeBindingWaitForFirstConsumer)
			if tt.class != nil {
				tt.class(class)
			}
			got, err := volumeForClaim(claim, class, "host-1")
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("volume (-want +got):\n%s", diff)
			}
			if got != nil {
				// The volume the PV binder will bind must be one the
				// scheduler accepts for the claim on that node only.
				if err := volume.CheckNodeAffinity(got, map[string]string{corev1.LabelHostname: "host-1"}); err != nil {
					t.Errorf("volume does not fit its node: %v", err)
				}
				if err := volume.CheckNodeAffinity(got, map[string]string{corev1.LabelHostname: "host-2"}); err == nil {
					t.Error("volume fits another node")
				}
				if !volume.IsVolumeBoundToClaim(got, claim) {
					t.Error("volume is not pre-bound to its claim")
				}
			}
		})
	}
}

func TestVolumeToDelete(t *testing.T) {
	released := func(edit func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{volume.AnnDynamicallyProvisioned: SimulatedProvisionerName}},
			Spec:       corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete},
			Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
		}
		if edit != nil {
			edit(pv)
		}
		return pv
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{name: "released, delete policy", pv: released(nil), want: true},
		{name: "still bound", pv: released(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeBound })},
		{name: "retain policy", pv: released(func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		})},
		{name: "another provisioner's", pv: released(func(pv *corev1.PersistentVolume) {
			pv.Annotations[volume.AnnDynamicallyProvisioned] = "ebs.csi.aws.com"
		})},
		{name: "not provisioned", pv: released(func(pv *corev1.PersistentVolume) { pv.Annotations = nil })},
		{name: "already being deleted", pv: released(func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = ptr.To(metav1.Now()) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, volumeToDelete(tt.pv)); diff != "" {
				t.Errorf("volumeToDelete (-want +got):\n%s", diff)
			}
		})
	}
}
