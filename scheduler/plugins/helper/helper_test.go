package helper

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

func TestDefaultNormalizeScore(t *testing.T) {
	tests := []struct {
		name    string
		reverse bool
		scores  []int64
		want    []int64
	}{
		{name: "scales to max", scores: []int64{1, 2, 3, 4, 5}, want: []int64{20, 40, 60, 80, 100}},
		{name: "reversed", reverse: true, scores: []int64{1, 2, 3, 4, 5}, want: []int64{80, 60, 40, 20, 0}},
		{name: "truncates like upstream", scores: []int64{1, 1000, 7}, want: []int64{0, 100, 0}},
		{name: "all zero stays zero", scores: []int64{0, 0}, want: []int64{0, 0}},
		{name: "all zero reversed is max", reverse: true, scores: []int64{0, 0}, want: []int64{100, 100}},
		{name: "empty", scores: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := make(framework.NodeScoreList, len(tt.scores))
			for i, s := range tt.scores {
				list[i].Score = s
			}
			if s := DefaultNormalizeScore(framework.MaxNodeScore, tt.reverse, list); !s.IsSuccess() {
				t.Fatalf("status: %v", s)
			}
			var got []int64
			for _, ns := range list {
				got = append(got, ns.Score)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAs(t *testing.T) {
	pod := &v1.Pod{}
	node := &v1.Node{}
	oldPod, newPod, err := As[*v1.Pod](cache.DeletedFinalStateUnknown{Obj: pod}, nil)
	if err != nil || oldPod != pod || newPod != nil {
		t.Errorf("tombstone: got %v, %v, %v", oldPod, newPod, err)
	}
	if _, _, err := As[*v1.Pod](nil, node); err == nil {
		t.Error("a node must not convert to a pod")
	}
	if _, _, err := As[*v1.Pod](node, nil); err == nil {
		t.Error("an old node must not convert to a pod")
	}
}
