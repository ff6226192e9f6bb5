package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPodGroupStatusCoalescing: a condition replaced before it was sent
// leaves the PodGroup as upstream's two patches would: the last condition,
// transitioned when the status last changed.
func TestPodGroupStatusCoalescing(t *testing.T) {
	earlier := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	unschedulable := func(msg string) *metav1.Condition {
		return &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
			Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: msg}
	}
	tests := []struct {
		name   string
		second *metav1.Condition
		// wantLTT checks the written lastTransitionTime against the
		// times just before and after the cycle asked.
		wantLTT func(got metav1.Time, before, after time.Time) bool
	}{
		{
			name:    "same status: the first one's transition time is kept",
			second:  unschedulable("0/3 nodes are available"),
			wantLTT: func(got metav1.Time, _, _ time.Time) bool { return got.Equal(&earlier) },
		},
		{
			name:   "another status: it transitions when the cycle asked",
			second: &metav1.Condition{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"},
			wantLTT: func(got metav1.Time, before, after time.Time) bool {
				// The API keeps whole seconds.
				return !got.Time.Before(before.Truncate(time.Second)) && !got.After(after)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Generation: 1}}
			cs := fake.NewClientset(pg)
			u := newPodGroupStatusUpdater(cs, nil)
			first := unschedulable("waiting for minCount")
			first.LastTransitionTime = earlier
			// Both asked for before the writer runs: the second replaces
			// the first, which is never sent.
			before := time.Now()
			u.update(pg, first)
			u.update(pg, tt.second)
			after := time.Now()
			// Sent a second later than asked (the API keeps whole
			// seconds), so a time stamped when sent shows.
			time.Sleep(1100 * time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				u.run(ctx)
			}()
			var got *schedulingv1beta1.PodGroup
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
				var err error
				got, err = cs.SchedulingV1beta1().PodGroups("ns").Get(ctx, "g", metav1.GetOptions{})
				return err == nil && len(got.Status.Conditions) > 0, err
			})
			cancel()
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Conditions) != 1 {
				t.Fatalf("conditions = %v, want one", got.Status.Conditions)
			}
			if n := countPatches(cs); n != 1 {
				t.Errorf("%d status patches, want 1", n)
			}
			c := got.Status.Conditions[0]
			want := *tt.second
			want.ObservedGeneration = 1
			if diff := cmp.Diff(want, c, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("condition (-want +got):\n%s", diff)
			}
			if !tt.wantLTT(c.LastTransitionTime, before, after) {
				t.Errorf("lastTransitionTime = %v (the first condition's was %v; asked between %v and %v)", c.LastTransitionTime, earlier, before, after)
			}
		})
	}
}

// countPatches counts the patches cs was sent.
func countPatches(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}
