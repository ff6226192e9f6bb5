package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func cpuPod(name, node, cpu string) *v1.Pod {
	return st.MakePod().Name(name).Node(node).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
}

func node(name string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
}

// nodeState is what a test checks about one node of the cache.
type nodeState struct {
	MilliCPU int64
	Pods     int
}

// state is what a test checks about the cache after a sequence of operations.
type state struct {
	Nodes   map[string]nodeState
	Assumed int
	Pods    int
}

func dump(c *Cache) state {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := state{Nodes: map[string]nodeState{}, Assumed: c.assumedPods.Len(), Pods: len(c.podStates)}
	for name, item := range c.nodes {
		s.Nodes[name] = nodeState{MilliCPU: item.info.Requested.MilliCPU, Pods: len(item.info.Pods)}
	}
	return s
}

// op is one step applied to a cache; it returns the error the cache gave.
type op func(logger klog.Logger, c *Cache, clk *clocktesting.FakeClock) error

func assume(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		pi, _ := framework.NewPodInfo(p.DeepCopy())
		return c.AssumePod(logger, pi)
	}
}

func finish(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { return c.FinishBinding(logger, p) }
}

func forget(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { return c.ForgetPod(logger, p) }
}

func add(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { return c.AddPod(logger, p) }
}

func update(oldPod, newPod *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error {
		return c.UpdatePod(logger, oldPod, newPod)
	}
}

func remove(p *v1.Pod) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { return c.RemovePod(logger, p) }
}

func addNode(n *v1.Node) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { c.AddNode(logger, n); return nil }
}

func removeNode(n *v1.Node) op {
	return func(logger klog.Logger, c *Cache, _ *clocktesting.FakeClock) error { return c.RemoveNode(logger, n) }
}

func wait(d time.Duration) op {
	return func(logger klog.Logger, c *Cache, clk *clocktesting.FakeClock) error {
		clk.Step(d)
		c.cleanupAssumedPods(logger, clk.Now())
		return nil
	}
}

func TestPodLifecycle(t *testing.T) {
	const ttl = 10 * time.Second
	p1 := cpuPod("p1", "n1", "1")
	p1Big := cpuPod("p1", "n1", "3")
	p1Elsewhere := cpuPod("p1", "n2", "1")
	p2 := cpuPod("p2", "n1", "500m")

	tests := []struct {
		name    string
		ops     []op
		wantErr []bool
		want    state
	}{
		{
			name: "an assumed pod counts on its node at once",
			ops:  []op{addNode(node("n1")), assume(p1)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Assumed: 1, Pods: 1},
		},
		{
			name: "the bound pod from the informer confirms the assumed one",
			ops:  []op{addNode(node("n1")), assume(p1), finish(p1), add(p1), wait(2 * ttl)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name: "a failed binding forgets the pod and releases its resources",
			ops:  []op{addNode(node("n1")), assume(p1), forget(p1)},
			want: state{Nodes: map[string]nodeState{"n1": {}}},
		},
		{
			name: "a binding that never shows up expires after the TTL",
			ops:  []op{addNode(node("n1")), assume(p1), finish(p1), wait(ttl / 2), wait(ttl)},
			want: state{Nodes: map[string]nodeState{"n1": {}}},
		},
		{
			name: "an assumed pod whose binding is still running never expires",
			ops:  []op{addNode(node("n1")), assume(p1), wait(10 * ttl)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Assumed: 1, Pods: 1},
		},
		{
			name: "an expired pod whose event arrives late is added back",
			ops:  []op{addNode(node("n1")), assume(p1), finish(p1), wait(2 * ttl), add(p1)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name: "a pod bound to another node than assumed counts where it really is",
			ops:  []op{addNode(node("n1")), addNode(node("n2")), assume(p1), add(p1Elsewhere)},
			want: state{Nodes: map[string]nodeState{"n1": {}, "n2": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name: "an update changes what the pod takes",
			ops:  []op{addNode(node("n1")), add(p1), update(p1, p1Big)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 3000, Pods: 1}}, Pods: 1},
		},
		{
			name: "a deleted pod releases its resources",
			ops:  []op{addNode(node("n1")), add(p1), add(p2), remove(p1)},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 500, Pods: 1}}, Pods: 1},
		},
		{
			name:    "an assumed pod deleted before its binding finished is gone",
			ops:     []op{addNode(node("n1")), assume(p1), remove(p1), forget(p1)},
			wantErr: []bool{false, false, false, true},
			want:    state{Nodes: map[string]nodeState{"n1": {}}},
		},
		{
			name:    "a pod cannot be assumed twice",
			ops:     []op{addNode(node("n1")), assume(p1), assume(p1)},
			wantErr: []bool{false, false, true},
			want:    state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Assumed: 1, Pods: 1},
		},
		{
			name:    "a confirmed pod cannot be forgotten",
			ops:     []op{addNode(node("n1")), add(p1), forget(p1)},
			wantErr: []bool{false, false, true},
			want:    state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name:    "an assumed pod is not updated before it is confirmed",
			ops:     []op{addNode(node("n1")), assume(p1), update(p1, p1Big)},
			wantErr: []bool{false, false, true},
			want:    state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Assumed: 1, Pods: 1},
		},
		{
			name: "pods may arrive before their node",
			ops:  []op{add(p1), addNode(node("n1"))},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name: "a deleted node keeps its pods until they are gone",
			ops:  []op{addNode(node("n1")), add(p1), removeNode(node("n1"))},
			want: state{Nodes: map[string]nodeState{"n1": {MilliCPU: 1000, Pods: 1}}, Pods: 1},
		},
		{
			name: "the last pod of a deleted node takes the node with it",
			ops:  []op{addNode(node("n1")), add(p1), removeNode(node("n1")), remove(p1)},
			want: state{Nodes: map[string]nodeState{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			clk := clocktesting.NewFakeClock(time.Now())
			c := New(WithAssumedPodTTL(ttl), WithClock(clk))
			for i, o := range tt.ops {
				err := o(logger, c, clk)
				wantErr := i < len(tt.wantErr) && tt.wantErr[i]
				if (err != nil) != wantErr {
					t.Fatalf("step %d: error = %v, want error: %v", i, err, wantErr)
				}
			}
			if diff := cmp.Diff(tt.want, dump(c)); diff != "" {
				t.Errorf("cache (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpiredPodHandler(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	var expired []string
	c := New(WithAssumedPodTTL(time.Second), WithClock(clk), WithExpiredPodHandler(func(_ klog.Logger, p *v1.Pod) {
		expired = append(expired, p.Name)
	}))
	c.AddNode(logger, node("n1"))
	for _, name := range []string{"a", "b", "c"} {
		pi, _ := framework.NewPodInfo(cpuPod(name, "n1", "100m"))
		if err := c.AssumePod(logger, pi); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.FinishBinding(logger, cpuPod("a", "n1", "100m"))
	_ = c.FinishBinding(logger, cpuPod("b", "n1", "100m"))
	_ = c.AddPod(logger, cpuPod("b", "n1", "100m"))
	clk.Step(2 * time.Second)
	c.cleanupAssumedPods(logger, clk.Now())
	if diff := cmp.Diff([]string{"a"}, expired); diff != "" {
		t.Errorf("expired pods (-want +got):\n%s", diff)
	}
}

func names(nis []*framework.NodeInfo) []string {
	out := make([]string, len(nis))
	for i, ni := range nis {
		out[i] = ni.Node().Name
	}
	return out
}

func zoned(name, zone string) *v1.Node {
	return st.MakeNode().Name(name).Label(v1.LabelTopologyZone, zone).Obj()
}

func TestSnapshotNodeOrderSpreadsZones(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New()
	for _, n := range []*v1.Node{zoned("a1", "a"), zoned("a2", "a"), zoned("a3", "a"), zoned("b1", "b"), zoned("c1", "c"), zoned("c2", "c")} {
		c.AddNode(logger, n)
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "b1", "c1", "a2", "c2", "a3"}, names(s.nodeInfoList)); diff != "" {
		t.Errorf("node order (-want +got):\n%s", diff)
	}

	// A node that moves zone moves in the order; one removed leaves it.
	c.UpdateNode(logger, zoned("a3", "a"), zoned("a3", "b"))
	if err := c.RemoveNode(logger, zoned("c1", "c")); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "b1", "c2", "a2", "a3"}, names(s.nodeInfoList)); diff != "" {
		t.Errorf("node order after changes (-want +got):\n%s", diff)
	}
}

func TestUpdateSnapshotCopiesOnlyChangedNodes(t *testing.T) {
	affinityPod := func(name, node string) *v1.Pod {
		return st.MakePod().Name(name).Node(node).PodAntiAffinity(st.PodAffinityTerm("app", "x", v1.LabelHostname)).Obj()
	}
	pvcPod := func(name, node, claim string) *v1.Pod {
		return st.MakePod().Name(name).Node(node).PVC(claim).Obj()
	}
	type want struct {
		Copied           int
		Nodes            []string
		WithAffinity     []string
		WithAntiAffinity []string
		NodeCPU          map[string]int64
		PVCs             map[string]bool
	}
	tests := []struct {
		name   string
		change func(logger klog.Logger, c *Cache)
		want   want
	}{
		{
			name:   "nothing changed",
			change: func(klog.Logger, *Cache) {},
			want:   want{Copied: 0, Nodes: []string{"n0", "n1", "n2", "n3"}, NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 0, "n3": 0}},
		},
		{
			name: "a pod added to one node copies that node",
			change: func(logger klog.Logger, c *Cache) {
				_ = c.AddPod(logger, cpuPod("new", "n2", "2"))
			},
			want: want{Copied: 1, Nodes: []string{"n0", "n1", "n2", "n3"}, NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 2000, "n3": 0}},
		},
		{
			name: "an assumed then forgotten pod copies its node once",
			change: func(logger klog.Logger, c *Cache) {
				pi, _ := framework.NewPodInfo(cpuPod("tmp", "n3", "1"))
				_ = c.AssumePod(logger, pi)
				_ = c.ForgetPod(logger, pi.Pod)
			},
			want: want{Copied: 1, Nodes: []string{"n0", "n1", "n2", "n3"}, NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 0, "n3": 0}},
		},
		{
			name: "a node added joins the list",
			change: func(logger klog.Logger, c *Cache) {
				c.AddNode(logger, node("n4"))
			},
			want: want{Copied: 1, Nodes: []string{"n0", "n1", "n2", "n3", "n4"}, NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 0, "n3": 0, "n4": 0}},
		},
		{
			name: "a node removed leaves the list even with pods on it",
			change: func(logger klog.Logger, c *Cache) {
				_ = c.RemoveNode(logger, node("n1"))
			},
			want: want{Copied: 0, Nodes: []string{"n0", "n2", "n3"}, NodeCPU: map[string]int64{"n0": 0, "n2": 0, "n3": 0}},
		},
		{
			name: "a pod with anti-affinity puts its node on the affinity lists",
			change: func(logger klog.Logger, c *Cache) {
				_ = c.AddPod(logger, affinityPod("aff", "n3"))
			},
			want: want{Copied: 1, Nodes: []string{"n0", "n1", "n2", "n3"}, WithAffinity: []string{"n3"}, WithAntiAffinity: []string{"n3"},
				NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 0, "n3": 0}},
		},
		{
			name: "PVCs in use follow the pods",
			change: func(logger klog.Logger, c *Cache) {
				_ = c.AddPod(logger, pvcPod("v1", "n0", "claim-a"))
				_ = c.AddPod(logger, pvcPod("v2", "n2", "claim-a"))
				_ = c.AddPod(logger, pvcPod("v3", "n2", "claim-b"))
				_ = c.RemovePod(logger, pvcPod("v3", "n2", "claim-b"))
			},
			want: want{Copied: 2, Nodes: []string{"n0", "n1", "n2", "n3"}, NodeCPU: map[string]int64{"n0": 0, "n1": 1000, "n2": 0, "n3": 0},
				PVCs: map[string]bool{"default/claim-a": true, "default/claim-b": false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := New()
			for i := 0; i < 4; i++ {
				c.AddNode(logger, node(fmt.Sprint("n", i)))
			}
			_ = c.AddPod(logger, cpuPod("p", "n1", "1"))
			s := NewEmptySnapshot()
			if err := c.UpdateSnapshot(logger, s); err != nil {
				t.Fatal(err)
			}
			tt.change(logger, c)
			if err := c.UpdateSnapshot(logger, s); err != nil {
				t.Fatal(err)
			}
			got := want{
				Copied:           s.copied,
				Nodes:            names(s.nodeInfoList),
				WithAffinity:     names(s.havePodsWithAffinityNodeInfoList),
				WithAntiAffinity: names(s.havePodsWithRequiredAntiAffinityNodeInfoList),
				NodeCPU:          map[string]int64{},
			}
			for name, ni := range s.nodeInfoMap {
				got.NodeCPU[name] = ni.Requested.MilliCPU
			}
			for key := range tt.want.PVCs {
				if got.PVCs == nil {
					got.PVCs = map[string]bool{}
				}
				got.PVCs[key] = s.IsPVCUsedByPods(key)
			}
			if len(got.WithAffinity) == 0 {
				got.WithAffinity = nil
			}
			if len(got.WithAntiAffinity) == 0 {
				got.WithAntiAffinity = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
			// A snapshot updated incrementally must equal one built from scratch.
			fresh := NewEmptySnapshot()
			if err := c.UpdateSnapshot(logger, fresh); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(names(fresh.nodeInfoList), names(s.nodeInfoList)); diff != "" {
				t.Errorf("incremental and fresh snapshots differ (-fresh +incremental):\n%s", diff)
			}
			for name, ni := range fresh.nodeInfoMap {
				if got := s.nodeInfoMap[name]; got == nil || got.Requested.MilliCPU != ni.Requested.MilliCPU || len(got.Pods) != len(ni.Pods) {
					t.Errorf("node %s differs between incremental and fresh snapshots", name)
				}
			}
		})
	}
}

func TestSnapshotKeepsNodeInfoPointers(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New()
	c.AddNode(logger, node("n1"))
	c.AddNode(logger, node("n2"))
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List()
	before := list[0]
	_ = c.AddPod(logger, cpuPod("p", before.Node().Name, "1"))
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	list, _ = s.List()
	if list[0] != before {
		t.Fatal("the list was rebuilt for a pod change")
	}
	if got := before.Requested.MilliCPU; got != 1000 {
		t.Errorf("listed NodeInfo has %dm CPU requested, want 1000m", got)
	}
}

func TestNodeImageStates(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New()
	c.AddNode(logger, st.MakeNode().Name("n1").Image(100, "img:a").Obj())
	c.AddNode(logger, st.MakeNode().Name("n2").Image(100, "img:a").Image(50, "img:b").Obj())
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	n2, err := s.Get("n2")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]framework.ImageStateSummary{}
	for name, st := range n2.ImageStates {
		got[name] = *st
	}
	want := map[string]framework.ImageStateSummary{"img:a": {Size: 100, NumNodes: 2}, "img:b": {Size: 50, NumNodes: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image states of n2 (-want +got):\n%s", diff)
	}
	if err := c.RemoveNode(logger, st.MakeNode().Name("n2").Image(100, "img:a").Image(50, "img:b").Obj()); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.imageStates["img:b"]; ok {
		t.Error("an image on no node is still tracked")
	}
	if got := c.imageStates["img:a"].Nodes.Len(); got != 1 {
		t.Errorf("img:a is on %d nodes, want 1", got)
	}
}

func TestSnapshotTakeOutPod(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := New()
	c.AddNode(logger, node("n1"))
	placed := cpuPod("placed", "n1", "1")
	placed.UID = "placed"
	other := cpuPod("other", "n1", "2")
	other.UID = "other"
	for _, p := range []*v1.Pod{placed, other} {
		if err := c.AddPod(logger, p); err != nil {
			t.Fatal(err)
		}
	}
	s := NewEmptySnapshot()
	if err := c.UpdateSnapshot(logger, s); err != nil {
		t.Fatal(err)
	}
	listed, _ := s.List()
	ni := listed[0]
	restore, ok := s.TakeOutPod(logger, placed)
	if !ok {
		t.Fatal("the pod was not found on its node")
	}
	if got, want := (nodeState{MilliCPU: ni.Requested.MilliCPU, Pods: len(ni.Pods)}), (nodeState{MilliCPU: 2000, Pods: 1}); got != want {
		t.Errorf("without the pod the listed node has %+v, want %+v", got, want)
	}
	if got, _ := s.Get("n1"); got != ni {
		t.Error("the snapshot's map and list no longer hold the same NodeInfo")
	}
	cached := c.nodes["n1"].info
	if got, want := (nodeState{MilliCPU: cached.Requested.MilliCPU, Pods: len(cached.Pods)}), (nodeState{MilliCPU: 3000, Pods: 2}); got != want {
		t.Errorf("the cache's node changed to %+v, want %+v", got, want)
	}
	restore()
	if got, want := (nodeState{MilliCPU: ni.Requested.MilliCPU, Pods: len(ni.Pods)}), (nodeState{MilliCPU: 3000, Pods: 2}); got != want {
		t.Errorf("restored node has %+v, want %+v", got, want)
	}
	if _, ok := s.TakeOutPod(logger, cpuPod("unknown", "n1", "1")); ok {
		t.Error("a pod not counted on the node was taken out")
	}
}
