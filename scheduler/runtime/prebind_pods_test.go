package runtime

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestPodInPreBind pins upstream's rule between preemption and the binding
// cycle: whichever of CancelPod and MarkPrebound comes first wins, and a
// second CancelPod neither fails nor replaces the first cause.
func TestPodInPreBind(t *testing.T) {
	type result struct {
		Cancels  []bool
		Prebound bool
		Cause    string
	}
	for _, tc := range []struct {
		name string
		// steps: "cancel" or "mark", in order.
		steps []string
		want  result
	}{
		{name: "cancelled", steps: []string{"cancel", "mark"}, want: result{Cancels: []bool{true}, Prebound: false, Cause: "preempted by first"}},
		{name: "cancelled twice", steps: []string{"cancel", "cancel", "mark"}, want: result{Cancels: []bool{true, true}, Prebound: false, Cause: "preempted by first"}},
		{name: "prebound first", steps: []string{"mark", "cancel"}, want: result{Cancels: []bool{false}, Prebound: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewPodsInPreBind()
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			const uid = types.UID("uid")
			m.add(uid, cancel)
			p := m.get(uid)
			reasons := []string{"preempted by first", "preempted by second"}
			var got result
			for _, step := range tc.steps {
				switch step {
				case "cancel":
					got.Cancels = append(got.Cancels, p.CancelPod(reasons[len(got.Cancels)]))
				case "mark":
					got.Prebound = p.MarkPrebound()
				}
			}
			if err := context.Cause(ctx); err != nil {
				got.Cause = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			select {
			case <-p.Done():
				t.Fatal("Done closed before remove")
			default:
			}
			m.remove(uid)
			if m.get(uid) != nil {
				t.Error("the pod is still in the map after remove")
			}
			select {
			case <-p.Done():
			default:
				t.Error("Done not closed by remove")
			}
			m.remove(uid) // a second remove is a no-op
		})
	}
}
