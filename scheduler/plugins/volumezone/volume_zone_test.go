package volumezone

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	betaZone   = v1.LabelFailureDomainBetaZone
	betaRegion = v1.LabelFailureDomainBetaRegion
	zone       = v1.LabelTopologyZone
	region     = v1.LabelTopologyRegion
)

// newFramework builds a real instance running only VolumeZone (plus the
// QueueSort and Bind plugins every profile needs), whose informers already
// hold objs: the plugin only reads them through listers.
func newFramework(tb testing.TB, snapshot framework.SharedLister, objs []k8sruntime.Object, opts ...runtime.Option) framework.Framework {
	tb.Helper()
	r := registry.New(map[string]runtime.Factory{Name: New})
	return st.NewFramework(tb, r, st.PluginProfile(st.Plugin(Name, 0)), snapshot, append(st.Informers(tb, objs...), opts...)...)
}

func labeledPV(name string, labels map[string]string) *v1.PersistentVolume {
	pv := st.MakePV(name).Obj()
	pv.Labels = labels
	return pv
}

func node(name string, labels map[string]string) *v1.Node {
	n := st.MakeNode().Name(name)
	for k, v := range labels {
		n.Label(k, v)
	}
	return n.Obj()
}

func TestVolumeZone(t *testing.T) {
	objs := []k8sruntime.Object{
		labeledPV("pv-beta-zone", map[string]string{betaZone: "us-west1-a", "uselessLabel": "none"}),
		labeledPV("pv-beta-region", map[string]string{betaRegion: "us-west1"}),
		labeledPV("pv-zone", map[string]string{zone: "us-west1-a"}),
		labeledPV("pv-region", map[string]string{region: "us-west1"}),
		labeledPV("pv-multi-zone", map[string]string{zone: "us-west1-a__us-west1-b"}),
		labeledPV("pv-bad-value", map[string]string{zone: "us-west1-a__"}),
		labeledPV("pv-zone-and-region", map[string]string{zone: "us-west1-a", region: "us-west1"}),
		labeledPV("pv-no-topology", map[string]string{"uselessLabel": "none"}),
		st.MakePVC("default", "beta-zone").Bound("pv-beta-zone").Obj(),
		st.MakePVC("default", "beta-region").Bound("pv-beta-region").Obj(),
		st.MakePVC("default", "zone").Bound("pv-zone").Obj(),
		st.MakePVC("default", "region").Bound("pv-region").Obj(),
		st.MakePVC("default", "multi-zone").Bound("pv-multi-zone").Obj(),
		st.MakePVC("default", "bad-value").Bound("pv-bad-value").Obj(),
		st.MakePVC("default", "zone-and-region").Bound("pv-zone-and-region").Obj(),
		st.MakePVC("default", "no-topology").Bound("pv-no-topology").Obj(),
		st.MakePVC("default", "pv-missing").Bound("nope").Obj(),
		st.MakePVC("default", "no-class").Obj(),
		st.MakePVC("default", "class-missing").StorageClass("gone").Obj(),
		st.MakePVC("default", "immediate").StorageClass("immediate").Obj(),
		st.MakePVC("default", "unset-mode").StorageClass("unset").Obj(),
		st.MakePVC("default", "wffc").StorageClass("wffc").Obj(),
		st.MakePVC("other", "zone").Bound("pv-zone").Obj(),
		st.MakeStorageClass("immediate").Obj(),
		st.MakeStorageClass("unset").BindingMode(nil).Obj(),
		st.MakeStorageClass("wffc").WaitForFirstConsumer().Obj(),
	}
	nodes := []*v1.Node{
		node("beta-a", map[string]string{betaZone: "us-west1-a", betaRegion: "us-west1"}),
		node("ga-a", map[string]string{zone: "us-west1-a", region: "us-west1"}),
		node("ga-b", map[string]string{zone: "us-west1-b", region: "us-west1"}),
		node("ga-c-east", map[string]string{zone: "us-east1-c", region: "us-east1"}),
		node("region-only", map[string]string{region: "us-west1"}),
		node("unlabeled", map[string]string{"uselessLabel": "none"}),
	}
	conflict := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict).WithPlugin(Name)
	unresolvable := func(msg string) *framework.Status {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, msg).WithPlugin(Name)
	}
	pod := func(claims ...string) *v1.Pod {
		p := st.MakePod().Name("p")
		for _, c := range claims {
			p.PVC(c)
		}
		return p.Obj()
	}
	allPass := map[string]*framework.Status{"beta-a": nil, "ga-a": nil, "ga-b": nil, "ga-c-east": nil, "region-only": nil, "unlabeled": nil}
	tests := []struct {
		name          string
		pod           *v1.Pod
		wantPreFilter *framework.Status
		// wantSkip: PreFilter found nothing to check, so Filter does not run.
		wantSkip bool
		// wantFilter lists nodes that differ from allPass.
		wantFilter map[string]*framework.Status
	}{
		{
			name:     "pod without volumes skips",
			pod:      st.MakePod().Name("p").Obj(),
			wantSkip: true,
		},
		{
			name:     "inline and ephemeral volumes are not looked at",
			pod:      st.MakePod().Name("p").EphemeralVolume("scratch").Volume(v1.Volume{Name: "empty", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}).Obj(),
			wantSkip: true,
		},
		{
			name:     "PV without topology labels skips",
			pod:      pod("no-topology"),
			wantSkip: true,
		},
		{
			name: "beta zone label matches beta and GA node labels",
			pod:  pod("beta-zone"),
			wantFilter: map[string]*framework.Status{
				"ga-b": conflict, "ga-c-east": conflict, "region-only": conflict,
			},
		},
		{
			name:       "beta region label matches GA node region",
			pod:        pod("beta-region"),
			wantFilter: map[string]*framework.Status{"ga-c-east": conflict},
		},
		{
			name: "GA zone label does not fall back to the beta node label",
			pod:  pod("zone"),
			wantFilter: map[string]*framework.Status{
				"beta-a": conflict, "ga-b": conflict, "ga-c-east": conflict, "region-only": conflict,
			},
		},
		{
			name:       "GA region label",
			pod:        pod("region"),
			wantFilter: map[string]*framework.Status{"beta-a": conflict, "ga-c-east": conflict},
		},
		{
			name: "multi-zone value accepts every listed zone",
			pod:  pod("multi-zone"),
			wantFilter: map[string]*framework.Status{
				"beta-a": conflict, "ga-c-east": conflict, "region-only": conflict,
			},
		},
		{
			name:     "unparsable value is ignored",
			pod:      pod("bad-value"),
			wantSkip: true,
		},
		{
			name: "zone and region must both match",
			pod:  pod("zone-and-region"),
			wantFilter: map[string]*framework.Status{
				"beta-a": conflict, "ga-b": conflict, "ga-c-east": conflict, "region-only": conflict,
			},
		},
		{
			name: "every claim counts",
			pod:  pod("multi-zone", "region"),
			wantFilter: map[string]*framework.Status{
				"beta-a": conflict, "ga-c-east": conflict, "region-only": conflict,
			},
		},
		{
			name:     "WaitForFirstConsumer claim is left to VolumeBinding",
			pod:      pod("wffc"),
			wantSkip: true,
		},
		{
			name: "WaitForFirstConsumer claim beside a bound one",
			pod:  pod("wffc", "region"),
			wantFilter: map[string]*framework.Status{
				"beta-a": conflict, "ga-c-east": conflict,
			},
		},
		{
			name:          "claim in another namespace is not the pod's",
			pod:           st.MakePod().Name("p").Namespace("elsewhere").PVC("zone").Obj(),
			wantPreFilter: unresolvable(`persistentvolumeclaim "zone" not found`),
		},
		{
			name:          "claim without a name",
			pod:           pod(""),
			wantPreFilter: unresolvable("PersistentVolumeClaim had no name"),
		},
		{
			name:          "missing claim",
			pod:           pod("nope"),
			wantPreFilter: unresolvable(`persistentvolumeclaim "nope" not found`),
		},
		{
			name:          "missing PV",
			pod:           pod("pv-missing"),
			wantPreFilter: unresolvable(`persistentvolume "nope" not found`),
		},
		{
			name:          "unbound claim without a class",
			pod:           pod("no-class"),
			wantPreFilter: unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
		},
		{
			name:          "unbound claim with a missing class",
			pod:           pod("class-missing"),
			wantPreFilter: unresolvable(`storageclass.storage.k8s.io "gone" not found`),
		},
		{
			name:          "unbound Immediate claim",
			pod:           pod("immediate"),
			wantPreFilter: unresolvable("PersistentVolume had no name"),
		},
		{
			name:          "class without binding mode",
			pod:           pod("unset-mode"),
			wantPreFilter: unresolvable(`VolumeBindingMode not set for StorageClass "unset"`),
		},
	}
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(t, snapshot, objs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.RunCycle(t.Context(), fwk, snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			state := framework.NewCycleState()
			if _, s, _ := fwk.RunPreFilterPlugins(t.Context(), state, tt.pod); s.IsSuccess() {
				if diff := cmp.Diff(tt.wantSkip, state.GetSkipFilterPlugins().Has(Name)); diff != "" {
					t.Errorf("Filter skipped (-want +got):\n%s", diff)
				}
			}
			want := make(map[string]*framework.Status, len(allPass))
			for n := range allPass {
				want[n] = tt.wantFilter[n]
				if tt.wantPreFilter.IsRejected() {
					want[n] = tt.wantPreFilter
				}
			}
			if diff := cmp.Diff(tt.wantPreFilter, got.PreFilter); diff != "" {
				t.Errorf("PreFilter (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, got.Filter); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumeZoneMessage(t *testing.T) {
	objs := []k8sruntime.Object{
		labeledPV("pv", map[string]string{zone: "us-west1-a"}),
		st.MakePVC("default", "data").Bound("pv").Obj(),
	}
	snapshot := st.NewSnapshot(nil, []*v1.Node{
		node("b", map[string]string{zone: "us-west1-b"}),
		node("c", map[string]string{zone: "us-west1-c"}),
	})
	fwk := newFramework(t, snapshot, objs)
	got := st.RunCycle(t.Context(), fwk, snapshot, st.MakePod().Name("p").PVC("data").Obj())
	want := "0/2 nodes are available: 2 node(s) had no available volume zone."
	if diff := cmp.Diff(want, got.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

// TestFilterWithoutPreFilter checks the fallback for callers that run
// Filter without PreFilter: the verdict is the same.
func TestFilterWithoutPreFilter(t *testing.T) {
	objs := []k8sruntime.Object{
		labeledPV("pv", map[string]string{zone: "us-west1-a"}),
		st.MakePVC("default", "data").Bound("pv").Obj(),
	}
	fwk := newFramework(t, st.NewSnapshot(nil, nil), objs)
	pl, err := New(t.Context(), nil, fwk)
	if err != nil {
		t.Fatal(err)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(node("b", map[string]string{zone: "us-west1-b"}))
	got := pl.(framework.FilterPlugin).Filter(t.Context(), framework.NewCycleState(), st.MakePod().Name("p").PVC("data").Obj(), ni)
	if diff := cmp.Diff(framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict), got); diff != "" {
		t.Errorf("Filter (-want +got):\n%s", diff)
	}
}

func TestEventsToRegister(t *testing.T) {
	fwk := newFramework(t, nil, nil)
	want := []st.Registration{
		{Event: framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add}, Hinted: true},
		// Upstream gives node events no hint: every node add or label change queues.
		{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel}, Hinted: false},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add | framework.Update}, Hinted: true},
		{Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add | framework.Update}, Hinted: true},
	}
	if diff := cmp.Diff(want, st.Registrations(t, fwk, Name)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestQueueingHints(t *testing.T) {
	fwk := newFramework(t, nil, nil)
	pod := st.MakePod().Name("p").PVC("data").Obj()
	var (
		classAdd  = framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Add}
		classUpd  = framework.ClusterEvent{Resource: framework.StorageClass, ActionType: framework.Update}
		nodeAdd   = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add}
		nodeLabel = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeLabel}
		nodeTaint = framework.ClusterEvent{Resource: framework.Node, ActionType: framework.UpdateNodeTaint}
		pvcAdd    = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Add}
		pvcUpd    = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Update}
		pvcDel    = framework.ClusterEvent{Resource: framework.PersistentVolumeClaim, ActionType: framework.Delete}
		pvAdd     = framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add}
		pvUpd     = framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Update}
	)
	tests := []struct {
		name           string
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
		wantErr        bool
	}{
		{name: "WaitForFirstConsumer class added", event: classAdd, newObj: st.MakeStorageClass("c").WaitForFirstConsumer().Obj(), want: framework.Queue},
		{name: "Immediate class added", event: classAdd, newObj: st.MakeStorageClass("c").Obj(), want: framework.QueueSkip},
		{name: "class without mode added", event: classAdd, newObj: st.MakeStorageClass("c").BindingMode(nil).Obj(), want: framework.QueueSkip},
		{name: "class updated is not registered", event: classUpd, oldObj: st.MakeStorageClass("c").Obj(), newObj: st.MakeStorageClass("c").WaitForFirstConsumer().Obj(), want: framework.QueueSkip},
		{name: "class event with the wrong type", event: classAdd, newObj: st.MakePV("x").Obj(), want: framework.Queue, wantErr: true},
		{name: "node added", event: nodeAdd, newObj: node("n", nil), want: framework.Queue},
		{name: "node labels updated", event: nodeLabel, oldObj: node("n", nil), newObj: node("n", map[string]string{zone: "a"}), want: framework.Queue},
		{name: "node taint updated is not registered", event: nodeTaint, oldObj: node("n", nil), newObj: node("n", nil), want: framework.QueueSkip},
		{name: "pod's claim added", event: pvcAdd, newObj: st.MakePVC("default", "data").Obj(), want: framework.Queue},
		{name: "pod's claim bound", event: pvcUpd, oldObj: st.MakePVC("default", "data").Obj(), newObj: st.MakePVC("default", "data").Bound("pv").Obj(), want: framework.Queue},
		{name: "claim of the same name in another namespace", event: pvcAdd, newObj: st.MakePVC("other", "data").Obj(), want: framework.QueueSkip},
		{name: "other claim added", event: pvcAdd, newObj: st.MakePVC("default", "other").Obj(), want: framework.QueueSkip},
		{name: "claim deleted is not registered", event: pvcDel, oldObj: st.MakePVC("default", "data").Obj(), want: framework.QueueSkip},
		{name: "PV added", event: pvAdd, newObj: st.MakePV("pv").Obj(), want: framework.Queue},
		{name: "PV zone changed", event: pvUpd, oldObj: labeledPV("pv", map[string]string{zone: "a"}), newObj: labeledPV("pv", map[string]string{zone: "b"}), want: framework.Queue},
		{name: "PV zone label added", event: pvUpd, oldObj: labeledPV("pv", nil), newObj: labeledPV("pv", map[string]string{betaRegion: "r"}), want: framework.Queue},
		{name: "PV zone label removed", event: pvUpd, oldObj: labeledPV("pv", map[string]string{region: "r"}), newObj: labeledPV("pv", nil), want: framework.Queue},
		{name: "PV multi-zone value reordered", event: pvUpd, oldObj: labeledPV("pv", map[string]string{zone: "a__b"}), newObj: labeledPV("pv", map[string]string{zone: "b__a"}), want: framework.QueueSkip},
		{name: "PV other label changed", event: pvUpd, oldObj: labeledPV("pv", map[string]string{zone: "a", "x": "1"}), newObj: labeledPV("pv", map[string]string{zone: "a", "x": "2"}), want: framework.QueueSkip},
		{name: "PV unparsable value changed", event: pvUpd, oldObj: labeledPV("pv", map[string]string{zone: "a__"}), newObj: labeledPV("pv", map[string]string{zone: "__b"}), want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, Name, tt.event, pod, tt.oldObj, tt.newObj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseZones(t *testing.T) {
	tests := []struct {
		value   string
		want    []string
		wantErr bool
	}{
		{value: "a", want: []string{"a"}},
		{value: "a__b", want: []string{"a", "b"}},
		{value: " a __ b ", want: []string{"a", "b"}},
		{value: "a__a", want: []string{"a"}},
		{value: "", wantErr: true},
		{value: "a__", wantErr: true},
		{value: "a____b", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseZones(tt.value)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseZones(%q) error = %v, want error %v", tt.value, err, tt.wantErr)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(tt.want, sets.List(got)); diff != "" {
				t.Errorf("parseZones(%q) (-want +got):\n%s", tt.value, diff)
			}
		}
	}
}

func TestPVTopologiesOrder(t *testing.T) {
	pv := labeledPV("pv", map[string]string{zone: "a", betaZone: "a", region: "r", betaRegion: "r"})
	var got []string
	for _, tp := range pvTopologies(klog.Background(), pv) {
		got = append(got, tp.key)
	}
	if diff := cmp.Diff([]string{betaZone, betaRegion, zone, region}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// BenchmarkVolumeZone filters a pod with two zonal claims over 5000 nodes
// spread over three zones of one region.
func BenchmarkVolumeZone(b *testing.B) {
	zones := []string{"us-west1-a", "us-west1-b", "us-west1-c"}
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		return node(fmt.Sprintf("node-%d", i), map[string]string{zone: zones[i%len(zones)], region: "us-west1", v1.LabelHostname: fmt.Sprintf("node-%d", i)})
	})
	objs := []k8sruntime.Object{
		labeledPV("pv-1", map[string]string{zone: "us-west1-a__us-west1-b", region: "us-west1"}),
		labeledPV("pv-2", map[string]string{betaZone: "us-west1-a"}),
		st.MakePVC("default", "data-1").Bound("pv-1").Obj(),
		st.MakePVC("default", "data-2").Bound("pv-2").Obj(),
	}
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(b, snapshot, objs, runtime.WithParallelism(1))
	pod := st.MakePod().Name("p").PVC("data-1").PVC("data-2").Obj()
	b.Run("Filter", func(b *testing.B) {
		st.BenchmarkFilter(b, fwk, snapshot, pod)
	})
}
