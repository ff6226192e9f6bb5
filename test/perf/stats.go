package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Summary is a distribution: average and percentiles, as scheduler_perf
// reports them.
type Summary struct {
	Average float64    `json:"average"`
	Perc50  Percentile `json:"perc50"`
	Perc90  Percentile `json:"perc90"`
	Perc95  Percentile `json:"perc95"`
	Perc99  Percentile `json:"perc99"`
	// Samples is how many values (per-second throughputs, or observations)
	// the percentiles come from.
	Samples int `json:"samples"`
	// Exceeds, for a summary of a histogram, is its last finite bucket
	// bound when a percentile lies beyond it: that percentile is known
	// only to be larger, so it is +Inf here and null in JSON.
	Exceeds float64 `json:"nullPercentilesExceed,omitempty"`
}

// Percentile is one percentile of a Summary. +Inf stands for a value
// beyond the last finite bucket of a histogram (Summary.Exceeds); JSON
// has no infinity, so it is written as null and read back as +Inf.
type Percentile float64

// MarshalJSON writes +Inf as null.
func (p Percentile) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(p), 1) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(p))
}

// UnmarshalJSON reads null as +Inf.
func (p *Percentile) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*p = Percentile(math.Inf(1))
		return nil
	}
	return json.Unmarshal(data, (*float64)(p))
}

// format prints p with verb, scaled by unit; a percentile beyond the last
// finite bucket prints as that bound, scaled, after ">".
func (s Summary) format(p Percentile, unit float64, verb string) string {
	if math.IsInf(float64(p), 1) {
		return ">" + fmt.Sprintf(verb, unit*s.Exceeds)
	}
	return fmt.Sprintf(verb, unit*float64(p))
}

// summarize returns the percentiles of values; average is given, since a
// throughput's average is pods over time rather than the samples' mean.
func summarize(values []float64, average float64) Summary {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return Summary{
		Average: average,
		Perc50:  Percentile(testenv.Percentile(sorted, 50)),
		Perc90:  Percentile(testenv.Percentile(sorted, 90)),
		Perc95:  Percentile(testenv.Percentile(sorted, 95)),
		Perc99:  Percentile(testenv.Percentile(sorted, 99)),
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
// linear interpolation within the bucket that holds it. Where that is the
// +Inf bucket, Prometheus reports the last finite bound, which is only a
// lower bound of the quantile; this says +Inf instead (Summary.Exceeds).
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	rank := q * float64(h.count)
	lower, below := 0.0, uint64(0)
	for i, upper := range h.bounds {
		if float64(h.counts[i]) >= rank {
			if math.IsInf(upper, 1) {
				return upper
			}
			inBucket := float64(h.counts[i] - below)
			if inBucket == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/inBucket
		}
		lower, below = upper, h.counts[i]
	}
	// Beyond the last bound of a histogram without a +Inf bucket (never
	// the case in the text format): report the last bound.
	return lower
}

func (h histogram) summary() Summary {
	avg := 0.0
	if h.count > 0 {
		avg = h.sum / float64(h.count)
	}
	s := Summary{
		Average: avg,
		Perc50:  Percentile(h.quantile(0.50)),
		Perc90:  Percentile(h.quantile(0.90)),
		Perc95:  Percentile(h.quantile(0.95)),
		Perc99:  Percentile(h.quantile(0.99)),
		Samples: int(h.count),
	}
	if math.IsInf(float64(s.Perc99), 1) {
		s.Exceeds = h.lastFiniteBound()
	}
	return s
}

// lastFiniteBound is the largest bucket bound below +Inf, 0 if none.
func (h histogram) lastFiniteBound() float64 {
	for i := len(h.bounds) - 1; i >= 0; i-- {
		if !math.IsInf(h.bounds[i], 1) {
			return h.bounds[i]
		}
	}
	return 0
}
