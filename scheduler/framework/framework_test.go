package framework

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

func TestStatus(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name                         string
		status                       *Status
		wantCode                     Code
		wantMessage                  string
		wantSuccess, wantRejected    bool
		wantErr                      error
		wantSkip, wantWait, wantIsEr bool
	}{
		{name: "nil is success", status: nil, wantCode: Success, wantSuccess: true},
		{name: "unschedulable", status: NewStatus(Unschedulable, "a", "b"), wantCode: Unschedulable, wantMessage: "a, b", wantRejected: true, wantErr: errors.New("a, b")},
		{name: "unresolvable", status: NewStatus(UnschedulableAndUnresolvable, "x"), wantCode: UnschedulableAndUnresolvable, wantMessage: "x", wantRejected: true, wantErr: errors.New("x")},
		{name: "pending is rejected", status: NewStatus(Pending, "p"), wantCode: Pending, wantMessage: "p", wantRejected: true, wantErr: errors.New("p")},
		{name: "error keeps wrapped error", status: AsStatus(errBoom), wantCode: Error, wantMessage: "boom", wantErr: errBoom, wantIsEr: true},
		{name: "skip", status: NewStatus(Skip), wantCode: Skip, wantSkip: true},
		{name: "wait", status: NewStatus(Wait, "w"), wantCode: Wait, wantMessage: "w", wantWait: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := struct {
				Code                       Code
				Message                    string
				Success, Rejected, Skip, W bool
				IsErr                      bool
			}{tt.status.Code(), tt.status.Message(), tt.status.IsSuccess(), tt.status.IsRejected(), tt.status.IsSkip(), tt.status.IsWait(), tt.status.IsError()}
			want := got
			want.Code, want.Message, want.Success, want.Rejected, want.Skip, want.W, want.IsErr = tt.wantCode, tt.wantMessage, tt.wantSuccess, tt.wantRejected, tt.wantSkip, tt.wantWait, tt.wantIsEr
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErr, tt.status.AsError(), cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
				t.Errorf("AsError (-want +got):\n%s", diff)
			}
		})
	}
	if AsStatus(nil) != nil {
		t.Error("AsStatus(nil) must be nil")
	}
	if !errors.Is(AsStatus(fmt.Errorf("w: %w", errBoom)).AsError(), errBoom) {
		t.Error("AsError must keep the error chain")
	}
	if diff := cmp.Diff(NewStatus(Unschedulable, "r").WithPlugin("P"), NewStatus(Unschedulable, "r").WithPlugin("P")); diff != "" {
		t.Errorf("Equal: %s", diff)
	}
	if cmp.Equal(NewStatus(Unschedulable, "r").WithPlugin("P"), NewStatus(Unschedulable, "r").WithPlugin("Q")) {
		t.Error("statuses of different plugins must differ")
	}
	if got := Code(42).String(); got != "Unknown" {
		t.Errorf("unknown code string = %q", got)
	}
}

type intState struct{ v int }

func (s *intState) Clone() StateData { return &intState{v: s.v} }

type sharedState struct{ v []int }

func (s *sharedState) Clone() StateData { return s }

func TestCycleState(t *testing.T) {
	cs := NewCycleState()
	if _, err := cs.Read("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(missing) err = %v, want ErrNotFound", err)
	}
	cs.Write("a", &intState{v: 1})
	shared := &sharedState{v: []int{1}}
	cs.Write("s", shared)
	cs.SetSkipFilterPlugins(sets.New("F"))
	cs.SetRecordPluginMetrics(true)

	clone := cs.Clone()
	a, err := ReadAs[*intState](clone, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.v = 2 // must not leak into the original
	orig, _ := ReadAs[*intState](cs, "a")
	s, _ := ReadAs[*sharedState](clone, "s")
	got := struct {
		Orig, Clone   int
		SharedSame    bool
		Skip          []string
		RecordMetrics bool
	}{orig.v, a.v, s == shared, sets.List(clone.GetSkipFilterPlugins()), clone.ShouldRecordPluginMetrics()}
	want := got
	want.Orig, want.Clone, want.SharedSame, want.Skip, want.RecordMetrics = 1, 2, true, []string{"F"}, true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clone (-want +got):\n%s", diff)
	}
	if _, err := ReadAs[*sharedState](cs, "a"); err == nil {
		t.Error("ReadAs with a wrong type must fail")
	}
	cs.Delete("a")
	if _, err := cs.Read("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Delete err = %v", err)
	}
	var nilState *CycleState
	if nilState.Clone() != nil || nilState.ShouldRecordPluginMetrics() {
		t.Error("nil CycleState must clone to nil and not record metrics")
	}
}

func TestCycleStateConcurrent(t *testing.T) {
	cs := NewCycleState()
	cs.Write("k", &intState{v: 1})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if _, err := cs.Read("k"); err != nil {
					t.Error(err)
					return
				}
				cs.Write(StateKey(fmt.Sprint("w", i)), &intState{v: j})
				_ = cs.Clone()
			}
		}(i)
	}
	wg.Wait()
}

func TestPreFilterResultMerge(t *testing.T) {
	tests := []struct {
		name    string
		a, b    *PreFilterResult
		want    *PreFilterResult
		wantAll bool
	}{
		{name: "nil nil", wantAll: true},
		{name: "nil and set", b: &PreFilterResult{NodeNames: sets.New("n1")}, want: &PreFilterResult{NodeNames: sets.New("n1")}},
		{name: "set and nil", a: &PreFilterResult{NodeNames: sets.New("n1")}, want: &PreFilterResult{NodeNames: sets.New("n1")}},
		{name: "intersect", a: &PreFilterResult{NodeNames: sets.New("n1", "n2")}, b: &PreFilterResult{NodeNames: sets.New("n2", "n3")}, want: &PreFilterResult{NodeNames: sets.New("n2")}},
		{name: "disjoint", a: &PreFilterResult{NodeNames: sets.New("n1")}, b: &PreFilterResult{NodeNames: sets.New("n3")}, want: &PreFilterResult{NodeNames: sets.New[string]()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Merge(tt.b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
			if got.AllNodes() != tt.wantAll {
				t.Errorf("AllNodes = %v", got.AllNodes())
			}
		})
	}
}

func TestHostPortInfo(t *testing.T) {
	type entry struct {
		ip, proto string
		port      int32
	}
	tests := []struct {
		name  string
		used  []entry
		check entry
		want  bool
	}{
		{name: "same ip port", used: []entry{{"127.0.0.1", "TCP", 80}}, check: entry{"127.0.0.1", "TCP", 80}, want: true},
		{name: "other ip", used: []entry{{"127.0.0.1", "TCP", 80}}, check: entry{"127.0.0.2", "TCP", 80}},
		{name: "other protocol", used: []entry{{"127.0.0.1", "TCP", 80}}, check: entry{"127.0.0.1", "UDP", 80}},
		{name: "0.0.0.0 used blocks any ip", used: []entry{{"", "", 80}}, check: entry{"127.0.0.1", "TCP", 80}, want: true},
		{name: "0.0.0.0 checked conflicts with any ip", used: []entry{{"10.0.0.1", "TCP", 80}}, check: entry{"0.0.0.0", "TCP", 80}, want: true},
		{name: "empty protocol is TCP", used: []entry{{"127.0.0.1", "", 80}}, check: entry{"127.0.0.1", "TCP", 80}, want: true},
		{name: "port 0 never conflicts", used: []entry{{"127.0.0.1", "TCP", 80}}, check: entry{"127.0.0.1", "TCP", 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := HostPortInfo{}
			for _, e := range tt.used {
				h.Add(e.ip, e.proto, e.port)
			}
			if got := h.CheckConflict(tt.check.ip, tt.check.proto, tt.check.port); got != tt.want {
				t.Errorf("CheckConflict = %v, want %v", got, tt.want)
			}
			for _, e := range tt.used {
				h.Remove(e.ip, e.proto, e.port)
			}
			if h.Len() != 0 {
				t.Errorf("after Remove Len = %d, %v", h.Len(), h)
			}
		})
	}
}

func testPod(name string, cpu, mem string, hostPort int32, affinity *v1.Affinity) *v1.Pod {
	c := v1.Container{Name: "c"}
	if cpu != "" || mem != "" {
		c.Resources.Requests = v1.ResourceList{}
		if cpu != "" {
			c.Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
		}
	}
	if hostPort > 0 {
		c.Ports = []v1.ContainerPort{{HostPort: hostPort, ContainerPort: hostPort}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, Affinity: affinity},
	}
}

func TestNodeInfoAddRemove(t *testing.T) {
	anti := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "kubernetes.io/hostname"}}}}
	p1 := testPod("p1", "500m", "1Gi", 8080, nil)
	p2 := testPod("p2", "", "", 0, anti)

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110"),
		"example.com/gpu": resource.MustParse("2"),
	}}}
	ni := NewNodeInfo(p1, p2)
	ni.SetNode(node)
	gen := ni.Generation

	type view struct {
		Requested, NonZero, Allocatable Resource
		Pods, WithAffinity, WithAnti    int
		Ports                           int
	}
	got := view{*ni.Requested, *ni.NonZeroRequested, *ni.Allocatable, len(ni.Pods), len(ni.PodsWithAffinity), len(ni.PodsWithRequiredAntiAffinity), ni.UsedPorts.Len()}
	want := view{
		Requested:   Resource{MilliCPU: 500, Memory: 1 << 30},
		NonZero:     Resource{MilliCPU: 500 + DefaultMilliCPURequest, Memory: 1<<30 + DefaultMemoryRequest},
		Allocatable: Resource{MilliCPU: 4000, Memory: 8 << 30, AllowedPodNumber: 110, ScalarResources: map[v1.ResourceName]int64{"example.com/gpu": 2}},
		Pods:        2, WithAffinity: 1, WithAnti: 1, Ports: 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after add (-want +got):\n%s", diff)
	}
	if len(ni.PodsWithRequiredAntiAffinity[0].RequiredAntiAffinityTerms) != 1 ||
		!ni.PodsWithRequiredAntiAffinity[0].RequiredAntiAffinityTerms[0].Namespaces.Has("ns") {
		t.Errorf("anti-affinity terms not parsed: %+v", ni.PodsWithRequiredAntiAffinity[0].RequiredAntiAffinityTerms)
	}

	snap := ni.Snapshot()
	if err := snap.RemovePod(klog.Background(), p1); err != nil {
		t.Fatal(err)
	}
	if err := snap.RemovePod(klog.Background(), p2); err != nil {
		t.Fatal(err)
	}
	got = view{*snap.Requested, *snap.NonZeroRequested, *snap.Allocatable, len(snap.Pods), len(snap.PodsWithAffinity), len(snap.PodsWithRequiredAntiAffinity), snap.UsedPorts.Len()}
	want = view{Allocatable: want.Allocatable}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after remove (-want +got):\n%s", diff)
	}
	if len(ni.Pods) != 2 || ni.UsedPorts.Len() != 1 {
		t.Errorf("Snapshot shares state with the original: %s", ni)
	}
	if snap.Generation <= gen {
		t.Errorf("generation did not advance: %d <= %d", snap.Generation, gen)
	}
	if err := snap.RemovePod(klog.Background(), p1); err == nil {
		t.Error("removing an absent pod must fail")
	}
}

func TestClusterEventMatch(t *testing.T) {
	tests := []struct {
		name                 string
		registered, incoming ClusterEvent
		want                 bool
	}{
		{name: "exact", registered: ClusterEvent{Node, Add, ""}, incoming: ClusterEvent{Node, Add, ""}, want: true},
		{name: "update matches specific", registered: ClusterEvent{Node, Update, ""}, incoming: ClusterEvent{Node, UpdateNodeLabel, ""}, want: true},
		{name: "specific does not match general", registered: ClusterEvent{Node, UpdateNodeLabel, ""}, incoming: ClusterEvent{Node, Update, ""}},
		{name: "pod matches assigned pod", registered: ClusterEvent{Pod, Delete, ""}, incoming: ClusterEvent{AssignedPod, Delete, ""}, want: true},
		{name: "other resource", registered: ClusterEvent{Node, All, ""}, incoming: ClusterEvent{Pod, Add, ""}},
		{name: "wildcard", registered: ClusterEvent{WildCard, All, ""}, incoming: ClusterEvent{PersistentVolume, Add, ""}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.registered.Match(tt.incoming); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFitErrorMessage(t *testing.T) {
	m := NewDefaultNodeToStatus()
	m.Set("n1", NewStatus(Unschedulable, "Insufficient cpu"))
	m.Set("n2", NewStatus(Unschedulable, "Insufficient cpu"))
	m.Set("n3", NewStatus(Unschedulable, "Insufficient cpu"))
	m.Set("n4", NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint {k: v}"))
	m.Set("n5", NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint {k: v}"))
	err := &FitError{NumAllNodes: 5, Diagnosis: Diagnosis{NodeToStatus: m}}
	want := "0/5 nodes are available: 2 node(s) had untolerated taint {k: v}, 3 Insufficient cpu."
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestNodesForStatusCode(t *testing.T) {
	nodes := []*NodeInfo{}
	for _, n := range []string{"a", "b", "c"} {
		ni := NewNodeInfo()
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		nodes = append(nodes, ni)
	}
	lister := sliceLister(nodes)
	m := NewNodeToStatus(map[string]*Status{"a": NewStatus(Unschedulable)}, NewStatus(UnschedulableAndUnresolvable))
	names := func(ns []*NodeInfo) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Node().Name)
		}
		return out
	}
	got, _ := m.NodesForStatusCode(lister, Unschedulable)
	if diff := cmp.Diff([]string{"a"}, names(got)); diff != "" {
		t.Errorf("explicit (-want +got):\n%s", diff)
	}
	got, _ = m.NodesForStatusCode(lister, UnschedulableAndUnresolvable)
	if diff := cmp.Diff([]string{"b", "c"}, names(got), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("absent (-want +got):\n%s", diff)
	}
}

type sliceLister []*NodeInfo

func (l sliceLister) List() ([]*NodeInfo, error)                                 { return l, nil }
func (l sliceLister) HavePodsWithAffinityList() ([]*NodeInfo, error)             { return nil, nil }
func (l sliceLister) HavePodsWithRequiredAntiAffinityList() ([]*NodeInfo, error) { return nil, nil }
func (l sliceLister) Get(name string) (*NodeInfo, error) {
	for _, n := range l {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %q not found", name)
}

func TestParallelizer(t *testing.T) {
	for _, p := range []int{0, 1, 2, 4} {
		for _, pieces := range []int{1, 2, 7, 1000} {
			var mu sync.Mutex
			runs := map[int]int{}
			NewParallelizer(p).Until(t.Context(), pieces, func(i int) {
				mu.Lock()
				runs[i]++
				mu.Unlock()
			}, "test")
			if len(runs) != pieces {
				t.Errorf("parallelism %d: ran %d of %d pieces", p, len(runs), pieces)
			}
			for i, n := range runs {
				if n != 1 {
					t.Errorf("parallelism %d: piece %d ran %d times", p, i, n)
				}
			}
		}
	}
}

func TestParallelizerStopsWhenCancelled(t *testing.T) {
	for _, p := range []int{1, 4} {
		ctx, cancel := context.WithCancel(t.Context())
		var ran atomic.Int64
		NewParallelizer(p).Until(ctx, 1000, func(int) {
			ran.Add(1)
			cancel()
		}, "test")
		// Each worker may have started one piece before it saw the cancel.
		if n := ran.Load(); n > int64(max(p, 1)) {
			t.Errorf("parallelism %d: ran %d pieces after cancelling in the first", p, n)
		}
	}
}

func TestPodInfoResource(t *testing.T) {
	pod := func(cpu string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			}}}},
		}
	}
	pi, err := NewPodInfo(pod("100m"))
	if err != nil {
		t.Fatal(err)
	}
	// Computed once, from any number of goroutines at once.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if got := pi.CalculateResource(); got.Resource.MilliCPU != 100 || got.Non0Mem != DefaultMemoryRequest {
				t.Errorf("CalculateResource() = %+v, want 100m CPU and the default memory as non-zero", got)
			}
		})
	}
	wg.Wait()
	cp := pi.DeepCopy()
	// An in-place resize updates the same pod: its resources are recomputed.
	if err := pi.Update(pod("250m")); err != nil {
		t.Fatal(err)
	}
	if got := pi.CalculateResource().Resource.MilliCPU; got != 250 {
		t.Errorf("after the resize, CalculateResource() has %dm CPU, want 250m", got)
	}
	if got := cp.CalculateResource().Resource.MilliCPU; got != 100 {
		t.Errorf("the copy taken before the resize has %dm CPU, want 100m", got)
	}
}
