package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing/registry"
	fwkruntime "github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// groups is a fixed set of PodGroups keyed by namespace/name.
type groups map[string]*podgroupv1alpha1.PodGroup

func (g groups) Get(_ context.Context, namespace, name string) (*podgroupv1alpha1.PodGroup, error) {
	return g[namespace+"/"+name], nil
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func group(name string, minMember int32) *podgroupv1alpha1.PodGroup {
	return &podgroupv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec:       podgroupv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

func groupsOf(pgs ...*podgroupv1alpha1.PodGroup) groups {
	g := groups{}
	for _, pg := range pgs {
		g[pg.Namespace+"/"+pg.Name] = pg
	}
	return g
}

func member(name, group string) *st.PodWrapper {
	return st.MakePod().Name(name).Label(podgroupv1alpha1.PodGroupLabel, group)
}

// env is a framework instance running the plugin, with a pod informer
// whose store the test fills.
type env struct {
	fwk   framework.Framework
	clock *testingclock.FakeClock
	store interface{ Add(any) error }
}

type envConfig struct {
	groups   groups
	args     string
	pods     []*v1.Pod
	snapshot framework.SharedLister
	// permit, when set, are the profile's plugins besides DefaultBinder, in
	// order (Coscheduling among them); register adds those that are not
	// Coscheduling, and their args, to the registry and profile.
	permit   []string
	register func(fwkruntime.Registry, *configv1.KubeSchedulerProfile) error
}

func newEnv(t testing.TB, c envConfig) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	r := registry.New(nil)
	if err := Register(r, c.groups, WithClock(clk)); err != nil {
		t.Fatal(err)
	}
	if c.permit == nil {
		c.permit = []string{Name}
	}
	profile := st.MultiPointProfile(st.Plugin(defaultbinder.Name, 0))
	for _, name := range c.permit {
		profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, st.Plugin(name, 0))
	}
	if c.args != "" {
		profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: runtime.RawExtension{Raw: []byte(c.args)}}}
	}
	if c.register != nil {
		if err := c.register(r, profile); err != nil {
			t.Fatal(err)
		}
	}
	client, inf := st.InformerFactory(t)
	fwk := st.NewFramework(t, r, profile, c.snapshot, fwkruntime.WithClientSet(client), fwkruntime.WithInformerFactory(inf))
	// The plugin reads the pod lister only; the test fills its store
	// instead of running the informer, so each case sees exactly its pods.
	e := &env{fwk: fwk, clock: clk, store: inf.Core().V1().Pods().Informer().GetStore()}
	for _, p := range c.pods {
		e.addPod(t, p)
	}
	return e
}

func (e *env) addPod(t testing.TB, p *v1.Pod) {
	t.Helper()
	if err := e.store.Add(p); err != nil {
		t.Fatal(err)
	}
}

// permit runs Permit for pod as the scheduling cycle does and, when the pod
// waits, starts its binding cycle's WaitOnPermit, whose result comes on the
// returned channel.
func (e *env) permit(t *testing.T, pod *v1.Pod, state *framework.CycleState) (*framework.Status, <-chan *framework.Status) {
	t.Helper()
	if state == nil {
		state = framework.NewCycleState()
	}
	s := e.fwk.RunPermitPlugins(context.Background(), state, pod, "node-1")
	if !s.IsWait() {
		return s, nil
	}
	done := make(chan *framework.Status, 1)
	go func() { done <- e.fwk.WaitOnPermit(context.Background(), pod) }()
	return s, done
}

// finish runs Unreserve when a waiting pod's wait failed, as the
// binding cycle does, and returns the wait's status.
func (e *env) finish(t *testing.T, pod *v1.Pod, done <-chan *framework.Status) *framework.Status {
	t.Helper()
	select {
	case s := <-done:
		if !s.IsSuccess() {
			e.fwk.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), pod, "node-1")
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("pod %s still waits at Permit", pod.Name)
		return nil
	}
}

func (e *env) message(t *testing.T, pod *v1.Pod) string {
	t.Helper()
	wp := e.fwk.GetWaitingPod(pod.UID)
	if wp == nil {
		t.Fatalf("pod %s is not waiting", pod.Name)
	}
	return wp.GetPendingPluginMessages()[Name]
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    CoschedulingArgs
		want    CoschedulingArgs
		wantErr string
	}{
		{
			name: "defaults",
			want: CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](60), PodGroupBackoffSeconds: ptr.To[int64](0), PodGroupRejectPercentage: ptr.To[int32](10)},
		},
		{
			name: "zero is allowed everywhere",
			args: CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](0), PodGroupBackoffSeconds: ptr.To[int64](0), PodGroupRejectPercentage: ptr.To[int32](0)},
			want: CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](0), PodGroupBackoffSeconds: ptr.To[int64](0), PodGroupRejectPercentage: ptr.To[int32](0)},
		},
		{
			name:    "negative times and a percentage out of range",
			args:    CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](-1), PodGroupBackoffSeconds: ptr.To[int64](-2), PodGroupRejectPercentage: ptr.To[int32](101)},
			want:    CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](-1), PodGroupBackoffSeconds: ptr.To[int64](-2), PodGroupRejectPercentage: ptr.To[int32](101)},
			wantErr: "[permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0, podGroupBackoffSeconds: Invalid value: -2: must be greater than 0, podGroupRejectPercentage: Invalid value: 101: must be between 0 and 100]",
		},
		{
			name:    "negative percentage",
			args:    CoschedulingArgs{PodGroupRejectPercentage: ptr.To[int32](-1)},
			want:    CoschedulingArgs{PermitWaitingTimeSeconds: ptr.To[int64](60), PodGroupBackoffSeconds: ptr.To[int64](0), PodGroupRejectPercentage: ptr.To[int32](-1)},
			wantErr: "podGroupRejectPercentage: Invalid value: -1: must be between 0 and 100",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args.DeepCopy()
			SetDefaults(args)
			if diff := cmp.Diff(&tt.want, args); diff != "" {
				t.Errorf("defaulted args (-want +got):\n%s", diff)
			}
			err := Validate(args)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("Validate = %q, want %q", gotErr, tt.wantErr)
			}
		})
	}
}

func TestArgsThroughProfile(t *testing.T) {
	r := registry.New(nil)
	if err := Register(r, groups{}); err != nil {
		t.Fatal(err)
	}
	profile := st.MultiPointProfile(st.Plugin(Name, 0), st.Plugin(defaultbinder.Name, 0))
	profile.PluginConfig = []configv1.PluginConfig{{Name: Name, Args: runtime.RawExtension{Raw: []byte(`{"podGroupRejectPercentage": 200}`)}}}
	_, err := st.BuildFramework(r, profile, nil)
	if err == nil || !strings.Contains(err.Error(), "podGroupRejectPercentage: Invalid value: 200: must be between 0 and 100") {
		t.Fatalf("NewFramework error = %v, want the reject percentage refused", err)
	}
}

func TestLess(t *testing.T) {
	early, late := t0.Add(-time.Hour), t0.Add(time.Hour)
	qpi := func(p *v1.Pod, initial time.Time) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: p}, Timestamp: initial, InitialAttemptTimestamp: &initial}
	}
	g := groupsOf(group("a", 2), group("b", 2))
	g["default/b"].CreationTimestamp = metav1.NewTime(late)
	tests := []struct {
		name   string
		failed string // a group rejected in PostFilter before sorting
		a, b   *framework.QueuedPodInfo
		want   bool
	}{
		{
			name: "higher priority first",
			a:    qpi(st.MakePod().Name("x").Priority(10).Obj(), late),
			b:    qpi(st.MakePod().Name("y").Priority(1).Obj(), early),
			want: true,
		},
		{
			name: "pods without a group by first attempt",
			a:    qpi(st.MakePod().Name("y").Obj(), early),
			b:    qpi(st.MakePod().Name("x").Obj(), late),
			want: true,
		},
		{
			name: "members by their group's creation time, not their own queueing",
			a:    qpi(member("a1", "a").Obj(), late),
			b:    qpi(member("b1", "b").Obj(), early),
			want: true,
		},
		{
			name: "a member of a missing group by its first attempt",
			a:    qpi(member("z1", "missing").Obj(), early),
			b:    qpi(member("a1", "a").Obj(), t0),
			want: true,
		},
		{
			name: "equal times by namespace/name",
			a:    qpi(member("a1", "a").Obj(), late),
			b:    qpi(member("a2", "a").Obj(), early),
			want: true,
		},
		{
			name:   "a group that failed goes behind by its failure time",
			failed: "a",
			a:      qpi(member("a1", "a").Obj(), early),
			b:      qpi(member("b1", "b").Obj(), late),
			want:   false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{groups: g})
			if tt.failed != "" {
				// The group fails after b's creation time.
				e.clock.SetTime(late.Add(time.Minute))
				pod := member(tt.failed+"-x", tt.failed).Obj()
				if _, s := e.fwk.RunPostFilterPlugins(context.Background(), framework.NewCycleState(), pod, framework.NewDefaultNodeToStatus()); s.Code() != framework.Unschedulable {
					t.Fatalf("PostFilter = %v, want Unschedulable", s)
				}
			}
			less := e.fwk.QueueSortFunc()
			if got := less(tt.a, tt.b); got != tt.want {
				t.Errorf("Less(%s, %s) = %v, want %v", tt.a.Pod.Name, tt.b.Pod.Name, got, tt.want)
			}
		})
	}
}

func TestPreFilter(t *testing.T) {
	withResources := group("r", 2)
	withResources.Spec.MinResources = st.ResourceList(map[v1.ResourceName]string{v1.ResourceCPU: "3"})
	g := groupsOf(group("g", 3), withResources)
	nodes := []*v1.Node{
		st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj(),
		st.MakeNode().Name("n2").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj(),
	}
	other := st.MakePod().Name("other").Node("n2").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	ownPlaced := member("r0", "r").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Obj()
	tests := []struct {
		name     string
		pod      *v1.Pod
		pods     []*v1.Pod
		nodePods []*v1.Pod
		want     *framework.Status
	}{
		{
			name: "a pod without a group passes",
			pod:  st.MakePod().Name("p").Obj(),
		},
		{
			name: "a member of a missing group passes",
			pod:  member("p", "missing").Obj(),
		},
		{
			name: "too few members",
			pod:  member("g1", "g").Obj(),
			pods: []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("x", "g").Namespace("other").Obj()},
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pre-filter pod g1 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"),
		},
		{
			name: "gated members",
			pod:  member("g1", "g").Obj(),
			pods: []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").SchedulingGates("wait").Obj(), member("g3", "g").Obj()},
			want: framework.NewStatus(framework.UnschedulableAndUnresolvable, "pre-filter pod g1 cannot proceed due to gated pods in the same PodGroup"),
		},
		{
			name: "enough members and no minResources",
			pod:  member("g1", "g").Obj(),
			pods: []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("g3", "g").Obj()},
		},
		{
			name:     "minResources beyond what the cluster has left",
			pod:      member("r1", "r").Obj(),
			pods:     []*v1.Pod{member("r1", "r").Obj(), member("r2", "r").Obj()},
			nodePods: []*v1.Pod{other, st.MakePod().Name("hog").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()},
			want:     framework.NewStatus(framework.UnschedulableAndUnresolvable, "resource gap: map[cpu:1]"),
		},
		{
			name:     "the group's own placed pods count as free",
			pod:      member("r1", "r").Obj(),
			pods:     []*v1.Pod{ownPlaced, member("r1", "r").Obj()},
			nodePods: []*v1.Pod{other, ownPlaced},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(tt.nodePods, nodes)
			e := newEnv(t, envConfig{groups: g, pods: tt.pods, snapshot: snapshot})
			_, got, _ := e.fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), tt.pod)
			if tt.want != nil {
				tt.want = tt.want.WithPlugin(Name)
			}
			if !tt.want.Equal(got) {
				t.Errorf("PreFilter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPreFilterRemembersPassedResourceCheck(t *testing.T) {
	pg := group("r", 1)
	pg.Spec.MinResources = st.ResourceList(map[v1.ResourceName]string{v1.ResourceCPU: "1"})
	node := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	pod := member("r1", "r").Obj()
	full := st.NewSnapshot([]*v1.Pod{st.MakePod().Name("hog").Node("n1").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()}, []*v1.Node{node})
	snapshots := []framework.SharedLister{st.NewSnapshot(nil, []*v1.Node{node}), full, full}
	var current int
	e := newEnv(t, envConfig{groups: groupsOf(pg), args: `{"permitWaitingTimeSeconds": 10}`, pods: []*v1.Pod{pod}, snapshot: switching{&current, snapshots}})
	run := func() *framework.Status {
		_, s, _ := e.fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), pod)
		return s
	}
	if s := run(); !s.IsSuccess() {
		t.Fatalf("PreFilter on a free cluster = %v", s)
	}
	current = 1
	if s := run(); !s.IsSuccess() {
		t.Fatalf("PreFilter within permitWaitingTimeSeconds of a passed check = %v, want it skipped", s)
	}
	e.clock.Step(10 * time.Second)
	current = 2
	if s := run(); s.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter once the passed check expired = %v, want the gap", s)
	}
}

// switching serves the snapshot at *current.
type switching struct {
	current   *int
	snapshots []framework.SharedLister
}

func (s switching) NodeInfos() framework.NodeInfoLister { return s.snapshots[*s.current].NodeInfos() }
func (s switching) StorageInfos() framework.StorageInfoLister {
	return s.snapshots[*s.current].StorageInfos()
}
func (s switching) PodGroupStates() framework.PodGroupStateLister {
	return s.snapshots[*s.current].PodGroupStates()
}
func (s switching) PodGroups() framework.PodGroupLister { return s.snapshots[*s.current].PodGroups() }

func TestPostFilter(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		minMem  int32
		waiting int // members of g held at Permit before PostFilter
		bound   int // members of g bound
		pod     *v1.Pod
		want    *framework.Status
		// wantRejected: the waiting members were rejected.
		wantRejected bool
	}{
		{
			name: "a pod without a group",
			pod:  st.MakePod().Name("p").Obj(),
			want: framework.NewStatus(framework.Unschedulable, "can not find pod group"),
		},
		{
			name: "a member of a missing group",
			pod:  member("p", "missing").Obj(),
			want: framework.NewStatus(framework.Unschedulable, "can not find pod group"),
		},
		{
			name:   "quorum already reached",
			minMem: 2,
			bound:  2,
			pod:    member("late", "g").Obj(),
			want:   framework.NewStatus(framework.Unschedulable),
		},
		{
			name:    "unassigned within podGroupRejectPercentage",
			args:    `{"podGroupRejectPercentage": 25}`,
			minMem:  4,
			waiting: 2,
			bound:   1,
			pod:     member("last", "g").Obj(),
			want:    framework.NewStatus(framework.Unschedulable),
		},
		{
			name:         "unassigned beyond the default 10%",
			minMem:       4,
			waiting:      2,
			bound:        1,
			pod:          member("last", "g").Obj(),
			want:         framework.NewStatus(framework.Unschedulable, "PodGroup default/g gets rejected due to Pod last is unschedulable even after PostFilter"),
			wantRejected: true,
		},
		{
			name:         "0% rejects on any failure",
			args:         `{"podGroupRejectPercentage": 0}`,
			minMem:       20,
			waiting:      2,
			bound:        17,
			pod:          member("last", "g").Obj(),
			want:         framework.NewStatus(framework.Unschedulable, "PodGroup default/g gets rejected due to Pod last is unschedulable even after PostFilter"),
			wantRejected: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*v1.Pod
			for i := range tt.bound {
				pods = append(pods, member(fmt.Sprintf("bound-%d", i), "g").SchedulerName(v1.DefaultSchedulerName).Node("n1").Obj())
			}
			e := newEnv(t, envConfig{groups: groupsOf(group("g", tt.minMem)), args: tt.args, pods: pods})
			var waiting []*v1.Pod
			var waits []<-chan *framework.Status
			for i := range tt.waiting {
				p := member(fmt.Sprintf("w-%d", i), "g").Obj()
				e.addPod(t, p)
				s, done := e.permit(t, p, nil)
				if !s.IsWait() {
					t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
				}
				waiting = append(waiting, p)
				waits = append(waits, done)
			}
			_, got := e.fwk.RunPostFilterPlugins(context.Background(), framework.NewCycleState(), tt.pod, framework.NewDefaultNodeToStatus())
			if tt.want != nil {
				tt.want = tt.want.WithPlugin(Name)
			}
			if !tt.want.Equal(got) {
				t.Errorf("PostFilter = %v, want %v", got, tt.want)
			}
			for i, done := range waits {
				select {
				case s := <-done:
					if !tt.wantRejected {
						t.Errorf("waiting member %d resolved with %v, want it still waiting", i, s)
					} else if diff := cmp.Diff("optimistic rejection in PostFilter", s.Message()); diff != "" || s.Code() != framework.Unschedulable {
						t.Errorf("waiting member %d: %v (-want +got message):\n%s", i, s, diff)
					}
				case <-time.After(100 * time.Millisecond):
					if tt.wantRejected {
						t.Errorf("waiting member %d still waits, want it rejected", i)
					}
					e.fwk.RejectWaitingPod(waiting[i].UID)
				}
			}
		})
	}
}

func TestPermitQuorum(t *testing.T) {
	pg := group("g", 3)
	e := newEnv(t, envConfig{groups: groupsOf(pg)})
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("g3", "g").Obj()}
	for _, p := range pods {
		e.addPod(t, p)
	}

	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	s, done1 := e.permit(t, pods[0], state)
	if !s.IsWait() {
		t.Fatalf("Permit(g1) = %v, want Wait", s)
	}
	if diff := cmp.Diff("1/3 members assigned", e.message(t, pods[0])); diff != "" {
		t.Errorf("g1's message (-want +got):\n%s", diff)
	}
	toActivate, err := framework.ReadAs[*framework.PodsToActivate](state, framework.PodsToActivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/g2", "default/g3"}, sortedKeys(toActivate.Take())); diff != "" {
		t.Errorf("activated siblings (-want +got):\n%s", diff)
	}
	if d := time.Until(e.fwk.GetWaitingPod(pods[0].UID).GetPendingPluginDeadlines()[Name]); d < 50*time.Second || d > time.Minute {
		t.Errorf("g1 waits %v, want the default minute", d)
	}

	// Every Wait activates the siblings again and updates every waiting
	// member's progress.
	state2 := framework.NewCycleState()
	state2.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	s, done2 := e.permit(t, pods[1], state2)
	if !s.IsWait() {
		t.Fatalf("Permit(g2) = %v, want Wait", s)
	}
	toActivate, err = framework.ReadAs[*framework.PodsToActivate](state2, framework.PodsToActivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/g1", "default/g3"}, sortedKeys(toActivate.Take())); diff != "" {
		t.Errorf("activated siblings on the second Wait (-want +got):\n%s", diff)
	}
	for _, p := range pods[:2] {
		if diff := cmp.Diff("2/3 members assigned", e.message(t, p)); diff != "" {
			t.Errorf("%s's message (-want +got):\n%s", p.Name, diff)
		}
	}

	if s, _ := e.permit(t, pods[2], nil); !s.IsSuccess() {
		t.Fatalf("Permit(g3) = %v, want Success", s)
	}
	for i, done := range []<-chan *framework.Status{done1, done2} {
		if s := e.finish(t, pods[i], done); !s.IsSuccess() {
			t.Errorf("%s's wait = %v, want allowed", pods[i].Name, s)
		}
	}
}

// TestMemberCompletingTheGangPassesWithAZeroTimeout: upstream's member that
// completes its gang returns Success, whatever the timeout; here it must not
// race its own Permit timer while HoldChanged lets the gang go.
func TestMemberCompletingTheGangPassesWithAZeroTimeout(t *testing.T) {
	tests := []struct {
		name            string
		args            string
		scheduleTimeout int32
	}{
		{name: "scheduleTimeoutSeconds and permitWaitingTimeSeconds 0", args: `{"permitWaitingTimeSeconds": 0}`},
		{name: "negative scheduleTimeoutSeconds", scheduleTimeout: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := group("g", 1)
			pg.Spec.ScheduleTimeoutSeconds = ptr.To(tt.scheduleTimeout)
			e := newEnv(t, envConfig{groups: groupsOf(pg), args: tt.args})
			for i := range 50 {
				pod := member(fmt.Sprintf("p%d", i), "g").Obj()
				e.addPod(t, pod)
				if s := e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), pod, "node-1"); !s.IsSuccess() {
					t.Fatalf("Permit(%s) = %v, want Success", pod.Name, s)
				}
			}
		})
	}
}

func sortedKeys(m map[string]*v1.Pod) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestPermit(t *testing.T) {
	tests := []struct {
		name     string
		args     string
		group    *podgroupv1alpha1.PodGroup
		pod      *v1.Pod
		want     *framework.Status
		wantWait time.Duration
	}{
		{
			name: "a pod without a group passes",
			pod:  st.MakePod().Name("p").Obj(),
		},
		{
			name: "a member of a missing group is rejected",
			pod:  member("p", "missing").Obj(),
			want: framework.NewStatus(framework.Unschedulable, "PodGroup not found").WithPlugin(Name),
		},
		{
			name:  "a group of one passes",
			group: group("g", 1),
			pod:   member("p", "g").Obj(),
		},
		{
			name:     "permitWaitingTimeSeconds",
			args:     `{"permitWaitingTimeSeconds": 30}`,
			group:    group("g", 2),
			pod:      member("p", "g").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: 30 * time.Second,
		},
		{
			name: "the group's scheduleTimeoutSeconds comes first",
			args: `{"permitWaitingTimeSeconds": 30}`,
			group: func() *podgroupv1alpha1.PodGroup {
				pg := group("g", 2)
				pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](120)
				return pg
			}(),
			pod:      member("p", "g").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: 2 * time.Minute,
		},
		{
			name: "the framework clamps at 15 minutes",
			group: func() *podgroupv1alpha1.PodGroup {
				pg := group("g", 2)
				pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](3600)
				return pg
			}(),
			pod:      member("p", "g").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: framework.MaxPermitTimeout,
		},
		{
			name:     "upstream's 60s when permitWaitingTimeSeconds is 0",
			args:     `{"permitWaitingTimeSeconds": 0}`,
			group:    group("g", 2),
			pod:      member("p", "g").Obj(),
			want:     framework.NewStatus(framework.Wait),
			wantWait: time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := groups{}
			if tt.group != nil {
				g = groupsOf(tt.group)
			}
			e := newEnv(t, envConfig{groups: g, args: tt.args, pods: []*v1.Pod{tt.pod}})
			start := time.Now()
			got := e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), tt.pod, "node-1")
			if tt.want.IsWait() != got.IsWait() || !tt.want.IsWait() && !tt.want.Equal(got) {
				t.Fatalf("Permit = %v, want %v", got, tt.want)
			}
			wp := e.fwk.GetWaitingPod(tt.pod.UID)
			if tt.wantWait == 0 {
				if wp != nil {
					t.Fatal("pod waits, want it let through or rejected")
				}
				return
			}
			defer wp.Reject(Name, "test over")
			deadline := wp.GetPendingPluginDeadlines()[Name]
			if d := deadline.Sub(start); d < tt.wantWait-time.Second || d > tt.wantWait+time.Second {
				t.Errorf("wait = %v, want %v", d, tt.wantWait)
			}
		})
	}
}

func TestUnreserveRejectsWaitingSiblings(t *testing.T) {
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("g3", "g").Obj(), member("g4", "g").Obj()}
	e := newEnv(t, envConfig{groups: groupsOf(group("g", 4)), pods: pods})
	var waits []<-chan *framework.Status
	for _, p := range pods[:3] {
		s, done := e.permit(t, p, nil)
		if !s.IsWait() {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
		waits = append(waits, done)
	}
	// g1 times out, is deleted or is rejected by another plugin.
	e.fwk.GetWaitingPod(pods[0].UID).Reject("Other", "gone")
	if s := e.finish(t, pods[0], waits[0]); s.Code() != framework.Unschedulable {
		t.Fatalf("g1's wait = %v, want rejected", s)
	}
	for i, p := range pods[1:3] {
		s := e.finish(t, p, waits[i+1])
		if s.Code() != framework.Unschedulable || s.Message() != "rejection in Unreserve" {
			t.Errorf("%s's wait = %v, want rejected in Unreserve", p.Name, s)
		}
	}
	// The group is marked failed and sorts by its failure time.
	e.clock.Step(time.Hour)
	initial := t0.Add(-time.Hour)
	qpi := func(p *v1.Pod) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: p}, Timestamp: initial, InitialAttemptTimestamp: &initial}
	}
	if e.fwk.QueueSortFunc()(qpi(pods[3]), qpi(st.MakePod().Name("solo").Obj())) {
		t.Error("a failed group's member sorts before a pod queued earlier than the failure")
	}
}

func TestBackoff(t *testing.T) {
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj()}
	e := newEnv(t, envConfig{groups: groupsOf(group("g", 2)), args: `{"podGroupBackoffSeconds": 30}`, pods: pods})
	preFilter := func() *framework.Status {
		_, s, _ := e.fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), pods[0])
		return s
	}
	if s := preFilter(); !s.IsSuccess() {
		t.Fatalf("PreFilter before any failure = %v", s)
	}
	if _, s := e.fwk.RunPostFilterPlugins(context.Background(), framework.NewCycleState(), pods[1], framework.NewDefaultNodeToStatus()); s.Message() == "" {
		t.Fatalf("PostFilter = %v, want the group rejected", s)
	}
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, "podGroup default/g failed recently").WithPlugin(Name)
	if s := preFilter(); !want.Equal(s) {
		t.Fatalf("PreFilter during backoff = %v, want %v", s, want)
	}
	// A second failure does not extend the backoff.
	e.clock.Step(20 * time.Second)
	e.fwk.RunPostFilterPlugins(context.Background(), framework.NewCycleState(), pods[1], framework.NewDefaultNodeToStatus())
	e.clock.Step(10 * time.Second)
	if s := preFilter(); !s.IsSuccess() {
		t.Fatalf("PreFilter after backoff = %v", s)
	}
}

func TestEventsToRegister(t *testing.T) {
	e := newEnv(t, envConfig{groups: groups{}})
	want := []st.Registration{
		{Event: framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.Add}},
		{Event: framework.ClusterEvent{Resource: PodGroupEvents, ActionType: framework.Add | framework.Update}},
	}
	if diff := cmp.Diff(want, st.Registrations(t, e.fwk, Name)); diff != "" {
		t.Errorf("registrations (-want +got):\n%s", diff)
	}
}

// TestNoPartialGang is upstream's partial-gang race, made deterministic: a
// waiting member is rejected (as a timeout or deletion would) and the last
// member reaches Permit before the rejected one's Unreserve ran.
func TestNoPartialGang(t *testing.T) {
	pods := []*v1.Pod{member("g1", "g").Obj(), member("g2", "g").Obj(), member("g3", "g").Obj(), member("g4", "g").Obj()}
	e := newEnv(t, envConfig{groups: groupsOf(group("g", 4)), pods: pods})
	var waits []<-chan *framework.Status
	for _, p := range pods[:3] {
		s, done := e.permit(t, p, nil)
		if !s.IsWait() {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
		}
		waits = append(waits, done)
	}
	e.fwk.GetWaitingPod(pods[1].UID).Reject("Other", "timed out")

	s, done4 := e.permit(t, pods[3], nil)
	if !s.IsWait() {
		t.Fatalf("Permit(g4) = %v, want Wait: a member was already rejected", s)
	}
	for _, i := range []int{0, 2} {
		select {
		case s := <-waits[i]:
			t.Fatalf("%s resolved with %v, want it still waiting", pods[i].Name, s)
		default:
		}
	}
	// The rejected member's Unreserve now runs and takes the gang back.
	if s := e.finish(t, pods[1], waits[1]); s.Code() != framework.Unschedulable {
		t.Fatalf("g2's wait = %v, want rejected", s)
	}
	for i, done := range []<-chan *framework.Status{waits[0], waits[2], done4} {
		if s := <-done; s.IsSuccess() {
			t.Errorf("member %d was allowed, want the gang rejected", i)
		}
	}
}

// TestNoPartialGangStress races rejections of waiting members against the
// last member's Permit: either every member is admitted or none is.
func TestNoPartialGangStress(t *testing.T) {
	const minMember = 5
	for round := range 50 {
		pods := make([]*v1.Pod, minMember)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("r%d-m%d", round, i), "g").Obj()
		}
		e := newEnv(t, envConfig{groups: groupsOf(group("g", minMember)), pods: pods})
		results := make([]<-chan *framework.Status, minMember)
		for i, p := range pods[:minMember-1] {
			s, done := e.permit(t, p, nil)
			if !s.IsWait() {
				t.Fatalf("Permit(%s) = %v, want Wait", p.Name, s)
			}
			results[i] = done
		}
		var wg sync.WaitGroup
		for _, i := range []int{round % (minMember - 1), (round + 1) % (minMember - 1)} {
			wg.Go(func() {
				if wp := e.fwk.GetWaitingPod(pods[i].UID); wp != nil {
					wp.Reject("Other", "timed out")
				}
			})
		}
		var last *framework.Status
		var lastDone <-chan *framework.Status
		wg.Go(func() {
			last = e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), pods[minMember-1], "node-1")
			if last.IsWait() {
				ch := make(chan *framework.Status, 1)
				go func() { ch <- e.fwk.WaitOnPermit(context.Background(), pods[minMember-1]) }()
				lastDone = ch
			}
		})
		wg.Wait()

		admitted := 0
		if last.IsSuccess() {
			admitted++
		} else if !last.IsWait() {
			t.Fatalf("round %d: last member's Permit = %v", round, last)
		} else {
			results[minMember-1] = lastDone
		}
		// Unreserve the failures as binding cycles would, concurrently.
		var mu sync.Mutex
		var uwg sync.WaitGroup
		for i, done := range results {
			if done == nil {
				continue
			}
			uwg.Go(func() {
				if e.finish(t, pods[i], done).IsSuccess() {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			})
		}
		uwg.Wait()
		if admitted != 0 && admitted != minMember {
			t.Fatalf("round %d: %d of %d members admitted, want all or none", round, admitted, minMember)
		}
	}
}
