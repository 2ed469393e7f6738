// Package stats holds the small statistics every etcdscope report shares:
// exact quantiles over recorded samples and a per-series summary.
//
// Quantiles are exact order statistics (no sketch) as long as a report
// holds them in bounded memory: users compare them with fio's and
// blktrace's numbers, so an approximation error would be a reason to
// distrust every column. Past ExactLimit values a Series bins them exactly
// as fio bins its completion latencies, so its quantiles are then fio's own
// (within 0.8% of exact) and say so (Summary.Binned).
package stats

import (
	"math"
	"slices"
)

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted, by the
// nearest-rank method that fio uses for its completion-latency
// percentiles: the smallest sample with at least q·n samples ≤ it.
// It returns 0 for an empty slice. sorted must be ascending.
func Quantile(sorted []int64, q float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[n-1]
	}
	rank := int(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Summary is count, sum and order statistics of a series of durations or
// sizes, all in the series' own unit (ns for latencies).
type Summary struct {
	Count int64 `json:"count"`
	Sum   int64 `json:"sum"`
	Min   int64 `json:"min"`
	P50   int64 `json:"p50"`
	P90   int64 `json:"p90"`
	P99   int64 `json:"p99"`
	Max   int64 `json:"max"`
	// Binned: P50/P90/P99 are fio's binned quantiles (within 0.8%), not
	// exact order statistics: the series outgrew ExactLimit (Series).
	Binned bool `json:"binned,omitempty"`
}

// Mean returns Sum/Count, or 0 when empty.
func (s Summary) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// Summarize sorts values in place and returns their Summary.
func Summarize(values []int64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	slices.Sort(values) // no reflection: the report sorts every call's total and layers
	var sum int64
	for _, v := range values {
		sum += v
	}
	return Summary{
		Count: int64(len(values)),
		Sum:   sum,
		Min:   values[0],
		P50:   Quantile(values, 0.50),
		P90:   Quantile(values, 0.90),
		P99:   Quantile(values, 0.99),
		Max:   values[len(values)-1],
	}
}
