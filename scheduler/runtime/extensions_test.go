package runtime

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// countState counts pods added through PreFilterExtensions; its Clone is a
// real copy because AddPod/RemovePod mutate it.
type countState struct{ n int }

func (s *countState) Clone() framework.StateData { return &countState{n: s.n} }

// extPlugin keeps a pod count in CycleState and rejects nodes where the
// count would exceed max.
type extPlugin struct {
	name string
	max  int
	skip bool
}

func (p *extPlugin) Name() string { return p.name }
func (p *extPlugin) PreFilter(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if p.skip {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(framework.StateKey(p.name), &countState{})
	return nil, nil
}
func (p *extPlugin) PreFilterExtensions() framework.PreFilterExtensions { return p }
func (p *extPlugin) AddPod(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*countState](state, framework.StateKey(p.name))
	if err != nil {
		return framework.AsStatus(err)
	}
	s.n++
	return nil
}
func (p *extPlugin) RemovePod(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*countState](state, framework.StateKey(p.name))
	if err != nil {
		return framework.AsStatus(err)
	}
	s.n--
	return nil
}
func (p *extPlugin) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*countState](state, framework.StateKey(p.name))
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.n > p.max {
		return framework.NewStatus(framework.Unschedulable, "too many")
	}
	return nil
}

func TestPreFilterExtensions(t *testing.T) {
	extra := map[string]framework.Plugin{"Ext": &extPlugin{name: "Ext", max: 0}, "Skipped": &extPlugin{name: "Skipped", skip: true}}
	fw, err := newTestFramework(t.Context(), baseRegistry(extra), &configv1.Plugins{MultiPoint: enabled("Ext", "Skipped")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	pod := makePod("p")
	state := framework.NewCycleState()
	if _, s, _ := fw.RunPreFilterPlugins(t.Context(), state, pod); !s.IsSuccess() {
		t.Fatal(s)
	}
	other, _ := framework.NewPodInfo(makePod("other"))
	node := makeNode("n")

	// The way preemption uses it: clone, add, filter; the original is untouched.
	clone := state.Clone()
	// "Skipped" has no state: calling its AddPod would fail, so success
	// proves the skipped plugin's extensions were not called.
	if s := fw.RunPreFilterExtensionAddPod(t.Context(), clone, pod, other, node); !s.IsSuccess() {
		t.Fatal(s)
	}
	got := []string{
		fw.RunFilterPlugins(t.Context(), clone, pod, node).Message(),
		fw.RunFilterPlugins(t.Context(), state, pod, node).Message(),
	}
	if s := fw.RunPreFilterExtensionRemovePod(t.Context(), clone, pod, other, node); !s.IsSuccess() {
		t.Fatal(s)
	}
	got = append(got, fw.RunFilterPlugins(t.Context(), clone, pod, node).Message())
	if diff := cmp.Diff([]string{"too many", "", ""}, got); diff != "" {
		t.Errorf("filter messages (-want +got):\n%s", diff)
	}
}

func TestDefaultPluginsOption(t *testing.T) {
	r := baseRegistry(map[string]framework.Plugin{"F1": &filterPlugin{name: "F1"}})
	// No process-wide defaults: an empty profile without the option names no plugins.
	if _, err := NewFramework(t.Context(), r, &configv1.KubeSchedulerProfile{}); err == nil {
		t.Fatal("an empty profile without default plugins was accepted")
	}
	fw, err := NewFramework(t.Context(), r, &configv1.KubeSchedulerProfile{},
		WithDefaultPlugins(&configv1.Plugins{MultiPoint: enabled("Sort", "F1", "Binder")}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	want := &configv1.Plugins{QueueSort: enabled("Sort"), PreFilter: enabled("F1"), Filter: enabled("F1"), Bind: enabled("Binder")}
	if diff := cmp.Diff(want, fw.ListPlugins()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("default-scheduler", fw.ProfileName()); diff != "" {
		t.Errorf("profile name (-want +got):\n%s", diff)
	}
}
