package commit

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// The cluster verdict names a single deciding vote, or a single part of
// a follower's votes, only when its 95% intervals separate it from the
// runner-up (docs/commit.md, "How the cluster verdict decides").

// VerdictLevel is the coverage of every interval of a cluster verdict.
const VerdictLevel = 0.95

// BootstrapResamples is how many resamples of the votes give the
// intervals of the parts' shares: with 2000 the percentile interval's
// ends move by under one percentage point between seeds on the 30-write
// joins of the VM scenarios (Efron and Tibshirani 1993, ch. 19, ask for
// 1000 or more for a 95% percentile interval).
const BootstrapResamples = 2000

// bootstrapSeed fixes the resampling, so that one join always gives the
// same verdict and the same intervals (replays and goldens).
const bootstrapSeed = 28

// Interval is a two-sided VerdictLevel interval [Lo, Hi] of an estimate,
// in the estimate's unit.
type Interval struct {
	Lo, Hi float64
}

// Excludes reports whether x lies outside the interval.
func (iv Interval) Excludes(x float64) bool { return x < iv.Lo || x > iv.Hi }

// ClopperPearson is the exact binomial interval of a proportion, k
// successes of n trials (Clopper and Pearson 1934): it covers the true
// proportion in at least VerdictLevel of samples whatever it is and
// however few the trials, and excludes 1/2 exactly when the two-sided
// exact binomial (sign) test rejects an even split at 1-VerdictLevel.
// n == 0 gives [0, 1].
func ClopperPearson(k, n int) Interval {
	if n <= 0 || k < 0 || k > n {
		return Interval{0, 1}
	}
	tail := (1 - VerdictLevel) / 2
	iv := Interval{0, 1}
	if k > 0 {
		// P(X >= k; p) rises with p: the p where it is tail.
		iv.Lo = bisect(func(p float64) bool { return 1-binomCDF(k-1, n, p) < tail })
	}
	if k < n {
		// P(X <= k; p) falls with p: the p where it is tail.
		iv.Hi = bisect(func(p float64) bool { return binomCDF(k, n, p) > tail })
	}
	return iv
}

// bisect returns the p in [0, 1] where below turns from true to false.
func bisect(below func(p float64) bool) float64 {
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if below(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// binomCDF is P(X <= k) for X ~ Binomial(n, p), summed in log space.
func binomCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	lnN, _ := math.Lgamma(float64(n + 1))
	lp, lq := math.Log(p), math.Log1p(-p)
	var sum float64
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lnN - a - b + float64(i)*lp + float64(n-i)*lq)
	}
	return min(sum, 1)
}

// VotePart is one part of a follower's vote in a cluster verdict.
type VotePart uint8

// The parts of a follower's vote (VoteShares.Parts).
const (
	VotePartNone    VotePart = iota
	VotePartNetwork          // the network remainder of the vote
	VotePartWAL              // the follower's WAL append
	VotePartQueue            // the follower's Raft loop: queueing and answer
)

// PartShare is one part's share of the deciding votes' summed time.
type PartShare struct {
	Part VotePart
	// Pct: the part's sum over the votes as a percentage of the votes'
	// summed time; CI its VerdictLevel paired bootstrap interval
	// (percentage points).
	Pct float64
	CI  Interval
	// P50Ns: the part's p50 over the votes.
	P50Ns int64
}

// VoteShares is the evidence on the parts of one follower's votes:
// Parts, largest share first (a tie in the order network, WAL append,
// queueing); how far the largest stands from the second; and whether it
// is separated from every other part.
type VoteShares struct {
	Parts [3]PartShare
	// GapCI: the VerdictLevel paired bootstrap interval of Parts[0].Pct
	// minus Parts[1].Pct, percentage points.
	GapCI Interval
	// Longer of Compared votes had Parts[0]'s part longer than
	// Parts[1]'s (votes where the two are equal are not compared);
	// LongerCI is ClopperPearson(Longer, Compared).
	Longer, Compared int
	LongerCI         Interval
	// Separated: against every other part, both the bootstrap interval
	// of the gap lies above 0 and the Clopper-Pearson interval of the
	// votes it is longer in lies above 1/2.
	Separated bool
}

// voteParts are one vote's parts in VotePart order (index part-1).
type voteParts [3]int64

// shareEvidence weighs the parts of votes (at least one).
func shareEvidence(votes []voteParts) VoteShares {
	var sum voteParts
	p50 := make([][]int64, 3)
	for _, v := range votes {
		for k := range v {
			sum[k] += v[k]
			p50[k] = append(p50[k], v[k])
		}
	}
	order := []int{0, 1, 2}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case sum[a] > sum[b]:
			return -1
		case sum[a] < sum[b]:
			return 1
		}
		return 0
	})
	total := float64(sum[0] + sum[1] + sum[2])
	pct := func(s voteParts, k int) float64 {
		if t := float64(s[0] + s[1] + s[2]); t != 0 {
			return 100 * float64(s[k]) / t
		}
		return 0
	}
	// The paired bootstrap: whole votes resampled with replacement,
	// each part's share and the leader's gap to each other part
	// recomputed per resample.
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(votes))))
	shares := [3][]float64{}
	gaps := [3][]float64{}
	for range BootstrapResamples {
		var s voteParts
		for range votes {
			v := &votes[rng.IntN(len(votes))]
			s[0], s[1], s[2] = s[0]+v[0], s[1]+v[1], s[2]+v[2]
		}
		for k := range s {
			shares[k] = append(shares[k], pct(s, k))
			gaps[k] = append(gaps[k], pct(s, order[0])-pct(s, k))
		}
	}
	var ev VoteShares
	ev.Separated = total != 0
	for i, k := range order {
		ev.Parts[i] = PartShare{Part: VotePart(k + 1), Pct: pct(sum, k), CI: percentile(shares[k]), P50Ns: median(p50[k])}
		if i == 0 {
			continue
		}
		gap := percentile(gaps[k])
		longer, compared := 0, 0
		for _, v := range votes {
			if v[order[0]] != v[k] {
				compared++
				if v[order[0]] > v[k] {
					longer++
				}
			}
		}
		longerCI := ClopperPearson(longer, compared)
		if gap.Lo <= 0 || longerCI.Lo <= 0.5 {
			ev.Separated = false
		}
		if i == 1 {
			ev.GapCI, ev.Longer, ev.Compared, ev.LongerCI = gap, longer, compared, longerCI
		}
	}
	return ev
}

// percentile is the VerdictLevel percentile interval of the resampled
// values xs (sorted in place): the (1-VerdictLevel)/2 quantile and its
// mirror, by nearest rank.
func percentile(xs []float64) Interval {
	slices.Sort(xs)
	tail := (1 - VerdictLevel) / 2
	lo := int(math.Floor(tail * float64(len(xs))))
	hi := int(math.Ceil((1-tail)*float64(len(xs)))) - 1
	return Interval{xs[lo], xs[max(hi, lo)]}
}

// median is the p50 of xs (sorted in place), as the joins' series give it.
func median(xs []int64) int64 {
	slices.Sort(xs)
	return stats.Quantile(xs, 0.5)
}
