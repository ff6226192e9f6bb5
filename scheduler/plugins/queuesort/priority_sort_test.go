package queuesort_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

func TestPrioritySort(t *testing.T) {
	fwk := st.NewFramework(t, plugins.NewInTreeRegistry(), st.PluginProfile(st.Plugin(queuesort.Name, 0)), nil)
	less := fwk.QueueSortFunc()
	now := time.Now()
	queued := func(pw *st.PodWrapper, at time.Time) *framework.QueuedPodInfo {
		pi, err := framework.NewPodInfo(pw.Obj())
		if err != nil {
			t.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, Timestamp: at}
	}
	tests := []struct {
		name string
		a, b *framework.QueuedPodInfo
		want bool
	}{
		{"higher priority first", queued(st.MakePod().Name("a").Priority(100), now), queued(st.MakePod().Name("b").Priority(10), now.Add(-time.Hour)), true},
		{"lower priority later", queued(st.MakePod().Name("a").Priority(10), now.Add(-time.Hour)), queued(st.MakePod().Name("b").Priority(100), now), false},
		{"equal priority, earlier first", queued(st.MakePod().Name("a").Priority(5), now.Add(-time.Second)), queued(st.MakePod().Name("b").Priority(5), now), true},
		{"equal priority, later second", queued(st.MakePod().Name("a").Priority(5), now), queued(st.MakePod().Name("b").Priority(5), now.Add(-time.Second)), false},
		{"unset priority is 0", queued(st.MakePod().Name("a"), now), queued(st.MakePod().Name("b").Priority(-1), now), true},
		{"same priority and time is not less", queued(st.MakePod().Name("a"), now), queued(st.MakePod().Name("b"), now), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, less(tt.a, tt.b)); diff != "" {
				t.Errorf("Less (-want +got):\n%s", diff)
			}
		})
	}
}
