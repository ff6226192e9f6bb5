package volumerestrictions

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// newFramework builds a real instance running only VolumeRestrictions (plus
// the QueueSort and Bind plugins every profile needs) over snapshot, with
// claims already in the informer: the plugin only reads them through the
// lister.
func newFramework(tb testing.TB, snapshot framework.SharedLister, claims []*v1.PersistentVolumeClaim, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	objs := make([]k8sruntime.Object, len(claims))
	for i, c := range claims {
		objs[i] = c
	}
	r := registry.New(map[string]runtime.Factory{Name: New})
	return st.NewFramework(tb, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot, append(st.Informers(tb, objs...), opts...)...)
}

func gcePD(pdName string, readOnly bool) v1.Volume {
	return v1.Volume{Name: "gce-" + pdName, VolumeSource: v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: pdName, ReadOnly: readOnly}}}
}

func awsEBS(id string, readOnly bool) v1.Volume {
	return v1.Volume{Name: "ebs-" + id, VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: id, ReadOnly: readOnly}}}
}

func rbd(monitors []string, pool, image string, readOnly bool) v1.Volume {
	return v1.Volume{Name: "rbd-" + image, VolumeSource: v1.VolumeSource{RBD: &v1.RBDVolumeSource{CephMonitors: monitors, RBDPool: pool, RBDImage: image, ReadOnly: readOnly}}}
}

func iscsi(iqn string, readOnly bool) v1.Volume {
	return v1.Volume{Name: "iscsi", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "127.0.0.1:3260", IQN: iqn, Lun: 0, ReadOnly: readOnly}}}
}

func emptyDir() v1.Volume {
	return v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
}

func podWith(name string, volumes ...v1.Volume) *st.PodWrapper {
	p := st.MakePod().Name(name)
	for _, v := range volumes {
		p.Volume(v)
	}
	return p
}

// skipsFilter runs the instance's PreFilter and reports whether it skipped
// this plugin's Filter.
func skipsFilter(t *testing.T, fwk framework.Framework, pod *v1.Pod) bool {
	t.Helper()
	state := framework.NewCycleState()
	if _, s, _ := fwk.RunPreFilterPlugins(t.Context(), state, pod); !s.IsSuccess() {
		return false
	}
	return state.GetSkipFilterPlugins().Has(Name)
}

func TestDiskConflicts(t *testing.T) {
	conflict := framework.NewStatus(framework.Unschedulable, ErrReasonDiskConflict).WithPlugin(Name)
	mons := []string{"a", "b"}
	tests := []struct {
		name     string
		volume   v1.Volume
		existing []v1.Volume
		wantSkip bool
		// wantBusy is the verdict on the node holding existing; the other node always passes.
		wantBusy *framework.Status
	}{
		{name: "no restricted volume", volume: emptyDir(), existing: []v1.Volume{gcePD("foo", false)}, wantSkip: true},
		{name: "GCE PD on a node without disks", volume: gcePD("foo", false)},
		{name: "GCE PD in use read-write", volume: gcePD("foo", false), existing: []v1.Volume{gcePD("foo", false)}, wantBusy: conflict},
		{name: "GCE PD wanted read-only, in use read-write", volume: gcePD("foo", true), existing: []v1.Volume{gcePD("foo", false)}, wantBusy: conflict},
		{name: "GCE PD wanted read-write, in use read-only", volume: gcePD("foo", false), existing: []v1.Volume{gcePD("foo", true)}, wantBusy: conflict},
		{name: "GCE PD read-only everywhere", volume: gcePD("foo", true), existing: []v1.Volume{gcePD("foo", true)}},
		{name: "other GCE PD", volume: gcePD("foo", false), existing: []v1.Volume{gcePD("bar", false)}},
		{name: "GCE PD among other volumes", volume: gcePD("foo", false), existing: []v1.Volume{emptyDir(), gcePD("bar", false), gcePD("foo", false)}, wantBusy: conflict},
		{name: "EBS in use", volume: awsEBS("vol-1", false), existing: []v1.Volume{awsEBS("vol-1", false)}, wantBusy: conflict},
		{name: "EBS read-only everywhere still conflicts", volume: awsEBS("vol-1", true), existing: []v1.Volume{awsEBS("vol-1", true)}, wantBusy: conflict},
		{name: "other EBS", volume: awsEBS("vol-1", false), existing: []v1.Volume{awsEBS("vol-2", false)}},
		{name: "RBD image in use", volume: rbd(mons, "pool", "img", false), existing: []v1.Volume{rbd([]string{"b", "c"}, "pool", "img", false)}, wantBusy: conflict},
		{name: "RBD image read-only everywhere", volume: rbd(mons, "pool", "img", true), existing: []v1.Volume{rbd(mons, "pool", "img", true)}},
		{name: "RBD image half read-only", volume: rbd(mons, "pool", "img", true), existing: []v1.Volume{rbd(mons, "pool", "img", false)}, wantBusy: conflict},
		{name: "RBD image of another Ceph cluster", volume: rbd(mons, "pool", "img", false), existing: []v1.Volume{rbd([]string{"c", "d"}, "pool", "img", false)}},
		{name: "RBD image in another pool", volume: rbd(mons, "pool", "img", false), existing: []v1.Volume{rbd(mons, "pool2", "img", false)}},
		{name: "other RBD image", volume: rbd(mons, "pool", "img", false), existing: []v1.Volume{rbd(mons, "pool", "img2", false)}},
		{name: "iSCSI IQN in use", volume: iscsi("iqn.2016-12.server:storage.target01", false), existing: []v1.Volume{iscsi("iqn.2016-12.server:storage.target01", false)}, wantBusy: conflict},
		{name: "iSCSI IQN half read-only", volume: iscsi("iqn.2016-12.server:storage.target01", false), existing: []v1.Volume{iscsi("iqn.2016-12.server:storage.target01", true)}, wantBusy: conflict},
		{name: "iSCSI IQN read-only everywhere", volume: iscsi("iqn.2016-12.server:storage.target01", true), existing: []v1.Volume{iscsi("iqn.2016-12.server:storage.target01", true)}},
		{name: "other iSCSI IQN", volume: iscsi("iqn.2016-12.server:storage.target01", false), existing: []v1.Volume{iscsi("iqn.2017-12.server:storage.target01", false)}},
		{name: "different kinds never conflict", volume: gcePD("x", false), existing: []v1.Volume{awsEBS("x", false)}},
	}
	nodes := []*v1.Node{st.MakeNode().Name("busy").Obj(), st.MakeNode().Name("free").Obj()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := podWith("existing", tt.existing...).Node("busy").Obj()
			snapshot := st.NewSnapshot([]*v1.Pod{existing}, nodes)
			fwk := newFramework(t, snapshot, nil)
			pod := podWith("p", tt.volume).Obj()
			got := st.RunCycle(t.Context(), fwk, snapshot, pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(map[string]*framework.Status{"busy": tt.wantBusy, "free": nil}, got.Filter); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSkip, skipsFilter(t, fwk, pod)); diff != "" {
				t.Errorf("Filter skipped (-want +got):\n%s", diff)
			}
		})
	}
}

func testClaims() []*v1.PersistentVolumeClaim {
	return []*v1.PersistentVolumeClaim{
		st.MakePVC("default", "rwop-1").AccessModes(v1.ReadWriteOncePod).Obj(),
		st.MakePVC("default", "rwop-2").AccessModes(v1.ReadWriteOncePod).Obj(),
		st.MakePVC("default", "rwo").AccessModes(v1.ReadWriteOnce).Obj(),
		st.MakePVC("default", "rwo-and-rwop").AccessModes(v1.ReadWriteOnce, v1.ReadWriteOncePod).Obj(),
		st.MakePVC("other", "rwop-1").AccessModes(v1.ReadWriteOncePod).Obj(),
	}
}

// rwopSnapshot has a pod on node busy using the ReadWriteOncePod claims
// rwop-1 and rwo-and-rwop and the RWO claim rwo, plus a GCE PD; node free
// has nothing.
func rwopSnapshot() (*st.Snapshot, *v1.Pod) {
	user := podWith("user", gcePD("pd", false)).Node("busy").PVC("rwop-1").PVC("rwo").PVC("rwo-and-rwop").Obj()
	return st.NewSnapshot([]*v1.Pod{user}, []*v1.Node{st.MakeNode().Name("busy").Obj(), st.MakeNode().Name("free").Obj()}), user
}

func TestReadWriteOncePod(t *testing.T) {
	rwopConflict := framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict).WithPlugin(Name)
	diskConflict := framework.NewStatus(framework.Unschedulable, ErrReasonDiskConflict).WithPlugin(Name)
	notFound := framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "missing" not found`).WithPlugin(Name)
	tests := []struct {
		name          string
		pod           *v1.Pod
		wantPreFilter *framework.Status
		wantSkip      bool
		wantFilter    map[string]*framework.Status
	}{
		{
			name:       "RWO claim in use is not this plugin's business",
			pod:        st.MakePod().Name("p").PVC("rwo").Obj(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"busy": nil, "free": nil},
		},
		{
			name:       "ReadWriteOncePod claim not in use",
			pod:        st.MakePod().Name("p").PVC("rwop-2").Obj(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"busy": nil, "free": nil},
		},
		{
			name:       "ReadWriteOncePod claim in use rejects every node",
			pod:        st.MakePod().Name("p").PVC("rwop-2").PVC("rwop-1").Obj(),
			wantFilter: map[string]*framework.Status{"busy": rwopConflict, "free": rwopConflict},
		},
		{
			name:       "claim with ReadWriteOncePod among its modes",
			pod:        st.MakePod().Name("p").PVC("rwo-and-rwop").Obj(),
			wantFilter: map[string]*framework.Status{"busy": rwopConflict, "free": rwopConflict},
		},
		{
			name:       "same claim name in another namespace",
			pod:        st.MakePod().Name("p").Namespace("other").PVC("rwop-1").Obj(),
			wantSkip:   true,
			wantFilter: map[string]*framework.Status{"busy": nil, "free": nil},
		},
		{
			name:       "disk conflict is reported before the claim conflict",
			pod:        podWith("p", gcePD("pd", false)).PVC("rwop-1").Obj(),
			wantFilter: map[string]*framework.Status{"busy": diskConflict, "free": rwopConflict},
		},
		{
			name:          "missing claim",
			pod:           podWith("p", gcePD("other", false)).PVC("rwop-2").PVC("missing").Obj(),
			wantPreFilter: notFound,
			wantFilter:    map[string]*framework.Status{"busy": notFound, "free": notFound},
		},
		{
			name:          "missing claim in another namespace",
			pod:           st.MakePod().Name("p").Namespace("other").PVC("rwo").Obj(),
			wantPreFilter: framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "rwo" not found`).WithPlugin(Name),
			wantFilter: map[string]*framework.Status{
				"busy": framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "rwo" not found`).WithPlugin(Name),
				"free": framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "rwo" not found`).WithPlugin(Name),
			},
		},
	}
	snapshot, _ := rwopSnapshot()
	fwk := newFramework(t, snapshot, testClaims())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.wantPreFilter, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFilter, got.Filter); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSkip, skipsFilter(t, fwk, tt.pod)); diff != "" {
				t.Errorf("Filter skipped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	snapshot, _ := rwopSnapshot()
	fwk := newFramework(t, snapshot, testClaims())
	tests := []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{
			name: "claim in use",
			pod:  st.MakePod().Name("p").PVC("rwop-1").Obj(),
			want: "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod.",
		},
		{
			name: "disk and claim in use",
			pod:  podWith("p", gcePD("pd", false)).PVC("rwop-1").Obj(),
			want: "0/2 nodes are available: 1 node(s) had no available disk, 1 node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod.",
		},
		{
			name: "missing claim",
			pod:  st.MakePod().Name("p").PVC("missing").Obj(),
			want: `0/2 nodes are available: persistentvolumeclaim "missing" not found.`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if diff := cmp.Diff(tt.want, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionExtensions checks what DefaultPreemption relies on:
// removing the claim's user from a node (on a clone of the cycle state)
// makes that node pass, without changing the verdict of the original
// state, and adding a user back rejects it again.
func TestPreemptionExtensions(t *testing.T) {
	snapshot, user := rwopSnapshot()
	fwk := newFramework(t, snapshot, testClaims())
	ctx := t.Context()
	rwopConflict := framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict).WithPlugin(Name)
	diskConflict := framework.NewStatus(framework.Unschedulable, ErrReasonDiskConflict).WithPlugin(Name)
	userInfo, err := framework.NewPodInfo(user)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := snapshot.Get("busy")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		pod  *v1.Pod
		// wantBefore, wantRemoved and wantReAdded are the verdicts on node
		// busy before, after removing the user, and after adding it back.
		wantBefore, wantRemoved, wantReAdded *framework.Status
	}{
		{
			name:        "claim in use",
			pod:         st.MakePod().Name("p").PVC("rwop-1").Obj(),
			wantBefore:  rwopConflict,
			wantReAdded: rwopConflict,
		},
		{
			name:        "disk and claim in use",
			pod:         podWith("p", gcePD("pd", false)).PVC("rwop-1").Obj(),
			wantBefore:  diskConflict,
			wantReAdded: diskConflict,
		},
		{
			// The user's other claims are not the pod's: removing it does not
			// change what the pod conflicts with, only the node's disks.
			name:        "disk in use, claim free",
			pod:         podWith("p", gcePD("pd", false)).PVC("rwop-2").Obj(),
			wantBefore:  diskConflict,
			wantReAdded: diskConflict,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, tt.pod); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			if diff := cmp.Diff(tt.wantBefore, fwk.RunFilterPlugins(ctx, state, tt.pod, busy)); diff != "" {
				t.Errorf("before (-want +got):\n%s", diff)
			}

			victimState := state.Clone()
			ni := busy.Snapshot()
			if err := ni.RemovePod(klog.FromContext(ctx), user); err != nil {
				t.Fatal(err)
			}
			if s := fwk.RunPreFilterExtensionRemovePod(ctx, victimState, tt.pod, userInfo, ni); !s.IsSuccess() {
				t.Fatalf("RemovePod: %v", s)
			}
			if diff := cmp.Diff(tt.wantRemoved, fwk.RunFilterPlugins(ctx, victimState, tt.pod, ni)); diff != "" {
				t.Errorf("user removed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBefore, fwk.RunFilterPlugins(ctx, state, tt.pod, busy)); diff != "" {
				t.Errorf("original state after the clone changed (-want +got):\n%s", diff)
			}

			ni.AddPodInfo(userInfo)
			if s := fwk.RunPreFilterExtensionAddPod(ctx, victimState, tt.pod, userInfo, ni); !s.IsSuccess() {
				t.Fatalf("AddPod: %v", s)
			}
			if diff := cmp.Diff(tt.wantReAdded, fwk.RunFilterPlugins(ctx, victimState, tt.pod, ni)); diff != "" {
				t.Errorf("user added back (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAddNominatedUser checks that a nominated pod using the claim, added
// through AddPod as the framework does for nominated pods, makes the claim
// count as in use.
func TestAddNominatedUser(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode().Name("n").Obj()}
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(t, snapshot, testClaims())
	ctx := t.Context()
	// A disk keeps PreFilter from skipping while the claim is unused.
	pod := podWith("p", gcePD("pd", false)).PVC("rwop-2").Obj()
	state := framework.NewCycleState()
	if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	ni, err := snapshot.Get("n")
	if err != nil {
		t.Fatal(err)
	}
	if s := fwk.RunFilterPlugins(ctx, state, pod, ni); s != nil {
		t.Fatalf("Filter before: %v", s)
	}
	nominated, err := framework.NewPodInfo(st.MakePod().Name("nominated").PVC("rwop-2").PVC("rwop-2").Obj())
	if err != nil {
		t.Fatal(err)
	}
	if s := fwk.RunPreFilterExtensionAddPod(ctx, state, pod, nominated, ni.Snapshot()); !s.IsSuccess() {
		t.Fatalf("AddPod: %v", s)
	}
	want := framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict).WithPlugin(Name)
	if diff := cmp.Diff(want, fwk.RunFilterPlugins(ctx, state, pod, ni)); diff != "" {
		t.Errorf("Filter after AddPod (-want +got):\n%s", diff)
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterStateKey)
	if err != nil {
		t.Fatal(err)
	}
	// Each volume referencing the claim counts, as upstream counts them.
	if diff := cmp.Diff(2, s.conflictingRefs); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}
}

// TestFilterWithoutPreFilter checks Filter and AddPod called without
// PreFilter, as upstream answers them: the disk rules still give their
// verdict (they only read the pod), the rest is an error naming the
// missing state.
func TestFilterWithoutPreFilter(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil), testClaims())
	pl, err := New(t.Context(), nil, fwk)
	if err != nil {
		t.Fatal(err)
	}
	// Errors are compared by code and message: an error value is never equal to another.
	type verdict struct {
		Code    framework.Code
		Message string
	}
	verdictOf := func(s *framework.Status) verdict { return verdict{s.Code(), s.Message()} }
	noState := verdict{framework.Error, `cannot read "PreFilterVolumeRestrictions" from cycleState`}
	tests := []struct {
		name     string
		pod      *v1.Pod
		existing []v1.Volume
		want     verdict
	}{
		{name: "disk in use", pod: podWith("p", gcePD("pd", false)).Obj(), existing: []v1.Volume{gcePD("pd", false)}, want: verdict{framework.Unschedulable, ErrReasonDiskConflict}},
		{name: "disk free", pod: podWith("p", gcePD("pd", false)).Obj(), existing: []v1.Volume{gcePD("other", false)}, want: noState},
		{name: "claim only", pod: st.MakePod().Name("p").PVC("rwop-1").Obj(), want: noState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := framework.NewNodeInfo(podWith("existing", tt.existing...).Node("n").Obj())
			ni.SetNode(st.MakeNode().Name("n").Obj())
			got := pl.(framework.FilterPlugin).Filter(t.Context(), framework.NewCycleState(), tt.pod, ni)
			if diff := cmp.Diff(tt.want, verdictOf(got)); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
	pi, err := framework.NewPodInfo(st.MakePod().Name("nominated").PVC("rwop-1").Obj())
	if err != nil {
		t.Fatal(err)
	}
	got := pl.(framework.PreFilterPlugin).PreFilterExtensions().AddPod(t.Context(), framework.NewCycleState(), st.MakePod().Name("p").Obj(), pi, framework.NewNodeInfo())
	if diff := cmp.Diff(noState, verdictOf(got)); diff != "" {
		t.Errorf("AddPod (-want +got):\n%s", diff)
	}
}

func TestEventsToRegister(t *testing.T) {
	fwk := newFramework(t, nil, nil)
	want := []st.Registration{
		{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}, Hinted: true},
		// Upstream gives Node/Add no hint: every new node queues.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}, Hinted: false},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}, Hinted: true},
	}
	if diff := cmp.Diff(want, st.Registrations(t, fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestQueueingHints(t *testing.T) {
	fwk := newFramework(t, nil, nil)
	var (
		assignedPodDelete = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}
		podDelete         = framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.Delete}
		podUpdate         = framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.UpdatePodLabel}
		nodeAdd           = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
		nodeLabel         = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}
		nodeTaint         = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}
		pvcAdd            = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}
		pvcUpdate         = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Update}
	)
	withDisk := podWith("p", gcePD("pd", false)).PVC("data").Obj()
	tests := []struct {
		name           string
		pod            *v1.Pod
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
		wantErr        bool
	}{
		{name: "deleted pod held the disk", pod: withDisk, event: assignedPodDelete, oldObj: podWith("x", gcePD("pd", true)).Node("n").Obj(), want: framework.Queue},
		{name: "deleted pod shared the disk read-only", pod: podWith("p", gcePD("pd", true)).Obj(), event: assignedPodDelete, oldObj: podWith("x", gcePD("pd", true)).Node("n").Obj(), want: framework.QueueSkip},
		{name: "deleted pod held another disk", pod: withDisk, event: assignedPodDelete, oldObj: podWith("x", gcePD("other", false)).Node("n").Obj(), want: framework.QueueSkip},
		{name: "deleted pod used the claim", pod: withDisk, event: assignedPodDelete, oldObj: st.MakePod().Name("x").Node("n").PVC("data").Obj(), want: framework.Queue},
		// Upstream 1.37 registers AssignedPod/Delete only.
		{name: "deleted unscheduled pod is not registered", pod: withDisk, event: podDelete, oldObj: st.MakePod().Name("x").PVC("data").Obj(), want: framework.QueueSkip},
		{name: "deleted pod used another claim", pod: withDisk, event: assignedPodDelete, oldObj: st.MakePod().Name("x").Node("n").PVC("other").Obj(), want: framework.QueueSkip},
		{name: "deleted pod in another namespace", pod: withDisk, event: assignedPodDelete, oldObj: podWith("x", gcePD("pd", false)).Namespace("other").Node("n").PVC("data").Obj(), want: framework.QueueSkip},
		{name: "deleted EBS user", pod: podWith("p", awsEBS("vol", true)).Obj(), event: assignedPodDelete, oldObj: podWith("x", awsEBS("vol", true)).Node("n").Obj(), want: framework.Queue},
		{name: "pod delete with the wrong type", pod: withDisk, event: assignedPodDelete, oldObj: st.MakeNode().Name("n").Obj(), want: framework.Queue, wantErr: true},
		{name: "pod update is not registered", pod: withDisk, event: podUpdate, oldObj: st.MakePod().Name("x").Obj(), newObj: st.MakePod().Name("x").Obj(), want: framework.QueueSkip},
		{name: "node added", pod: withDisk, event: nodeAdd, newObj: st.MakeNode().Name("n").Obj(), want: framework.Queue},
		{name: "node label update is not registered", pod: withDisk, event: nodeLabel, oldObj: st.MakeNode().Name("n").Obj(), newObj: st.MakeNode().Name("n").Label("a", "b").Obj(), want: framework.QueueSkip},
		{name: "node taint update is not registered", pod: withDisk, event: nodeTaint, oldObj: st.MakeNode().Name("n").Obj(), newObj: st.MakeNode().Name("n").Obj(), want: framework.QueueSkip},
		{name: "pod's claim created", pod: withDisk, event: pvcAdd, newObj: st.MakePVC("default", "data").Obj(), want: framework.Queue},
		{name: "other claim created", pod: withDisk, event: pvcAdd, newObj: st.MakePVC("default", "other").Obj(), want: framework.QueueSkip},
		{name: "claim created in another namespace", pod: withDisk, event: pvcAdd, newObj: st.MakePVC("other", "data").Obj(), want: framework.QueueSkip},
		{name: "claim update is not registered", pod: withDisk, event: pvcUpdate, oldObj: st.MakePVC("default", "data").Obj(), newObj: st.MakePVC("default", "data").Obj(), want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, Name, tt.event, tt.pod, tt.oldObj, tt.newObj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkVolumeRestrictions filters a pod with a GCE PD and a
// ReadWriteOncePod claim over 5000 nodes, each running a pod with disks and
// claims of its own; one node in ten holds the pod's PD read-write.
func BenchmarkVolumeRestrictions(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node { return st.MakeNode().Name(fmt.Sprintf("node-%d", i)).Obj() })
	benchClaims := []*v1.PersistentVolumeClaim{st.MakePVC("default", "mine").AccessModes(v1.ReadWriteOncePod).Obj()}
	var pods []*v1.Pod
	for i, n := range nodes {
		pd := fmt.Sprintf("pd-%d", i)
		if i%10 == 0 {
			pd = "wanted"
		}
		claim := fmt.Sprintf("claim-%d", i)
		benchClaims = append(benchClaims, st.MakePVC("default", claim).AccessModes(v1.ReadWriteOnce).Obj())
		pods = append(pods, podWith(fmt.Sprintf("pod-%d", i), gcePD(pd, false), awsEBS(fmt.Sprintf("vol-%d", i), false), emptyDir()).Node(n.Name).PVC(claim).Obj())
	}
	snapshot := st.NewSnapshot(pods, nodes)
	fwk := newFramework(b, snapshot, benchClaims, runtime.WithParallelism(1))
	pod := podWith("p", gcePD("wanted", false), emptyDir()).PVC("mine").Obj()
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, pod)
	})
}
