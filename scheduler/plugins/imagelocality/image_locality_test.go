package imagelocality_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/imagelocality"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const mb int64 = 1024 * 1024

func newFramework(tb testing.TB, snapshot *st.Snapshot, opts ...runtime.Option) framework.Framework {
	return st.NewFramework(tb, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(imagelocality.Name, 1)), snapshot, opts...)
}

// node has an image of size MB under "gcr.io/<size>:latest" for each size.
func node(name string, sizes ...int64) *v1.Node {
	n := st.MakeNode().Name(name)
	for _, s := range sizes {
		n.Image(s*mb, fmt.Sprintf("gcr.io/%d:latest", s))
	}
	return n.Obj()
}

func pod(images ...string) *st.PodWrapper {
	p := st.MakePod().Name("p")
	for _, img := range images {
		p.Container(img)
	}
	return p
}

func TestImageLocality(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		nodes []*v1.Node
		want  map[string]int64
	}{
		{
			// node1: 40M/2 spread < 23M → 0; node2: 100*(250M/2-23M)/(2000M-23M) = 5.
			name:  "two images spread on two nodes, the larger wins",
			pod:   pod("gcr.io/40", "gcr.io/250").Obj(),
			nodes: []*v1.Node{node("node1", 40), node("node2", 250)},
			want:  map[string]int64{"node1": 0, "node2": 5},
		},
		{
			name:  "two images on one node",
			pod:   pod("gcr.io/40", "gcr.io/300").Obj(),
			nodes: []*v1.Node{node("node1", 40, 300), node("node2")},
			want:  map[string]int64{"node1": 7, "node2": 0},
		},
		{
			name:  "the sum is capped at 1000M per container",
			pod:   pod("gcr.io/10", "gcr.io/4000").Obj(),
			nodes: []*v1.Node{node("node1", 4000), node("node2", 10)},
			want:  map[string]int64{"node1": 100, "node2": 0},
		},
		{
			name:  "spread counts nodes without images",
			pod:   pod("gcr.io/10", "gcr.io/4000").Obj(),
			nodes: []*v1.Node{node("node1", 4000), node("node2", 10), node("node3")},
			want:  map[string]int64{"node1": 66, "node2": 0, "node3": 0},
		},
		{
			name:  "multiple large images",
			pod:   pod("gcr.io/300", "gcr.io/600", "gcr.io/900").Obj(),
			nodes: []*v1.Node{node("node1", 600, 900), node("node2", 300, 600, 900), node("node3")},
			want:  map[string]int64{"node1": 32, "node2": 36, "node3": 0},
		},
		{
			name:  "multiple small images",
			pod:   pod("gcr.io/30", "gcr.io/40").Obj(),
			nodes: []*v1.Node{node("node1", 20, 30, 40), node("node2", 20, 30)},
			want:  map[string]int64{"node1": 1, "node2": 0},
		},
		{
			// The volume's image counts, and so does it in the threshold
			// (upstream 1.37; 1.36 gave node1 12 with a threshold per container):
			// 100 × (150 MiB − 23 MiB) / (2 × 1000 MiB − 23 MiB) = 6.
			name:  "image volume",
			pod:   pod("gcr.io/30").ImageVolume("data", "gcr.io/300").Obj(),
			nodes: []*v1.Node{node("node1", 300), node("node2", 30)},
			want:  map[string]int64{"node1": 6, "node2": 0},
		},
		{
			// An image volume on no node still raises the threshold.
			name:  "image volume present nowhere",
			pod:   pod("gcr.io/2000").ImageVolume("data", "gcr.io/absent").Obj(),
			nodes: []*v1.Node{node("node1", 2000), node("node2", 30)},
			want:  map[string]int64{"node1": 49, "node2": 0},
		},
		{
			name:  "init containers count",
			pod:   pod("gcr.io/30").InitContainer("gcr.io/300").Obj(),
			nodes: []*v1.Node{node("node1", 40, 300, 2000), node("node2", 20, 30, 40)},
			want:  map[string]int64{"node1": 6, "node2": 0},
		},
		{
			name:  "a tagged image matches its tag only",
			pod:   pod("gcr.io/250:v2").Obj(),
			nodes: []*v1.Node{node("node1", 250), st.MakeNode().Name("node2").Image(250*mb, "gcr.io/250:v2").Obj()},
			want:  map[string]int64{"node1": 0, "node2": 10},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, tt.nodes)
			got := st.RunCycle(t.Context(), newFramework(t, snapshot), snapshot, tt.pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Scores); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImageLocalityWithoutPreScore(t *testing.T) {
	// A profile may disable PreScore for the plugin; Score must still
	// compute the same values.
	nodes := []*v1.Node{node("node1", 40, 300), node("node2")}
	snapshot := st.NewSnapshot(nil, nodes)
	profile := st.PluginProfile(st.Plugin(imagelocality.Name, 1))
	profile.Plugins.PreScore.Disabled = append(profile.Plugins.PreScore.Disabled, st.Plugin(imagelocality.Name, 0))
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), profile, snapshot)
	got := st.RunCycle(t.Context(), fwk, snapshot, pod("gcr.io/40", "gcr.io/300").Obj())
	if diff := cmp.Diff(map[string]int64{"node1": 7, "node2": 0}, got.Scores); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func BenchmarkImageLocality(b *testing.B) {
	nodes := st.MakeNodes(st.BenchNodes, func(i int) *v1.Node {
		n := st.MakeNode().Name(fmt.Sprintf("node-%d", i))
		for j := range 20 {
			n.Image(int64(50+j*10)*mb, fmt.Sprintf("registry.example/app-%d:v%d", (i+j)%100, j))
		}
		return n.Obj()
	})
	snapshot := st.NewSnapshot(nil, nodes)
	fwk := newFramework(b, snapshot, runtime.WithParallelism(1))
	b.Run("Score", func(b *testing.B) {
		st.BenchmarkScore(b, fwk, snapshot, pod("registry.example/app-7:v3", "registry.example/app-42:v9", "registry.example/sidecar").Obj())
	})
}
