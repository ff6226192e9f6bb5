package interpodaffinity

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestScore(t *testing.T) {
	db := st.PodAffinityTerm("app", "db", zoneKey)
	dbHost := st.PodAffinityTerm("app", "db", hostnameKey)
	web := st.PodAffinityTerm("app", "web", zoneKey)
	tests := []struct {
		name     string
		pod      *v1.Pod
		existing []*v1.Pod
		args     *configv1.InterPodAffinityArgs
		want     map[string]int64
	}{
		{
			name:     "no terms on either side: every node scores 0",
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()},
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name:     "preferred affinity favours the zone of matching pods",
			pod:      st.MakePod().Name("p").PreferredPodAffinity(5, db).Obj(),
			existing: []*v1.Pod{st.MakePod().Name("db").Label("app", "db").Node("n3").Obj()},
			want:     map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 0},
		},
		{
			name: "preferred anti-affinity disfavours the zone of matching pods",
			pod:  st.MakePod().Name("p").PreferredPodAntiAffinity(5, db).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
			},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 100},
		},
		{
			name: "weights add up per domain and are normalized between the extremes",
			pod: st.MakePod().Name("p").
				PreferredPodAffinity(8, db).
				PreferredPodAntiAffinity(3, dbHost).Obj(),
			existing: []*v1.Pod{
				// Zone a: 2 × 8; n1 also -2 × 3 for its own two db pods.
				st.MakePod().Name("db1").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db2").Label("app", "db").Node("n1").Obj(),
				// Zone b: 8; n3 -3.
				st.MakePod().Name("db3").Label("app", "db").Node("n3").Obj(),
			},
			// Raw: n1 16-6=10, n2 16, n3 8-3=5, n4 0 → (x-0)/(16-0)×100.
			want: map[string]int64{"n1": 62, "n2": 100, "n3": 31, "n4": 0},
		},
		{
			name: "symmetry: existing pods' preferred affinity attracts the pod",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e").Node("n3").PreferredPodAffinity(10, web).Obj(),
			},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 0},
		},
		{
			name: "symmetry: existing pods' preferred anti-affinity repels the pod",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e").Node("n3").PreferredPodAntiAffinity(10, web).Obj(),
			},
			want: map[string]int64{"n1": 100, "n2": 100, "n3": 0, "n4": 100},
		},
		{
			name: "symmetry: existing pods' required affinity counts hardPodAffinityWeight",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").PodAffinity(web).Obj(),
				st.MakePod().Name("e3").Node("n3").PreferredPodAffinity(3, web).Obj(),
			},
			args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](6)},
			// Zone a: 6, zone b: 3.
			want: map[string]int64{"n1": 100, "n2": 100, "n3": 50, "n4": 0},
		},
		{
			name: "hardPodAffinityWeight 0 ignores existing pods' required affinity",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").PodAffinity(web).Obj(),
			},
			args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](0)},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name: "the default hardPodAffinityWeight is 1",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").PodAffinity(web).Obj(),
				st.MakePod().Name("e3").Node("n3").PreferredPodAffinity(2, web).Obj(),
			},
			want: map[string]int64{"n1": 50, "n2": 50, "n3": 100, "n4": 0},
		},
		{
			name: "ignorePreferredTermsOfExistingPods skips pods without preferred terms",
			pod:  st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e").Node("n3").PreferredPodAffinity(10, web).Obj(),
			},
			args: &configv1.InterPodAffinityArgs{IgnorePreferredTermsOfExistingPods: true},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
		{
			name: "ignorePreferredTermsOfExistingPods still scores the pod's own terms and the symmetric ones",
			pod:  st.MakePod().Name("p").Label("app", "web").PreferredPodAffinity(1, db).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("e").Node("n3").PreferredPodAffinity(10, web).Obj(),
			},
			args: &configv1.InterPodAffinityArgs{IgnorePreferredTermsOfExistingPods: true},
			want: map[string]int64{"n1": 10, "n2": 10, "n3": 100, "n4": 0},
		},
		{
			name: "existing pods' terms use their own namespace selector against the pod's namespace labels",
			pod:  st.MakePod().Name("p").Namespace("ns-b").Label("app", "web").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").PreferredPodAffinity(10, withNamespaceSelector(web,
					&metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}})).Obj(),
				st.MakePod().Name("e3").Node("n3").PreferredPodAffinity(10, web).Obj(),
			},
			want: map[string]int64{"n1": 100, "n2": 100, "n3": 0, "n4": 0},
		},
		{
			name: "the pod's preferred terms with a namespace selector",
			pod: st.MakePod().Name("p").PreferredPodAffinity(1, withNamespaceSelector(db,
				&metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}})).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db1").Namespace("ns-a").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db3").Namespace("ns-b").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 0},
		},
		{
			// Upstream 1.37.2 merges the selector into the namespaces for
			// preferred terms too; 1.36 kept it and matched it against no
			// labels, so here it also counted db1 in ns-a.
			name: "the pod's preferred terms with a namespace selector matching label-less namespaces",
			pod: st.MakePod().Name("p").PreferredPodAffinity(1, withNamespaceSelector(db,
				&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}})).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db1").Namespace("ns-a").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db3").Namespace("ns-b").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 0},
		},
		{
			name: "terms whose topology key no node has score nothing",
			pod:  st.MakePod().Name("p").PreferredPodAffinity(1, st.PodAffinityTerm("app", "db", "missing")).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
			},
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 0, "n4": 0},
		},
	}
	namespaces := []*v1.Namespace{
		namespace("default", nil),
		namespace("ns-a", map[string]string{"team": "a"}),
		namespace("ns-b", map[string]string{"team": "b"}),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.existing, zonedNodes())
			fwk := newFramework(t, snapshot, tt.args, namespaces...)
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
