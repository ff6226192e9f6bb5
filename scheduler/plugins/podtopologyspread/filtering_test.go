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
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func unschedulable() *framework.Status {
	return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch).WithPlugin(Name)
}

func missingLabel() *framework.Status {
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch).WithPlugin(Name)
}

// node is a node in zone (none if empty) labelled with its hostname.
func node(name, zone string) *st.NodeWrapper {
	n := st.MakeNode().Name(name).Label(hostnameKey, name)
	if zone != "" {
		n.Label(zoneKey, zone)
	}
	return n
}

// pods returns n pods labelled app=value on nodeName.
func pods(prefix, value, nodeName string, n int) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; i < n; i++ {
		out = append(out, st.MakePod().Name(prefix+string(rune('a'+i))).Label("app", value).Node(nodeName).Obj())
	}
	return out
}

func concat(lists ...[]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func withConstraint(p *v1.Pod, mutate func(*v1.TopologySpreadConstraint)) *v1.Pod {
	mutate(&p.Spec.TopologySpreadConstraints[len(p.Spec.TopologySpreadConstraints)-1])
	return p
}

// ownedBy makes the controller named name of kind the pod's controller.
func ownedBy(p *v1.Pod, apiVersion, kind, name string) *v1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)}}
	return p
}

// webInZones is a pod app=web spread over zones with maxSkew 1.
func webInZones() *st.PodWrapper {
	return st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web")
}

func TestFilter(t *testing.T) {
	twoZones := []*v1.Node{node("n1", "a").Obj(), node("n2", "a").Obj(), node("n3", "b").Obj(), node("n4", "b").Obj()}
	tests := []struct {
		name     string
		pod      *v1.Pod
		nodes    []*v1.Node
		existing []*v1.Pod
		args     *configv1.PodTopologySpreadArgs
		objs     []k8sruntime.Object
		// want lists the rejected nodes; the others must pass.
		want        map[string]*framework.Status
		wantMessage string
	}{
		{
			name:     "no constraints: every node passes",
			pod:      st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes:    twoZones,
			existing: pods("w", "web", "n1", 3),
		},
		{
			name:     "the zone that would exceed maxSkew is refused",
			pod:      webInZones().Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 1), pods("x", "web", "n2", 1), pods("y", "web", "n3", 1)),
			want:     map[string]*framework.Status{"n1": unschedulable(), "n2": unschedulable()},
		},
		{
			name:     "within maxSkew every zone passes",
			pod:      withConstraint(webInZones().Obj(), func(c *v1.TopologySpreadConstraint) { c.MaxSkew = 2 }),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 2), pods("y", "web", "n3", 1)),
		},
		{
			name:     "a pod not matching its own selector does not count itself",
			pod:      st.MakePod().Name("p").Label("app", "other").SpreadConstraint(1, zoneKey, v1.DoNotSchedule, "app", "web").Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 1)),
		},
		{
			name:  "nodes without the topology key are unresolvable",
			pod:   webInZones().Obj(),
			nodes: []*v1.Node{node("n1", "a").Obj(), node("n2", "").Obj()},
			want:  map[string]*framework.Status{"n2": missingLabel()},
		},
		{
			name:     "only the pod's namespace counts",
			pod:      webInZones().Obj(),
			nodes:    twoZones,
			existing: []*v1.Pod{st.MakePod().Name("w").Namespace("other").Label("app", "web").Node("n1").Obj()},
		},
		{
			name:  "terminating pods do not count",
			pod:   webInZones().Obj(),
			nodes: twoZones,
			existing: func() []*v1.Pod {
				ps := pods("w", "web", "n1", 2)
				for _, p := range ps {
					p.DeletionTimestamp = &metav1.Time{}
				}
				return ps
			}(),
		},
		{
			name:     "minDomains above the number of domains makes the global minimum 0",
			pod:      withConstraint(webInZones().Obj(), func(c *v1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](3) }),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			// 1 + 1 - 0 > 1 in both zones.
			want:        map[string]*framework.Status{"n1": unschedulable(), "n2": unschedulable(), "n3": unschedulable(), "n4": unschedulable()},
			wantMessage: "0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints.",
		},
		{
			name:     "minDomains met uses the real global minimum",
			pod:      withConstraint(webInZones().Obj(), func(c *v1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](2) }),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
		},
		{
			name:  "nodeAffinityPolicy Honor (default) leaves out domains the pod cannot go to",
			pod:   webInZones().NodeSelector(map[string]string{"pool": "x"}).Obj(),
			nodes: []*v1.Node{node("n1", "a").Label("pool", "x").Obj(), node("n3", "b").Label("pool", "x").Obj(), node("n5", "c").Obj()},
			// Zone c (no pool=x) is no domain: the minimum is zone b's 1.
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
		},
		{
			name: "nodeAffinityPolicy Ignore counts every domain",
			pod: withConstraint(webInZones().NodeSelector(map[string]string{"pool": "x"}).Obj(), func(c *v1.TopologySpreadConstraint) {
				c.NodeAffinityPolicy = ptr.To(v1.NodeInclusionPolicyIgnore)
			}),
			nodes:    []*v1.Node{node("n1", "a").Label("pool", "x").Obj(), node("n3", "b").Label("pool", "x").Obj(), node("n5", "c").Obj()},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			// Zone c counts with 0 pods. (NodeAffinity, not this plugin, keeps the pod off n5.)
			want: map[string]*framework.Status{"n1": unschedulable(), "n3": unschedulable()},
		},
		{
			name:     "nodeTaintsPolicy Ignore (default) counts tainted domains",
			pod:      webInZones().Obj(),
			nodes:    []*v1.Node{node("n1", "a").Obj(), node("n3", "b").Obj(), node("n5", "c").Taint("k", "v", v1.TaintEffectNoSchedule).Obj()},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]*framework.Status{"n1": unschedulable(), "n3": unschedulable()},
		},
		{
			name: "nodeTaintsPolicy Honor leaves out domains with untolerated taints",
			pod: withConstraint(webInZones().Obj(), func(c *v1.TopologySpreadConstraint) {
				c.NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
			}),
			nodes:    []*v1.Node{node("n1", "a").Obj(), node("n3", "b").Obj(), node("n5", "c").Taint("k", "v", v1.TaintEffectNoSchedule).Obj()},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
		},
		{
			name: "nodeTaintsPolicy Honor keeps tolerated and PreferNoSchedule taints",
			pod: withConstraint(webInZones().Toleration("k", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).Obj(), func(c *v1.TopologySpreadConstraint) {
				c.NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
			}),
			nodes: []*v1.Node{
				node("n1", "a").Obj(), node("n3", "b").Obj(),
				node("n5", "c").Taint("k", "v", v1.TaintEffectNoSchedule).Obj(),
				node("n6", "d").Taint("soft", "v", v1.TaintEffectPreferNoSchedule).Obj(),
			},
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]*framework.Status{"n1": unschedulable(), "n3": unschedulable()},
		},
		{
			name: "matchLabelKeys narrow the selector to the pod's own values",
			pod: withConstraint(webInZones().Label("rev", "2").Obj(), func(c *v1.TopologySpreadConstraint) {
				c.MatchLabelKeys = []string{"rev"}
			}),
			nodes: twoZones,
			existing: []*v1.Pod{
				st.MakePod().Name("old1").Label("app", "web").Label("rev", "1").Node("n1").Obj(),
				st.MakePod().Name("old2").Label("app", "web").Label("rev", "1").Node("n2").Obj(),
				st.MakePod().Name("new").Label("app", "web").Label("rev", "2").Node("n3").Obj(),
			},
			want: map[string]*framework.Status{"n3": unschedulable(), "n4": unschedulable()},
		},
		{
			name: "every constraint must hold",
			pod: webInZones().
				SpreadConstraint(1, hostnameKey, v1.DoNotSchedule, "app", "web").Obj(),
			nodes:    twoZones,
			existing: concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)),
			want:     map[string]*framework.Status{"n1": unschedulable(), "n3": unschedulable()},
		},
		{
			name:     "ScheduleAnyway constraints never filter",
			pod:      st.MakePod().Name("p").Label("app", "web").SpreadConstraint(1, zoneKey, v1.ScheduleAnyway, "app", "web").Obj(),
			nodes:    []*v1.Node{node("n1", "a").Obj(), node("n2", "").Obj()},
			existing: pods("w", "web", "n1", 5),
		},
		{
			name:  "List default constraints apply to pods of a Service",
			pod:   st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes: twoZones,
			args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
			}},
			objs: []k8sruntime.Object{&v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:       v1.ServiceSpec{Selector: map[string]string{"app": "web"}},
			}},
			existing: pods("w", "web", "n1", 1),
			want:     map[string]*framework.Status{"n1": unschedulable(), "n2": unschedulable()},
		},
		{
			name:  "List default constraints apply to pods of a ReplicaSet",
			pod:   ownedBy(st.MakePod().Name("p").Label("app", "web").Obj(), "apps/v1", "ReplicaSet", "rs"),
			nodes: twoZones,
			args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
			}},
			objs: []k8sruntime.Object{&appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default"},
				Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			}},
			existing: pods("w", "web", "n3", 1),
			want:     map[string]*framework.Status{"n3": unschedulable(), "n4": unschedulable()},
		},
		{
			name:  "List default constraints do not apply to pods of no group",
			pod:   st.MakePod().Name("p").Label("app", "web").Obj(),
			nodes: twoZones,
			args: &configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting, DefaultConstraints: []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule},
			}},
			existing: pods("w", "web", "n1", 3),
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
			want := map[string]*framework.Status{}
			for _, n := range tt.nodes {
				want[n.Name] = nil
			}
			for n, s := range tt.want {
				want[n] = s
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

// TestPreFilterExtensions checks that AddPod and RemovePod keep the counts
// and the global minimum exact, and that clones are independent.
func TestPreFilterExtensions(t *testing.T) {
	nodes := []*v1.Node{node("n1", "a").Obj(), node("n2", "a").Obj(), node("n3", "b").Obj(), node("n5", "c").Label("pool", "y").Obj()}
	// Zone c is no domain for this pod (node affinity, policy Honor).
	incoming := webInZones().NodeAffinityNotIn("pool", "y").Obj()
	snapshot := st.NewSnapshot(concat(pods("w", "web", "n1", 1), pods("y", "web", "n3", 1)), nodes)
	fwk := newFramework(t, snapshot, nil)
	ctx := context.Background()
	state := framework.NewCycleState()
	if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, incoming); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	verdicts := func(state *framework.CycleState) map[string]framework.Code {
		out := map[string]framework.Code{}
		for _, n := range nodes[:3] {
			ni, _ := snapshot.Get(n.Name)
			out[n.Name] = fwk.RunFilterPlugins(ctx, state, incoming, ni).Code()
		}
		return out
	}
	pass, fail := framework.Success, framework.Unschedulable
	before := map[string]framework.Code{"n1": pass, "n2": pass, "n3": pass}
	if diff := cmp.Diff(before, verdicts(state)); diff != "" {
		t.Fatalf("before (-want +got):\n%s", diff)
	}
	web := func(name string) *v1.Pod { return st.MakePod().Name(name).Label("app", "web").Obj() }
	steps := []struct {
		name string
		add  bool
		pod  *v1.Pod
		node string
		want map[string]framework.Code
	}{
		{name: "add to zone a", add: true, pod: web("x1"), node: "n2", want: map[string]framework.Code{"n1": fail, "n2": fail, "n3": pass}},
		{name: "add to zone c, which is no domain", add: true, pod: web("x2"), node: "n5", want: map[string]framework.Code{"n1": fail, "n2": fail, "n3": pass}},
		{name: "add a pod of another namespace", add: true, pod: st.MakePod().Name("x3").Namespace("o").Label("app", "web").Obj(), node: "n3",
			want: map[string]framework.Code{"n1": fail, "n2": fail, "n3": pass}},
		{name: "add an unrelated pod", add: true, pod: st.MakePod().Name("x4").Label("app", "db").Obj(), node: "n3",
			want: map[string]framework.Code{"n1": fail, "n2": fail, "n3": pass}},
		{name: "add to zone b", add: true, pod: web("x5"), node: "n3", want: map[string]framework.Code{"n1": pass, "n2": pass, "n3": pass}},
		{name: "remove from zone a", pod: web("wa"), node: "n1", want: map[string]framework.Code{"n1": pass, "n2": pass, "n3": fail}},
		{name: "remove again", pod: web("x1"), node: "n2", want: map[string]framework.Code{"n1": pass, "n2": pass, "n3": fail}},
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
		if diff := cmp.Diff(step.want, verdicts(clone)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
	if diff := cmp.Diff(before, verdicts(state)); diff != "" {
		t.Errorf("the original state changed with its clone (-want +got):\n%s", diff)
	}
}

// TestPreFilterExtensionsNewDomain checks that a domain first seen through
// AddPod counts towards minDomains, as upstream's map entry does.
func TestPreFilterExtensionsNewDomain(t *testing.T) {
	nodes := []*v1.Node{node("n1", "a").Obj(), node("n3", "b").Obj()}
	incoming := withConstraint(webInZones().Obj(), func(c *v1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](2) })
	// Only n1 is in the snapshot's node list at PreFilter time.
	pre := st.NewSnapshot(pods("w", "web", "n1", 1), nodes[:1])
	fwk := newFramework(t, pre, nil)
	ctx := context.Background()
	state := framework.NewCycleState()
	if _, s, _ := fwk.RunPreFilterPlugins(ctx, state, incoming); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	n1, _ := pre.Get("n1")
	// One domain < minDomains 2: the minimum is 0 and 1 + 1 - 0 > 1.
	if got := fwk.RunFilterPlugins(ctx, state, incoming, n1).Code(); got != framework.Unschedulable {
		t.Fatalf("before: %v, want Unschedulable", got)
	}
	n3 := framework.NewNodeInfo()
	n3.SetNode(nodes[1])
	pi, _ := framework.NewPodInfo(st.MakePod().Name("x").Label("app", "web").Obj())
	if s := fwk.RunPreFilterExtensionAddPod(ctx, state, incoming, pi, n3); !s.IsSuccess() {
		t.Fatal(s)
	}
	// Two domains with 1 each: 1 + 1 - 1 <= 1.
	if got := fwk.RunFilterPlugins(ctx, state, incoming, n1).Code(); got != framework.Success {
		t.Errorf("after AddPod in a new domain: %v, want Success", got)
	}
}
