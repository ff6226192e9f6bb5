package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cumulative []int
		want       []float64
	}{
		{"leading idle seconds are left out", []int{0, 0, 5, 12, 20}, []float64{5, 7, 8}},
		{"an idle second in between counts", []int{3, 3, 9}, []float64{3, 0, 6}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, perSecond(tc.cumulative)); diff != "" {
				t.Errorf("perSecond (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHistogramQuantile(t *testing.T) {
	// 10 observations: 4 up to 1, 4 more up to 2, 2 more up to 4.
	h := histogram{bounds: []float64{1, 2, 4}, counts: []uint64{4, 8, 10}, count: 10, sum: 15}
	for _, tc := range []struct {
		q, want float64
	}{{0.2, 0.5}, {0.4, 1}, {0.6, 1.5}, {0.9, 3}, {1, 4}} {
		if got := h.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	before := histogram{bounds: []float64{1, 2, 4}, counts: []uint64{4, 4, 4}, count: 4, sum: 2}
	delta := h.minus(before)
	if diff := cmp.Diff([]uint64{0, 4, 6}, delta.counts); diff != "" {
		t.Errorf("minus (-want +got):\n%s", diff)
	}
	if got := delta.summary(); got.Samples != 6 || got.Average != 13.0/6 {
		t.Errorf("summary = %+v, want 6 samples averaging %v", got, 13.0/6)
	}
	if got := (histogram{}).quantile(0.5); got != 0 {
		t.Errorf("quantile of an empty histogram = %v, want 0", got)
	}
}
