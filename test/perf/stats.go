package main

import (
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Summary is a distribution: average and percentiles, as scheduler_perf
// reports them.
type Summary struct {
	Average float64 `json:"average"`
	Perc50  float64 `json:"perc50"`
	Perc90  float64 `json:"perc90"`
	Perc95  float64 `json:"perc95"`
	Perc99  float64 `json:"perc99"`
	// Samples is how many values (per-second throughputs, or observations)
	// the percentiles come from.
	Samples int `json:"samples"`
}

// summarize returns the percentiles of values; average is given, since a
// throughput's average is pods over time rather than the samples' mean.
func summarize(values []float64, average float64) Summary {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return Summary{
		Average: average,
		Perc50:  testenv.Percentile(sorted, 50),
		Perc90:  testenv.Percentile(sorted, 90),
		Perc95:  testenv.Percentile(sorted, 95),
		Perc99:  testenv.Percentile(sorted, 99),
		Samples: len(sorted),
	}
}

// perSecond turns cumulative counts sampled once a second into the counts
// of each second, leaving out the seconds before the first pod and the
// last, partial second.
func perSecond(cumulative []int) []float64 {
	var out []float64
	prev := 0
	started := false
	for _, c := range cumulative {
		d := c - prev
		prev = c
		if !started && d == 0 {
			continue
		}
		started = true
		out = append(out, float64(d))
	}
	return out
}

// histogram is a cumulative Prometheus histogram: upper bounds and counts.
type histogram struct {
	bounds []float64
	counts []uint64 // cumulative, per bound
	count  uint64
	sum    float64
}

func histogramOf(h *dto.Histogram) histogram {
	out := histogram{count: h.GetSampleCount(), sum: h.GetSampleSum()}
	for _, b := range h.GetBucket() {
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.counts = append(out.counts, b.GetCumulativeCount())
	}
	return out
}

// minus returns h less an earlier reading of the same histogram.
func (h histogram) minus(before histogram) histogram {
	if before.count == 0 {
		return h
	}
	out := histogram{bounds: h.bounds, count: h.count - before.count, sum: h.sum - before.sum}
	for i := range h.counts {
		out.counts = append(out.counts, h.counts[i]-before.counts[i])
	}
	return out
}

// quantile estimates quantile q (0..1) as Prometheus' histogram_quantile:
// linear interpolation within the bucket that holds it.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	rank := q * float64(h.count)
	lower, below := 0.0, uint64(0)
	for i, upper := range h.bounds {
		if float64(h.counts[i]) >= rank {
			inBucket := float64(h.counts[i] - below)
			if inBucket == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/inBucket
		}
		lower, below = upper, h.counts[i]
	}
	// Beyond the last bound: report the last bound, as Prometheus does.
	return lower
}

func (h histogram) summary() Summary {
	avg := 0.0
	if h.count > 0 {
		avg = h.sum / float64(h.count)
	}
	return Summary{
		Average: avg,
		Perc50:  h.quantile(0.50),
		Perc90:  h.quantile(0.90),
		Perc95:  h.quantile(0.95),
		Perc99:  h.quantile(0.99),
		Samples: int(h.count),
	}
}
