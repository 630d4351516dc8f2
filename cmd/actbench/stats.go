package main

import (
	"slices"
	"time"
)

// latencies collects request or message latencies of one repetition.
type latencies []time.Duration

// quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank method,
// or 0 for no samples. It sorts l.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	rank := int(q*float64(len(l))+0.5) - 1
	return l[min(max(rank, 0), len(l)-1)]
}

// summary is what a report row shows of a latency distribution.
type summary struct {
	P50, P99, Max time.Duration
	N             int
}

func (l latencies) summary() summary {
	return summary{P50: l.quantile(0.50), P99: l.quantile(0.99), Max: l.quantile(1), N: len(l)}
}

// ms expresses d in milliseconds, the unit every latency row uses.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSecond is n events over d.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// spread is one figure over the repetitions: its median, min and max.
type spread struct {
	Median, Min, Max float64
	N                int
}

// spreadOf summarises the values of the repetitions (the median of an even
// count is the mean of the middle two).
func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	mid := len(v) / 2
	median := v[mid]
	if len(v)%2 == 0 {
		median = (v[mid-1] + v[mid]) / 2
	}
	return spread{Median: median, Min: v[0], Max: v[len(v)-1], N: len(v)}
}
