package interpodaffinity

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const (
	zoneKey     = v1.LabelTopologyZone
	hostnameKey = v1.LabelHostname
)

// newFramework builds a real framework instance running only this plugin
// (weight 1, so total scores are the plugin's normalized scores). The
// namespaces are put straight into the informer's store: the plugin only
// reads them through the lister.
func newFramework(tb testing.TB, snapshot framework.SharedLister, args *configv1.InterPodAffinityArgs, namespaces ...*v1.Namespace) framework.Framework {
	tb.Helper()
	objs := make([]k8sruntime.Object, len(namespaces))
	for i, ns := range namespaces {
		objs[i] = ns
	}
	return st.NewFramework(tb, registryOf(tb), profileWith(args), snapshot, st.Informers(tb, objs...)...)
}

// registryOf holds only this plugin, with its args validation as the
// in-tree registry registers it.
func registryOf(tb testing.TB) runtime.Registry {
	tb.Helper()
	r := registry.New(nil)
	if err := r.Register(Name, New, runtime.ArgsSpec{Validate: func(obj k8sruntime.Object) error { return ValidateArgs(obj.(*configv1.InterPodAffinityArgs)) }}); err != nil {
		tb.Fatal(err)
	}
	return r
}

func profileWith(args *configv1.InterPodAffinityArgs) *configv1.KubeSchedulerProfile {
	return st.WithPluginArgs(st.MultiPointProfile(st.Plugin(queuesort.Name, 0), st.Plugin(Name, 1), st.Plugin(defaultbinder.Name, 0)), Name, args)
}

func namespace(name string, lbls map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    *configv1.InterPodAffinityArgs
		wantErr string
	}{
		{name: "defaults"},
		{name: "weight 0 is allowed", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](0)}},
		{name: "weight 100 is allowed", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](100)}},
		{name: "weight above 100", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](101)},
			wantErr: "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"},
		{name: "negative weight", args: &configv1.InterPodAffinityArgs{HardPodAffinityWeight: ptr.To[int32](-1)},
			wantErr: "hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fwk, err := st.BuildFramework(registryOf(t), profileWith(tt.args), st.NewSnapshot(nil, nil))
			if err == nil {
				_ = fwk.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("error = %q, want one containing %q", got, tt.wantErr)
			}
		})
	}

	// Without args the factory applies upstream's defaults itself.
	pl, err := New(context.Background(), nil, newFramework(t, st.NewSnapshot(nil, nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	ipa := pl.(*interPodAffinity)
	if ipa.hardPodAffinityWeight != 1 || ipa.ignorePreferredTermsOfExistingPods {
		t.Errorf("defaults: hardPodAffinityWeight=%d ignorePreferredTermsOfExistingPods=%v, want 1 and false", ipa.hardPodAffinityWeight, ipa.ignorePreferredTermsOfExistingPods)
	}
}

func TestEventsToRegister(t *testing.T) {
	fwk := newFramework(t, st.NewSnapshot(nil, nil), nil)
	got := st.RegisteredEvents(t, fwk, Name)
	want := []framework.ClusterEvent{
		{Resource: framework.AssignedPod, ActionType: framework.Add | framework.UpdatePodLabel | framework.Delete},
		{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel},
		{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestIsSchedulableAfterPodChange(t *testing.T) {
	term := st.PodAffinityTerm("app", "db", zoneKey)
	withAffinity := st.MakePod().Name("p").PodAffinity(term).Obj()
	withAnti := st.MakePod().Name("p").Label("app", "web").PodAntiAffinity(term).Obj()
	// Two anti-affinity terms: an existing pod matching either one rejects a domain.
	withTwoAnti := st.MakePod().Name("p").Label("app", "web").PodAntiAffinity(term).PodAntiAffinity(st.PodAffinityTerm("tier", "cache", zoneKey)).Obj()
	db := st.MakePod().Name("db").Label("app", "db").Node("n1").Obj()
	other := st.MakePod().Name("x").Label("app", "other").Node("n1").Obj()
	assigned := func(a framework.ActionType) framework.ClusterEvent {
		return framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: a}
	}
	targetLabel := framework.ClusterEvent{Resource: framework.TargetPod, ActionType: framework.UpdatePodLabel}
	tests := []struct {
		name           string
		pod            *v1.Pod
		event          framework.ClusterEvent
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{name: "added pod matches affinity", pod: withAffinity, event: assigned(framework.Add), newObj: db, want: framework.Queue},
		{name: "added pod does not match affinity", pod: withAffinity, event: assigned(framework.Add), newObj: other, want: framework.QueueSkip},
		{name: "added pod is not placed", pod: withAffinity, event: assigned(framework.Add), newObj: st.MakePod().Name("db").Label("app", "db").Obj(), want: framework.QueueSkip},
		{name: "nominated pod counts as placed", pod: withAffinity, event: assigned(framework.Add), newObj: st.MakePod().Name("db").Label("app", "db").NominatedNodeName("n1").Obj(), want: framework.Queue},
		{name: "label update starts matching affinity", pod: withAffinity, event: assigned(framework.UpdatePodLabel), oldObj: other, newObj: st.MakePod().Name("x").Label("app", "db").Node("n1").Obj(), want: framework.Queue},
		{name: "label update stops matching anti-affinity", pod: withAnti, event: assigned(framework.UpdatePodLabel), oldObj: db, newObj: st.MakePod().Name("db").Label("app", "x").Node("n1").Obj(), want: framework.Queue},
		// Upstream 1.37: matching any anti-affinity term counts (1.36 required all, and skipped these).
		{name: "label update stops matching one of two anti-affinity terms", pod: withTwoAnti, event: assigned(framework.UpdatePodLabel), oldObj: db, newObj: st.MakePod().Name("db").Label("app", "x").Node("n1").Obj(), want: framework.Queue},
		{name: "deleted pod matched one of two anti-affinity terms", pod: withTwoAnti, event: assigned(framework.Delete), oldObj: db, want: framework.Queue},
		{name: "deleted pod's anti-affinity terms: the pod matched one of two", pod: st.MakePod().Name("p").Label("app", "db").Obj(), event: assigned(framework.Delete),
			oldObj: st.MakePod().Name("e").Node("n1").PodAntiAffinity(term).PodAntiAffinity(st.PodAffinityTerm("tier", "cache", zoneKey)).Obj(), want: framework.Queue},
		{name: "unrelated label update", pod: withAnti, event: assigned(framework.UpdatePodLabel), oldObj: other, newObj: st.MakePod().Name("x").Label("app", "y").Node("n1").Obj(), want: framework.QueueSkip},
		{name: "deleted pod matched anti-affinity", pod: withAnti, event: assigned(framework.Delete), oldObj: db, want: framework.Queue},
		{name: "deleted pod's anti-affinity matched the pod", pod: st.MakePod().Name("p").Label("app", "db").Obj(), event: assigned(framework.Delete),
			oldObj: st.MakePod().Name("e").Node("n1").PodAntiAffinity(term).Obj(), want: framework.Queue},
		{name: "deleted unrelated pod", pod: withAnti, event: assigned(framework.Delete), oldObj: other, want: framework.QueueSkip},
		{name: "own label update", pod: withAffinity, event: targetLabel, oldObj: withAffinity, newObj: st.MakePod().Name("p").Label("a", "b").PodAffinity(term).Obj(), want: framework.Queue},
		// Upstream 1.37 registers AssignedPod and TargetPod events only.
		{name: "another pending pod's labels are not registered", pod: withAnti, event: framework.ClusterEvent{Resource: framework.UnscheduledPod, ActionType: framework.UpdatePodLabel},
			oldObj: st.MakePod().Name("db").Label("app", "db").NominatedNodeName("n1").Obj(), newObj: st.MakePod().Name("db").Label("app", "x").NominatedNodeName("n1").Obj(), want: framework.QueueSkip},
	}
	fwk := newFramework(t, st.NewSnapshot(nil, nil), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.QueueingHint(t.Context(), fwk, Name, tt.event, tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	affinity := st.MakePod().Name("p").PodAffinity(st.PodAffinityTerm("app", "db", zoneKey)).Obj()
	anti := st.MakePod().Name("p").PodAntiAffinity(st.PodAffinityTerm("app", "db", zoneKey)).Obj()
	plain := st.MakeNode().Name("n").Obj()
	inA := st.MakeNode().Name("n").Label(zoneKey, "a").Obj()
	inB := st.MakeNode().Name("n").Label(zoneKey, "b").Obj()
	tests := []struct {
		name           string
		pod            *v1.Pod
		oldObj, newObj any
		want           framework.QueueingHint
	}{
		{name: "affinity: added node with key", pod: affinity, newObj: inA, want: framework.Queue},
		{name: "affinity: added node without key", pod: affinity, newObj: plain, want: framework.QueueSkip},
		{name: "affinity: node gains key", pod: affinity, oldObj: plain, newObj: inA, want: framework.Queue},
		{name: "affinity: node changes domain", pod: affinity, oldObj: inA, newObj: inB, want: framework.Queue},
		{name: "affinity: node loses key", pod: affinity, oldObj: inA, newObj: plain, want: framework.QueueSkip},
		{name: "anti-affinity: any added node", pod: anti, newObj: plain, want: framework.Queue},
		{name: "anti-affinity: node loses key", pod: anti, oldObj: inA, newObj: plain, want: framework.Queue},
		{name: "anti-affinity: node changes domain", pod: anti, oldObj: inA, newObj: inB, want: framework.Queue},
		{name: "anti-affinity: node gains key", pod: anti, oldObj: plain, newObj: inA, want: framework.QueueSkip},
		{name: "no terms", pod: st.MakePod().Name("p").Obj(), newObj: inA, want: framework.QueueSkip},
	}
	pl := &interPodAffinity{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterNodeChange(klog.Background(), tt.pod, tt.oldObj, tt.newObj)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}
