package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSortedScoredNodes(t *testing.T) {
	tests := []struct {
		name   string
		scores []NodePluginScores
		want   []string
	}{
		{
			name:   "highest total first",
			scores: []NodePluginScores{{Name: "a", TotalScore: 10}, {Name: "b", TotalScore: 30}, {Name: "c", TotalScore: 20}},
			want:   []string{"b", "c", "a"},
		},
		{
			name: "ties go to the larger randomizer",
			scores: []NodePluginScores{
				{Name: "a", TotalScore: 30, Randomizer: 1}, {Name: "b", TotalScore: 30, Randomizer: 7},
				{Name: "c", TotalScore: 10, Randomizer: 9}, {Name: "d", TotalScore: 30, Randomizer: 3},
			},
			want: []string{"b", "d", "a", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSortedScoredNodes(tt.scores)
			if got := len(s.UnorderedList()); got != len(tt.want) {
				t.Fatalf("UnorderedList has %d entries, want %d", got, len(tt.want))
			}
			var got []string
			for s.Len() > 0 {
				got = append(got, s.Pop().Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
	var none *SortedScoredNodes
	if none.Len() != 0 {
		t.Error("a nil list must be empty")
	}
}
