package profiles

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// fakeFramework records Close and holds waiting pods; the Set only needs
// those parts of an instance, so the rest of the interface stays nil.
type fakeFramework struct {
	framework.Framework
	mu      sync.Mutex
	closed  int
	waiting []*fakeWaitingPod
	// permit are the Permit plugins it runs.
	permit []string
}

func (f *fakeFramework) ListPlugins() *configv1.Plugins {
	out := &configv1.Plugins{}
	for _, name := range f.permit {
		out.Permit.Enabled = append(out.Permit.Enabled, configv1.Plugin{Name: name})
	}
	return out
}

func (f *fakeFramework) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeFramework) closeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *fakeFramework) IterateOverWaitingPods(fn func(framework.WaitingPod)) {
	for _, wp := range f.waiting {
		fn(wp)
	}
}

func (f *fakeFramework) GetWaitingPod(uid types.UID) framework.WaitingPod {
	for _, wp := range f.waiting {
		if wp.uid == uid {
			return wp
		}
	}
	return nil
}

type fakeWaitingPod struct {
	framework.WaitingPod
	uid      types.UID
	rejected string
}

func (w *fakeWaitingPod) Reject(_, msg string) bool {
	w.rejected = msg
	return true
}

func TestPublishRetiresOldInstanceAfterLastRelease(t *testing.T) {
	s := NewSet(klog.Background())
	v1, v2 := &fakeFramework{}, &fakeFramework{}
	s.Publish("p", v1)

	ref, ok := s.Acquire("p")
	if !ok || ref.Framework() != v1 {
		t.Fatalf("Acquire = %v, %v; want v1", ref.Framework(), ok)
	}
	s.Publish("p", v2)
	if got := s.Get("p"); got != v2 {
		t.Fatalf("Get after Publish = %v, want v2", got)
	}
	if v1.closeCount() != 0 || s.Retiring() != 1 {
		t.Fatalf("v1 closed %d times with a cycle still holding it (retiring %d)", v1.closeCount(), s.Retiring())
	}
	ref.Release()
	if v1.closeCount() != 1 || s.Retiring() != 0 {
		t.Fatalf("v1 closed %d times after its last release (retiring %d), want 1 (0)", v1.closeCount(), s.Retiring())
	}
	if v2.closeCount() != 0 {
		t.Fatal("serving instance closed")
	}
}

func TestRemoveRejectsWaitingPodsAndCloses(t *testing.T) {
	s := NewSet(klog.Background())
	wp := &fakeWaitingPod{uid: "u1"}
	fwk := &fakeFramework{waiting: []*fakeWaitingPod{wp}}
	s.Publish("p", fwk)
	ref, _ := s.Acquire("p")

	if got, name := s.GetWaitingPod("u1"); got != wp || name != "p" {
		t.Fatalf("GetWaitingPod = %v, %q", got, name)
	}
	if !s.Remove("p", "profile p was deleted") {
		t.Fatal("Remove of a served profile reported false")
	}
	if wp.rejected != "profile p was deleted" {
		t.Fatalf("waiting pod rejected with %q", wp.rejected)
	}
	if _, ok := s.Acquire("p"); ok {
		t.Fatal("Acquire succeeded after Remove")
	}
	// Still findable while its binding cycle runs, then closed.
	if got, _ := s.GetWaitingPod("u1"); got != wp {
		t.Fatal("waiting pod of a retiring instance not found")
	}
	ref.Release()
	if fwk.closeCount() != 1 {
		t.Fatalf("closed %d times, want 1", fwk.closeCount())
	}
	if s.Remove("p", "again") {
		t.Fatal("Remove of an unknown profile reported true")
	}
}

func TestRemoveRejectsWaitingPodsOfEveryGeneration(t *testing.T) {
	tests := []struct {
		name string
		// publish is how many generations of "p" are published in turn;
		// each holds one waiting pod, named by its generation.
		publish int
		// release ends the cycles holding these generations (1-based)
		// before Remove, so they are closed and gone.
		release []int
		want    map[types.UID]string
	}{{
		name:    "serving only",
		publish: 1,
		want:    map[types.UID]string{"g1": "SchedulingProfile p was deleted"},
	}, {
		name:    "serving and retiring generations",
		publish: 3,
		want: map[types.UID]string{
			"g1": "SchedulingProfile p was deleted",
			"g2": "SchedulingProfile p was deleted",
			"g3": "SchedulingProfile p was deleted",
		},
	}, {
		name:    "a generation already closed is left alone",
		publish: 2,
		release: []int{1},
		want: map[types.UID]string{
			"g1": "",
			"g2": "SchedulingProfile p was deleted",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet(klog.Background())
			other := &fakeWaitingPod{uid: "other"}
			s.Publish("q", &fakeFramework{waiting: []*fakeWaitingPod{other}})
			var pods []*fakeWaitingPod
			var refs []Ref
			for i := 1; i <= tc.publish; i++ {
				wp := &fakeWaitingPod{uid: types.UID(fmt.Sprintf("g%d", i))}
				pods = append(pods, wp)
				s.Publish("p", &fakeFramework{waiting: []*fakeWaitingPod{wp}})
				// The waiting pod's binding cycle holds its instance.
				ref, _ := s.Acquire("p")
				refs = append(refs, ref)
			}
			for _, i := range tc.release {
				refs[i-1].Release()
			}

			if !s.Remove("p", "SchedulingProfile p was deleted") {
				t.Fatal("Remove of a served profile reported false")
			}
			got := map[types.UID]string{}
			for _, wp := range pods {
				got[wp.uid] = wp.rejected
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rejections (-want +got):\n%s", diff)
			}
			if other.rejected != "" {
				t.Errorf("pod of another profile rejected with %q", other.rejected)
			}
		})
	}
}

func TestSubscribersSeeChangesInOrder(t *testing.T) {
	s := NewSet(klog.Background())
	var got []string
	s.Subscribe(func(name string, fwk framework.Framework) {
		if fwk == nil {
			got = append(got, "-"+name)
			return
		}
		got = append(got, "+"+name)
	})
	s.Publish("a", &fakeFramework{})
	s.Publish("b", &fakeFramework{})
	s.Publish("a", &fakeFramework{})
	s.Remove("b", "gone")
	if diff := cmp.Diff([]string{"+a", "+b", "+a", "-b"}, got); diff != "" {
		t.Fatalf("notifications (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, s.Names()); diff != "" {
		t.Fatalf("Names (-want +got):\n%s", diff)
	}
}

func TestConcurrentAcquireAndPublishCloseEachInstanceOnce(t *testing.T) {
	s := NewSet(klog.Background())
	const versions = 50
	instances := make([]*fakeFramework, versions)
	for i := range instances {
		instances[i] = &fakeFramework{}
	}
	s.Publish("p", instances[0])

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				if ref, ok := s.Acquire("p"); ok {
					ref.Release()
				}
			}
		})
	}
	for _, fwk := range instances[1:] {
		s.Publish("p", fwk)
	}
	wg.Wait()
	s.Remove("p", "done")
	for i, fwk := range instances {
		if n := fwk.closeCount(); n != 1 {
			t.Errorf("instance %d closed %d times, want 1", i, n)
		}
	}
}

func TestWaitingPodRunsPermitAsksTheInstanceHoldingThePod(t *testing.T) {
	s := NewSet(klog.Background())
	// The gang profile's first generation runs Coscheduling; its second,
	// published while a pod still waits in the first, does not.
	first := &fakeFramework{permit: []string{"Coscheduling", "ManualApproval"}, waiting: []*fakeWaitingPod{{uid: "in-first"}}}
	s.Publish("gangs", first)
	ref, _ := s.Acquire("gangs")
	defer ref.Release()
	s.Publish("gangs", &fakeFramework{permit: []string{"ManualApproval"}, waiting: []*fakeWaitingPod{{uid: "in-second"}}})
	s.Publish("approvals", &fakeFramework{permit: []string{"ManualApproval"}, waiting: []*fakeWaitingPod{{uid: "approval"}}})

	for _, tc := range []struct {
		uid    types.UID
		plugin string
		want   bool
	}{
		{uid: "in-first", plugin: "Coscheduling", want: true},
		{uid: "in-second", plugin: "Coscheduling", want: false},
		{uid: "in-second", plugin: "ManualApproval", want: true},
		{uid: "approval", plugin: "Coscheduling", want: false},
		{uid: "not-held", plugin: "ManualApproval", want: false},
	} {
		if got := s.WaitingPodRunsPermit(tc.uid, tc.plugin); got != tc.want {
			t.Errorf("WaitingPodRunsPermit(%s, %s) = %v, want %v", tc.uid, tc.plugin, got, tc.want)
		}
	}
}

// TestWaitingInRetiring: only the pods of name's replaced instances still
// in use are visited, each with its instance, and fn may reject them.
func TestWaitingInRetiring(t *testing.T) {
	s := NewSet(klog.Background())
	s.Publish("q", &fakeFramework{waiting: []*fakeWaitingPod{{uid: "other"}}})
	var instances []*fakeFramework
	for i := 1; i <= 3; i++ {
		fwk := &fakeFramework{waiting: []*fakeWaitingPod{{uid: types.UID(fmt.Sprintf("g%d", i))}}}
		instances = append(instances, fwk)
		s.Publish("p", fwk)
		if i < 3 {
			// Generation 1's last cycle ends below; generation 2's holds it.
			ref, _ := s.Acquire("p")
			if i == 1 {
				ref.Release()
			}
		}
	}
	got := map[types.UID]int{}
	s.WaitingInRetiring("p", func(fwk framework.Framework, wp framework.WaitingPod) {
		got[wp.(*fakeWaitingPod).uid] = slices.Index(instances, fwk.(*fakeFramework)) + 1
		wp.Reject("", "released")
	})
	if diff := cmp.Diff(map[types.UID]int{"g2": 2}, got); diff != "" {
		t.Errorf("visited pods and their generation (-want +got):\n%s", diff)
	}
	if r := instances[1].waiting[0].rejected; r != "released" {
		t.Errorf("g2 rejected with %q, want released", r)
	}
}
