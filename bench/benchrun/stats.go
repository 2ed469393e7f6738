package main

import (
	"math/rand/v2"
	"slices"
)

// spread summarises paired samples: the median, a 95% confidence interval
// of the median by bootstrap (2000 resamples, fixed seed so a rerun on the
// same numbers prints the same interval), and the extremes.
type spread struct {
	N              int
	Median, Lo, Hi float64 // Lo..Hi: 95% CI of the median
	Min, Max       float64
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func summarize(xs []float64) spread {
	sp := spread{N: len(xs)}
	if len(xs) == 0 {
		return sp
	}
	sp.Median = median(xs)
	sp.Min, sp.Max = slices.Min(xs), slices.Max(xs)
	r := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, 2000)
	buf := make([]float64, len(xs))
	for i := range meds {
		for j := range buf {
			buf[j] = xs[r.IntN(len(xs))]
		}
		meds[i] = median(buf)
	}
	slices.Sort(meds)
	sp.Lo, sp.Hi = meds[len(meds)*25/1000], meds[len(meds)*975/1000]
	return sp
}
