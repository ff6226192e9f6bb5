package main

import (
	"encoding/json"
	"math"
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

func TestSummaryBeyondTheLastBucket(t *testing.T) {
	// 10 observations: 5 up to 1, 3 more up to 2, 2 beyond 2 (le="+Inf").
	h := histogram{bounds: []float64{1, 2, math.Inf(1)}, counts: []uint64{5, 8, 10}, count: 10, sum: 40}
	got := h.summary()
	inf := Percentile(math.Inf(1))
	want := Summary{Average: 4, Perc50: 1, Perc90: inf, Perc95: inf, Perc99: inf, Samples: 10, Exceeds: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}

	data, err := json.Marshal(Result{AttemptLatency: got})
	if err != nil {
		t.Fatalf("a result with percentiles beyond the last bucket: %v", err)
	}
	var latency struct {
		Latency map[string]any `json:"attemptLatencySeconds"`
	}
	if err := json.Unmarshal(data, &latency); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{"average": 4.0, "perc50": 1.0, "perc90": nil, "perc95": nil, "perc99": nil, "samples": 10.0, "nullPercentilesExceed": 2.0}
	if diff := cmp.Diff(wantJSON, latency.Latency); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back.AttemptLatency); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		p    Percentile
		want string
	}{{got.Perc50, "1000.00"}, {got.Perc99, ">2000.00"}} {
		if s := got.format(tc.p, 1000, "%.2f"); s != tc.want {
			t.Errorf("format(%v) = %q, want %q", tc.p, s, tc.want)
		}
	}
}
