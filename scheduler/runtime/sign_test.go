package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// signingFilter is a Filter plugin that signs with fixed fragments or status.
type signingFilter struct {
	filterOnly
	fragments []framework.SignFragment
	status    *framework.Status
}

func (p *signingFilter) SignPod(context.Context, *v1.Pod) ([]framework.SignFragment, *framework.Status) {
	return p.fragments, p.status
}

// TestSignPodInstances checks which instances sign pods, as upstream's
// computeBatchablePlugins decides, and how fragments combine.
func TestSignPodInstances(t *testing.T) {
	policy, err := extender.NewPolicy(extender.LoopbackURLPrefixes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	a := &signingFilter{filterOnly: filterOnly{name: "A"}, fragments: []framework.SignFragment{{Key: "k", Value: "a"}, {Key: "a", Value: 1}}}
	b := &signingFilter{filterOnly: filterOnly{name: "B"}, fragments: []framework.SignFragment{{Key: "k", Value: "b"}}}
	refuses := &signingFilter{filterOnly: filterOnly{name: "Refuses"}, status: framework.NewStatus(framework.Unschedulable, "not signable")}
	fails := &signingFilter{filterOnly: filterOnly{name: "Fails"}, status: framework.AsStatus(errors.New("boom"))}
	unsigned := &filterOnly{name: "Unsigned"}
	registry := baseRegistry(map[string]framework.Plugin{"A": a, "B": b, "Refuses": refuses, "Fails": fails, "Unsigned": unsigned})
	tests := []struct {
		name    string
		plugins []string
		opts    []Option
		want    string
	}{
		{name: "fragments by key, later plugins winning, keys sorted", plugins: []string{"A", "B"}, want: `{"a":1,"k":"b","v1.Pod.Spec.SchedulerName":"s"}`},
		{name: "no plugin to sign: the schedulerName alone", want: `{"v1.Pod.Spec.SchedulerName":"s"}`},
		{name: "a plugin refuses the pod", plugins: []string{"A", "Refuses"}},
		{name: "a plugin fails", plugins: []string{"Fails", "A"}},
		{name: "a plugin that cannot sign disables signing", plugins: []string{"A", "Unsigned"}},
		{
			name: "extenders disable signing", plugins: []string{"A"},
			opts: []Option{WithExtenderPolicy(policy), WithExtenders([]configv1.Extender{{URLPrefix: "http://127.0.0.1:1/x", FilterVerb: "filter"}})},
		},
		{name: "batching off", plugins: []string{"A"}, opts: []Option{WithOpportunisticBatching(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps configv1.PluginSet
			for _, n := range tt.plugins {
				ps.Enabled = append(ps.Enabled, configv1.Plugin{Name: n})
			}
			fw, err := newTestFramework(t.Context(), registry, &configv1.Plugins{MultiPoint: ps}, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			pod := makePod("p")
			pod.Spec.SchedulerName = "s"
			if got := string(fw.SignPod(t.Context(), pod)); got != tt.want {
				t.Errorf("SignPod = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSignPodMetrics: signing is observed at the Sign extension point,
// always as Success like upstream's (whose status there is never set),
// also when the instance cannot sign, and per plugin with the plugin's
// own code. Plugins that refuse pods sign first, so that no other plugin
// signs a pod one of them refuses. With batching off nothing signs, as
// upstream's queue.
func TestSignPodMetrics(t *testing.T) {
	a := &signingFilter{filterOnly: filterOnly{name: "A"}}
	refuses := &signingFilter{filterOnly: filterOnly{name: "Refuses"}, status: framework.NewStatus(framework.Unschedulable, "not signable")}
	unsigned := &filterOnly{name: "Unsigned"}
	spread := &signingFilter{filterOnly: filterOnly{name: podTopologySpread}, status: framework.NewStatus(framework.Unschedulable, "not signable")}
	registry := baseRegistry(map[string]framework.Plugin{"A": a, "Refuses": refuses, "Unsigned": unsigned, podTopologySpread: spread})
	tests := []struct {
		name    string
		plugins []string
		opts    []Option
		want    []string
	}{
		{
			name: "a plugin refuses", plugins: []string{"A", "Refuses"},
			want: []string{
				"scheduler_framework_extension_point_duration_seconds{extension_point=Sign,profile=test,status=Success}",
				"scheduler_plugin_execution_duration_seconds{extension_point=Sign,plugin=A,status=Success}",
				"scheduler_plugin_execution_duration_seconds{extension_point=Sign,plugin=Refuses,status=Unschedulable}",
			},
		},
		{
			name: "PodTopologySpread signs first and its refusal stops signing", plugins: []string{"A", podTopologySpread},
			want: []string{
				"scheduler_framework_extension_point_duration_seconds{extension_point=Sign,profile=test,status=Success}",
				"scheduler_plugin_execution_duration_seconds{extension_point=Sign,plugin=PodTopologySpread,status=Unschedulable}",
			},
		},
		{
			name: "the instance cannot sign", plugins: []string{"A", "Unsigned"},
			want: []string{"scheduler_framework_extension_point_duration_seconds{extension_point=Sign,profile=test,status=Success}"},
		},
		{name: "batching off", plugins: []string{"A"}, opts: []Option{WithOpportunisticBatching(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			var ps configv1.PluginSet
			for _, n := range tt.plugins {
				ps.Enabled = append(ps.Enabled, configv1.Plugin{Name: n})
			}
			fw, err := newTestFramework(t.Context(), registry, &configv1.Plugins{MultiPoint: ps}, append(tt.opts, WithMetrics(m))...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = fw.Close() }()
			if sig := fw.SignPod(t.Context(), makePod("p")); sig != nil {
				t.Fatalf("SignPod = %q, want nil", sig)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range families {
				for _, m := range mf.GetMetric() {
					var labels []string
					for _, l := range m.GetLabel() {
						labels = append(labels, l.GetName()+"="+l.GetValue())
					}
					if slices.Contains(labels, "extension_point=Sign") {
						got = append(got, mf.GetName()+"{"+strings.Join(labels, ",")+"}")
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sign series (-want +got):\n%s", diff)
			}
		})
	}
}
