package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of xs by the
// nearest-rank method: the smallest value such that at least p% of the
// values are less than or equal to it. It returns 0 for no values. xs need
// not be sorted and is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Summary is the distribution of a sample.
type Summary struct {
	N                  int
	P50, P95, P99, Max float64
}

// Summarize returns the nearest-rank p50, p95, p99 and the maximum of xs.
func Summarize(xs []float64) Summary {
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := Summary{N: len(s)}
	if len(s) == 0 {
		return sum
	}
	sum.P50 = percentileSorted(s, 50)
	sum.P95 = percentileSorted(s, 95)
	sum.P99 = percentileSorted(s, 99)
	sum.Max = s[len(s)-1]
	return sum
}

// Millis converts a duration to fractional milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Jain returns Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when every
// value is equal, 1/n when one value has everything. It returns 1 for no
// values or all zeros (nobody got anything, equally).
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
