package render

import (
	"fmt"
	"strings"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// estimateWhy words why an estimate from histogram buckets is a bound, or
// how coarse it is (etcdmetric.Estimate.Reason); "" when it is neither. An
// estimate read back from JSON keeps the words it was written with.
func estimateWhy(e *etcdmetric.Estimate) string {
	switch e.Reason {
	case etcdmetric.EstimateLowerBound:
		return fmt.Sprintf("no +Inf bucket or _count: total unknown (at least %g), so only a lower bound (above %g s)%s", e.AtLeast, e.Lo, tailCounts(e.Tail))
	case etcdmetric.EstimateNoBound:
		return fmt.Sprintf("no +Inf bucket or _count: total unknown (at least %g), so no bound%s", e.AtLeast, tailCounts(e.Tail))
	case etcdmetric.EstimateFirstShown:
		return fmt.Sprintf("in the first bucket shown (le=%g); etcd's ladder starts lower (le=%g), the buckets below were not given", e.Hi, e.LadderFirst)
	case etcdmetric.EstimateGap:
		return fmt.Sprintf("buckets between le=%g and le=%g are missing: interpolated across the gap", e.GapFrom, e.Hi)
	case etcdmetric.EstimateAboveLadder:
		return fmt.Sprintf("above the highest finite bucket (le=%g): %.3g%% of the observations are there", e.Lo, e.AbovePct)
	}
	return e.Why
}

// tailCounts words what finite buckets without a total still prove:
// "; the buckets shown count at least 223 over 0.064 s, 1 over
// 4.096 s" (etcd-io/etcd#5870's excerpt); "" when they prove none.
func tailCounts(tc []etcdmetric.TailCount) string {
	if len(tc) == 0 {
		return ""
	}
	parts := make([]string, len(tc))
	for i, t := range tc {
		parts[i] = fmt.Sprintf("%g over %g s", t.N, t.Over)
	}
	return "; the buckets shown count at least " + strings.Join(parts, ", ")
}

// wordedStats: h with its estimates' why in words, in copies.
func wordedStats(h diagnose.HistStats) diagnose.HistStats {
	for _, e := range []**etcdmetric.Estimate{&h.P50, &h.P99} {
		if *e != nil {
			c := **e
			c.Why = estimateWhy(&c)
			*e = &c
		}
	}
	return h
}
