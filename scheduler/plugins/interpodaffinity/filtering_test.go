package interpodaffinity

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func unschedulable(reason string) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, reason).WithPlugin(Name)
}

func unresolvable(reason string) *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, reason).WithPlugin(Name)
}

// exprTerm selects pods whose label key satisfies op over values.
func exprTerm(key string, op metav1.LabelSelectorOperator, topologyKey string, values ...string) v1.PodAffinityTerm {
	return v1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}},
		TopologyKey:   topologyKey,
	}
}

func withNamespaces(t v1.PodAffinityTerm, namespaces ...string) v1.PodAffinityTerm {
	t.Namespaces = namespaces
	return t
}

func withNamespaceSelector(t v1.PodAffinityTerm, sel *metav1.LabelSelector) v1.PodAffinityTerm {
	t.NamespaceSelector = sel
	return t
}

// zonedNodes: n1 and n2 in zone a, n3 in zone b, n4 without a zone.
func zonedNodes() []*v1.Node {
	return []*v1.Node{
		st.MakeNode().Name("n1").Label(zoneKey, "a").Label(hostnameKey, "n1").Obj(),
		st.MakeNode().Name("n2").Label(zoneKey, "a").Label(hostnameKey, "n2").Obj(),
		st.MakeNode().Name("n3").Label(zoneKey, "b").Label(hostnameKey, "n3").Obj(),
		st.MakeNode().Name("n4").Label(hostnameKey, "n4").Obj(),
	}
}

func TestFilter(t *testing.T) {
	dbInZoneA := st.PodAffinityTerm("app", "db", zoneKey)
	web := st.PodAffinityTerm("app", "web", zoneKey)
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	namespaces := []*v1.Namespace{
		namespace("default", map[string]string{"team": "a"}),
		namespace("ns-a", map[string]string{"team": "a"}),
		namespace("ns-b", map[string]string{"team": "b"}),
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		existing []*v1.Pod
		// want lists the rejected nodes; the others must pass.
		want        map[string]*framework.Status
		wantMessage string
	}{
		{
			name:     "no affinity anywhere: PreFilter skips and every node passes",
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			existing: []*v1.Pod{st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()},
		},
		{
			name:     "required affinity is satisfied in the whole zone of a matching pod",
			pod:      st.MakePod().Name("p").PodAffinity(dbInZoneA).Obj(),
			existing: []*v1.Pod{st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()},
			want: map[string]*framework.Status{
				"n3": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "required affinity ignores pods in other namespaces by default",
			pod:  st.MakePod().Name("p").PodAffinity(dbInZoneA).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Namespace("ns-a").Label("app", "db").Node("n1").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n3": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
			wantMessage: "0/4 nodes are available: 4 node(s) didn't match pod affinity rules.",
		},
		{
			name: "required affinity with an explicit namespaces list",
			pod:  st.MakePod().Name("p").PodAffinity(withNamespaces(dbInZoneA, "ns-a")).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Namespace("ns-a").Label("app", "db").Node("n3").Obj(),
				st.MakePod().Name("db2").Label("app", "db").Node("n1").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "required affinity with a namespace selector",
			pod:  st.MakePod().Name("p").PodAffinity(withNamespaceSelector(dbInZoneA, teamA)).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Namespace("ns-b").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db2").Namespace("ns-a").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "a namespace selector that matches label-less namespaces selects by label, not everything",
			pod: st.MakePod().Name("p").PodAffinity(withNamespaceSelector(dbInZoneA, &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}},
			})).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Namespace("ns-a").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db2").Namespace("ns-b").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "an empty namespace selector selects every namespace",
			pod:  st.MakePod().Name("p").PodAffinity(withNamespaceSelector(dbInZoneA, &metav1.LabelSelector{})).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Namespace("elsewhere").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "the first pod of a self-affine group may go anywhere with the topology key",
			pod:  st.MakePod().Name("p").Label("app", "db").PodAffinity(dbInZoneA).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("web").Label("app", "web").Node("n1").Obj(),
			},
			want: map[string]*framework.Status{
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "a self-affine pod follows its group once it exists",
			pod:  st.MakePod().Name("p").Label("app", "db").PodAffinity(dbInZoneA).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n2": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "all affinity terms must be met by one pod",
			pod: st.MakePod().Name("p").
				PodAffinity(st.PodAffinityTerm("app", "db", hostnameKey)).
				PodAffinity(st.PodAffinityTerm("tier", "backend", hostnameKey)).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("be").Label("tier", "backend").Node("n1").Obj(),
				st.MakePod().Name("both").Label("app", "db").Label("tier", "backend").Node("n2").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n3": unresolvable(ErrReasonAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			name: "required anti-affinity keeps the pod out of the zone of a matching pod",
			pod:  st.MakePod().Name("p").PodAntiAffinity(dbInZoneA).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
				"n2": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "the unschedulable message counts each reason",
			pod:  st.MakePod().Name("p").Label("app", "web").PodAntiAffinity(st.PodAffinityTerm("app", "db", hostnameKey)).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db1").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db2").Label("app", "db").Node("n2").Obj(),
				st.MakePod().Name("e3").Node("n3").PodAntiAffinity(web).Obj(),
				st.MakePod().Name("e4").Node("n4").PodAntiAffinity(st.PodAffinityTerm("app", "web", hostnameKey)).Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
				"n2": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
				"n3": unschedulable(ErrReasonExistingAntiAffinityRulesNotMatch),
				"n4": unschedulable(ErrReasonExistingAntiAffinityRulesNotMatch),
			},
			wantMessage: "0/4 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 2 node(s) didn't satisfy existing pods anti-affinity rules.",
		},
		{
			name: "required anti-affinity with NotIn",
			pod:  st.MakePod().Name("p").PodAntiAffinity(exprTerm("app", metav1.LabelSelectorOpNotIn, hostnameKey, "web")).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("web").Label("app", "web").Node("n2").Obj(),
			},
			want: map[string]*framework.Status{
				"n1": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "symmetry: an existing pod's required anti-affinity rejects the incoming pod",
			pod:  st.MakePod().Name("p").Label("app", "db").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e").Node("n3").PodAntiAffinity(dbInZoneA).Obj(),
			},
			want: map[string]*framework.Status{
				"n3": unschedulable(ErrReasonExistingAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "symmetry honours the existing pod's namespace selector against the incoming pod's namespace labels",
			pod:  st.MakePod().Name("p").Namespace("ns-b").Label("app", "db").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e1").Node("n1").PodAntiAffinity(withNamespaceSelector(dbInZoneA, teamA)).Obj(),
				st.MakePod().Name("e2").Node("n3").PodAntiAffinity(withNamespaceSelector(dbInZoneA,
					&metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}})).Obj(),
			},
			want: map[string]*framework.Status{
				"n3": unschedulable(ErrReasonExistingAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "symmetry does not look at existing pods' preferred terms",
			pod:  st.MakePod().Name("p").Label("app", "db").Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("e").Node("n3").PreferredPodAntiAffinity(100, dbInZoneA).Obj(),
			},
		},
		{
			name: "affinity, anti-affinity and symmetry together",
			pod: st.MakePod().Name("p").Label("app", "web").
				PodAffinity(st.PodAffinityTerm("app", "db", zoneKey)).
				PodAntiAffinity(st.PodAffinityTerm("app", "web", hostnameKey)).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("db3").Label("app", "db").Node("n3").Obj(),
				st.MakePod().Name("web").Label("app", "web").Node("n2").Obj(),
				st.MakePod().Name("cache").Node("n3").PodAntiAffinity(st.PodAffinityTerm("app", "web", zoneKey)).Obj(),
			},
			want: map[string]*framework.Status{
				"n2": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
				"n3": unschedulable(ErrReasonExistingAntiAffinityRulesNotMatch),
				"n4": unresolvable(ErrReasonAffinityRulesNotMatch),
			},
		},
		{
			// The API server merges matchLabelKeys into the selector when it
			// stores the pod; the scheduler reads the merged selector.
			name: "matchLabelKeys as merged by the API server",
			pod: st.MakePod().Name("p").Label("app", "web").Label("version", "v2").PodAntiAffinity(v1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"app": "web"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2"}}},
				},
				MatchLabelKeys: []string{"version"},
				TopologyKey:    hostnameKey,
			}).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("v1").Label("app", "web").Label("version", "v1").Node("n1").Obj(),
				st.MakePod().Name("v2").Label("app", "web").Label("version", "v2").Node("n2").Obj(),
			},
			want: map[string]*framework.Status{
				"n2": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "mismatchLabelKeys as merged by the API server",
			pod: st.MakePod().Name("p").Label("tenant", "t1").PodAntiAffinity(v1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tenant", Operator: metav1.LabelSelectorOpExists},
						{Key: "tenant", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"t1"}},
					},
				},
				MismatchLabelKeys: []string{"tenant"},
				TopologyKey:       zoneKey,
			}).Obj(),
			existing: []*v1.Pod{
				st.MakePod().Name("t1").Label("tenant", "t1").Node("n1").Obj(),
				st.MakePod().Name("t2").Label("tenant", "t2").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{
				"n3": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "terminating pods still count",
			pod:  st.MakePod().Name("p").PodAntiAffinity(st.PodAffinityTerm("app", "db", hostnameKey)).Obj(),
			existing: []*v1.Pod{
				func() *v1.Pod {
					p := st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()
					p.DeletionTimestamp = &metav1.Time{}
					return p
				}(),
			},
			want: map[string]*framework.Status{
				"n1": unschedulable(ErrReasonAntiAffinityRulesNotMatch),
			},
		},
		{
			name: "a selector that cannot be parsed is unresolvable",
			pod: st.MakePod().Name("p").PodAffinity(v1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}},
				TopologyKey:   zoneKey,
			}).Obj(),
			want: map[string]*framework.Status{
				"n1": nil, "n2": nil, "n3": nil, "n4": nil, // filled below from the PreFilter status
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.existing, zonedNodes())
			fwk := newFramework(t, snapshot, nil, namespaces...)
			res := st.RunCycle(context.Background(), fwk, snapshot, tt.pod)
			if res.Err != nil {
				t.Fatalf("cycle failed: %v", res.Err)
			}
			want := map[string]*framework.Status{"n1": nil, "n2": nil, "n3": nil, "n4": nil}
			for n, s := range tt.want {
				want[n] = s
			}
			if !res.PreFilter.IsSuccess() {
				// PreFilter rejections apply to every node.
				if res.PreFilter.Code() != framework.UnschedulableAndUnresolvable || res.PreFilter.Plugin() != Name {
					t.Fatalf("PreFilter status = %v (%s)", res.PreFilter.Code(), res.PreFilter.Message())
				}
				for n := range want {
					want[n] = res.PreFilter
				}
			}
			if diff := cmp.Diff(want, res.Filter); diff != "" {
				t.Errorf("filter verdicts (-want +got):\n%s", diff)
			}
			if tt.wantMessage != "" && res.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", res.Message, tt.wantMessage)
			}
		})
	}
}

// TestPreFilterExtensions checks that AddPod and RemovePod keep the
// PreFilter counts exact, which preemption and nominated pods rely on, and
// that a cloned state is independent of the original.
func TestPreFilterExtensions(t *testing.T) {
	nodes := zonedNodes()
	incoming := st.MakePod().Name("p").Label("app", "web").
		PodAffinity(st.PodAffinityTerm("app", "db", zoneKey)).
		PodAntiAffinity(st.PodAffinityTerm("app", "web", hostnameKey)).Obj()
	db := st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()
	web := st.MakePod().Name("web").Label("app", "web").Node("n2").Obj()
	hater := st.MakePod().Name("hater").Node("n3").PodAntiAffinity(st.PodAffinityTerm("app", "web", zoneKey)).Obj()
	snapshot := st.NewSnapshot([]*v1.Pod{db}, nodes)
	fwk := newFramework(t, snapshot, nil)
	ctx := context.Background()
	state := framework.NewCycleState()
	if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, incoming); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	verdicts := func(state *framework.CycleState) map[string]framework.Code {
		out := map[string]framework.Code{}
		for _, n := range nodes {
			ni, _ := snapshot.Get(n.Name)
			out[n.Name] = fwk.RunFilterPlugins(ctx, state, incoming, ni).Code()
		}
		return out
	}
	pass, fail, unres := framework.Success, framework.Unschedulable, framework.UnschedulableAndUnresolvable
	before := map[string]framework.Code{"n1": pass, "n2": pass, "n3": unres, "n4": unres}
	if diff := cmp.Diff(before, verdicts(state)); diff != "" {
		t.Fatalf("before (-want +got):\n%s", diff)
	}

	steps := []struct {
		name   string
		add    bool
		pod    *v1.Pod
		node   string
		verdic map[string]framework.Code
	}{
		{name: "add a pod the incoming pod avoids", add: true, pod: web, node: "n2",
			verdic: map[string]framework.Code{"n1": pass, "n2": fail, "n3": unres, "n4": unres}},
		{name: "add a db pod in zone b", add: true, pod: st.MakePod().Name("db3").Label("app", "db").Node("n3").Obj(), node: "n3",
			verdic: map[string]framework.Code{"n1": pass, "n2": fail, "n3": pass, "n4": unres}},
		{name: "add a pod whose anti-affinity rejects the incoming pod", add: true, pod: hater, node: "n3",
			verdic: map[string]framework.Code{"n1": pass, "n2": fail, "n3": fail, "n4": unres}},
		{name: "remove it again", pod: hater, node: "n3",
			verdic: map[string]framework.Code{"n1": pass, "n2": fail, "n3": pass, "n4": unres}},
		{name: "remove the avoided pod", pod: web, node: "n2",
			verdic: map[string]framework.Code{"n1": pass, "n2": pass, "n3": pass, "n4": unres}},
		{name: "remove the only db pod of zone a", pod: db, node: "n1",
			verdic: map[string]framework.Code{"n1": unres, "n2": unres, "n3": pass, "n4": unres}},
	}
	clone := state.Clone()
	for _, step := range steps {
		ni, _ := snapshot.Get(step.node)
		pi, _ := framework.NewPodInfo(step.pod)
		var s *framework.Status
		if step.add {
			s = fwk.RunPreFilterExtensionAddPod(ctx, clone, incoming, pi, ni)
		} else {
			s = fwk.RunPreFilterExtensionRemovePod(ctx, clone, incoming, pi, ni)
		}
		if !s.IsSuccess() {
			t.Fatalf("%s: %v", step.name, s)
		}
		if diff := cmp.Diff(step.verdic, verdicts(clone)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
	if diff := cmp.Diff(before, verdicts(state)); diff != "" {
		t.Errorf("the original state changed with its clone (-want +got):\n%s", diff)
	}
}
