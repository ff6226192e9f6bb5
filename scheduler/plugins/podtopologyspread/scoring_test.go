package podtopologyspread

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// The expected scores below follow upstream's formula: per constraint,
// count × log(domains + 2) + maxSkew - 1, rounded, then normalized as
// 100 × (max + min - score) / max, so fewer matching pods score higher.
func TestScore(t *testing.T) {
	twoZones := []*v1.Node{node("n1", "a").Obj(), node("n2", "a").Obj(), node("n3", "b").Obj(), node("n4", "b").Obj()}
	mixed := []*v1.Node{node("n1", "a").Obj(), node("n2", "a").Obj(), node("n3", "b").Obj(), node("n4", "").Obj()}
	webService := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}},
	}
	soft := func(maxSkew int32, key string) *st.PodWrapper {
		return st.MakePod().Name("p").Label("app", "web").SpreadConstraint(maxSkew, key, v1.ScheduleAnyway, "app", "web")
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		nodes    []*v1.Node
		existing []*v1.Pod
		args     *configv1.PodTopologySpreadArgs
		objs     []k8sruntime.Object
		want     map[string]int64
	}{
		{
			name:     "hostname: fewer matching pods score higher",
			pod:      soft(1, hostnameKey).Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 3), pods("x", "web", "n2", 1)),
			// Raw: n1 round(3×log 6)=5, n2 2, n3 0, n4 0.
			want: map[string]int64{"n1": 0, "n2": 60, "n3": 100, "n4": 100},
		},
		{
			name:     "zone: counts are per domain",
			pod:      soft(1, zoneKey).Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 3), pods("x", "web", "n2", 1)),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 100},
		},
		{
			name:     "a larger maxSkew tolerates more difference",
			pod:      soft(3, zoneKey).Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 3), pods("x", "web", "n2", 1)),
			want:     map[string]int64{"n1": 25, "n2": 25, "n3": 100, "n4": 100},
		},
		{
			name:     "nodes lacking a topology key of the pod's own constraints score 0",
			pod:      soft(1, zoneKey).SpreadConstraint(1, hostnameKey, v1.ScheduleAnyway, "app", "web").Obj(),
			nodes:    mixed,
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 33, "n2": 100, "n3": 33, "n4": 0},
		},
		{
			name:     "only pods of the pod's namespace count",
			pod:      soft(1, hostnameKey).Obj(),
			nodes:    twoZones,
			existing: []*v1.Pod{st.MakePod().Name("w").Namespace("other").Label("app", "web").Node("n1").Obj()},
			want:     map[string]int64{"n1": 100, "n2": 100, "n3": 100, "n4": 100},
		},
		{
			name:     "system defaults spread the pods of a Service over hosts and zones, zoneless nodes included",
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes:    mixed,
			objs:     []k8sruntime.Object{webService},
			existing: concat(pods("w", "web", "n1", 2), pods("y", "web", "n3", 1)),
			// n1: 2×log 6 + 2 + 2×log 5 + 4 ≈ 13; n2 ≈ 9; n3 ≈ 9; n4: 2 (host only).
			want: map[string]int64{"n1": 15, "n2": 46, "n3": 46, "n4": 100},
		},
		{
			name:  "system defaults follow a StatefulSet's selector",
			pod:   ownedBy(st.MakePod().Name("p").Label("app", "web").Obj(), "apps/v1", "StatefulSet", "ss"),
			nodes: mixed,
			objs: []k8sruntime.Object{&appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "ss", Namespace: "default"},
				Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			}},
			existing: concat(pods("w", "web", "n1", 2), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 15, "n2": 46, "n3": 46, "n4": 100},
		},
		{
			name:  "system defaults follow a ReplicationController's selector",
			pod:   ownedBy(st.MakePod().Name("p").Label("app", "web").Obj(), "v1", "ReplicationController", "rc"),
			nodes: mixed,
			objs: []k8sruntime.Object{&v1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "default"},
				Spec:       v1.ReplicationControllerSpec{Selector: map[string]string{"app": "web"}},
			}},
			existing: concat(pods("w", "web", "n1", 2), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 15, "n2": 46, "n3": 46, "n4": 100},
		},
		{
			name:     "system defaults do not apply to pods of no group",
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes:    mixed,
			existing: concat(pods("w", "web", "n1", 2), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name:     "pods with constraints of their own do not get the defaults",
			pod:      st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").Obj(),
			nodes:    twoZones,
			objs:     []k8sruntime.Object{webService},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name:  "List defaults require every topology key",
			pod:   st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes: mixed,
			args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.ScheduleAnyway},
				{MaxSkew: 1, TopologyKey: hostnameKey, WhenUnsatisfiable: v1.ScheduleAnyway},
			}},
			objs:     []k8sruntime.Object{webService},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]int64{"n1": 33, "n2": 100, "n3": 33, "n4": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.existing, tt.nodes)
			fwk := newFramework(t, snapshot, tt.args, tt.objs...)
			res := st.RunCycle(context.Background(), fwk, snapshot, tt.pod)
			if res.Err != nil {
				t.Fatalf("cycle failed: %v", res.Err)
			}
			if diff := cmp.Diff(tt.want, res.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}
