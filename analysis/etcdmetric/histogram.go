package etcdmetric

import (
	"errors"
	"fmt"
	"math"
)

// FirstBound is the upper bound of etcd's first peer-RTT bucket; each
// next one doubles it (prometheus.ExponentialBuckets(0.0001, 2, n): 14
// buckets to 0.8192 s in etcd 3.2 and older, 16 to 3.2768 s since).
const FirstBound = 0.0001

// ErrIncompleteLadder is wrapped by Quantile when the buckets shown cannot
// place the quantile (an excerpt whose ladder starts above etcd's first
// bound, or without a +Inf bucket and a _count): interpolating there would
// invent numbers. Estimate then still gives the bounds the data proves.
var ErrIncompleteLadder = errors.New("incomplete bucket ladder")

// ErrBeyondLadder is wrapped by Quantile when the quantile lies above the
// highest finite bucket: only a lower bound is known.
var ErrBeyondLadder = errors.New("quantile above the highest finite bucket")

// Ladder checks that s's buckets are etcd's: first bound FirstBound, each
// next twice the previous (to 0.1% tolerance for decimal rounding), a +Inf
// bucket last, counts not decreasing. It returns nil or an error wrapping
// ErrIncompleteLadder that names the first problem.
func (s Series) Ladder() error {
	b := s.Buckets
	if len(b) == 0 {
		return fmt.Errorf("%w: no buckets", ErrIncompleteLadder)
	}
	if !math.IsInf(b[len(b)-1].UpperBound, 1) {
		return fmt.Errorf("%w: no +Inf bucket", ErrIncompleteLadder)
	}
	if first := s.firstBound(); !near(b[0].UpperBound, first) {
		return fmt.Errorf("%w: first bucket le=%g, etcd's starts at %g", ErrIncompleteLadder, b[0].UpperBound, first)
	}
	for i := 1; i < len(b)-1; i++ {
		if !near(b[i].UpperBound, 2*b[i-1].UpperBound) {
			return fmt.Errorf("%w: le=%g follows le=%g (etcd's buckets double)", ErrIncompleteLadder, b[i].UpperBound, b[i-1].UpperBound)
		}
	}
	for i := 1; i < len(b); i++ {
		if b[i].Count < b[i-1].Count {
			return fmt.Errorf("%w: cumulative count falls at le=%g", ErrIncompleteLadder, b[i].UpperBound)
		}
	}
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-3*math.Abs(b) }

// Mean returns Sum/Count in seconds, and false when either line is
// missing or the count is 0.
func (s Series) Mean() (float64, bool) {
	if !s.HasSum || !s.HasCount || s.Count <= 0 {
		return 0, false
	}
	return s.Sum / s.Count, true
}

// StandardError estimates the standard error of Mean, in seconds: the
// observations' spread (each placed at its bucket's midpoint, the +Inf
// bucket's at its lower bound, deviations from the exact Sum/Count mean)
// over the square root of Count. It needs etcd's whole ladder (Ladder
// nil), _sum and _count, and at least 2 observations; else ok is false.
// etcd observes an EWMA, so successive observations are correlated and
// the true error is larger: treat it as a lower bound on the noise.
func (s Series) StandardError() (se float64, ok bool) {
	mean, ok := s.Mean()
	if !ok || s.Count < 2 || s.Ladder() != nil {
		return 0, false
	}
	var ss, prevCount, prevBound float64
	for _, b := range s.Buckets {
		v := (prevBound + b.UpperBound) / 2
		if math.IsInf(b.UpperBound, 1) {
			v = prevBound
		}
		d := v - mean
		ss += (b.Count - prevCount) * d * d
		prevCount, prevBound = b.Count, b.UpperBound
	}
	return math.Sqrt(ss / (s.Count - 1) / s.Count), true
}

func (s Series) firstBound() float64 {
	if s.FirstBound > 0 {
		return s.FirstBound
	}
	return FirstBound
}

// Estimate is what a histogram says about one quantile: the bounds the
// counts prove, and an interpolated value where the buckets allow one.
type Estimate struct {
	Q float64 `json:"q"`
	// Value: seconds, linear interpolation inside the bucket that holds
	// the quantile, as Prometheus' histogram_quantile does; set only when
	// Interpolated.
	Value        float64 `json:"value_seconds,omitempty"`
	Interpolated bool    `json:"interpolated"`
	// Lo, Hi: the quantile lies in (Lo, Hi] seconds for certain; with
	// Unbounded nothing bounds it above and Hi is 0.
	Lo        float64 `json:"lo_seconds"`
	Hi        float64 `json:"hi_seconds,omitempty"`
	Unbounded bool    `json:"unbounded,omitempty"`
	// TotalUnknown: no +Inf bucket and no _count.
	TotalUnknown bool `json:"total_unknown,omitempty"`
	// Why: Reason in words, empty here: render fills it.
	Why string `json:"why,omitempty"`
	// Reason: when not interpolated, why; when interpolated across
	// missing buckets, how coarse the value is. Not in the JSON (Why
	// says it), nor are the numbers it names: AtLeast (the total is at
	// least this, EstimateTotalUnknown*), Tail (what the buckets shown
	// prove, EstimateTotalUnknown*), LadderFirst (etcd's first bound,
	// EstimateFirstShown; Hi is the first shown), GapFrom (the bound
	// before the missing buckets, EstimateGap; Hi after them), AbovePct
	// (the share above Lo, percent, EstimateAboveLadder).
	Reason      EstimateReason `json:"-"`
	AtLeast     float64        `json:"-"`
	Tail        []TailCount    `json:"-"`
	LadderFirst float64        `json:"-"`
	GapFrom     float64        `json:"-"`
	AbovePct    float64        `json:"-"`
}

// EstimateReason: why an Estimate is a bound, or how coarse it is.
type EstimateReason uint8

// The reasons of Estimate.
const (
	// EstimateExact: interpolated within etcd's ladder.
	EstimateExact EstimateReason = iota
	// EstimateLowerBound: no +Inf bucket and no _count: above Lo only.
	EstimateLowerBound
	// EstimateNoBound: no +Inf bucket and no _count: no bound at all.
	EstimateNoBound
	// EstimateFirstShown: in the first bucket shown (Hi), and etcd's
	// ladder starts lower (LadderFirst).
	EstimateFirstShown
	// EstimateGap: interpolated across missing buckets (GapFrom to Hi).
	EstimateGap
	// EstimateAboveLadder: above the highest finite bucket (Lo).
	EstimateAboveLadder
)

// TailCount: at least N observations lie above Over seconds.
type TailCount struct {
	N, Over float64
}

// Estimate places the q-quantile (0 < q < 1) in s's buckets. The total is
// _count when present, else the +Inf bucket; without either only a lower
// bound is known (the total is at least the highest bucket's count). The
// first bucket's lower bound is 0 only when it is etcd's first bucket (an
// excerpt starting higher gives an upper bound only); above the highest
// finite bucket only a lower bound is known. Buckets missing in between
// widen the interpolation (said in Why). It fails on series with no
// observations or with counts that fall.
func (s Series) Estimate(q float64) (Estimate, error) {
	e := Estimate{Q: q}
	var fin []Bucket
	total, totalKnown := 0.0, false
	for _, b := range s.Buckets {
		if math.IsInf(b.UpperBound, 1) {
			total, totalKnown = b.Count, true
			continue
		}
		fin = append(fin, b)
	}
	if s.HasCount {
		total, totalKnown = s.Count, true
	}
	for i := 1; i < len(fin); i++ {
		if fin[i].Count < fin[i-1].Count {
			return e, fmt.Errorf("%w: cumulative count falls at le=%g", ErrIncompleteLadder, fin[i].UpperBound)
		}
	}
	if totalKnown && total <= 0 {
		return e, fmt.Errorf("no observations")
	}
	if len(fin) == 0 {
		if !totalKnown {
			return e, fmt.Errorf("%w: no buckets", ErrIncompleteLadder)
		}
		return e, fmt.Errorf("%w: no finite buckets, only the count and sum", ErrIncompleteLadder)
	}
	last := fin[len(fin)-1]
	if totalKnown && last.Count > total*(1+1e-9) {
		return e, fmt.Errorf("%w: le=%g counts %g, more than the total %g", ErrIncompleteLadder, last.UpperBound, last.Count, total)
	}
	if !totalKnown {
		// total >= last.Count, so any bucket holding fewer than
		// q·last.Count holds fewer than q·total.
		lo := 0.0
		for _, b := range fin {
			if b.Count < q*last.Count {
				lo = b.UpperBound
			}
		}
		if last.Count <= 0 {
			return e, fmt.Errorf("%w: no +Inf bucket, no _count and no observations in the buckets shown", ErrIncompleteLadder)
		}
		e.Lo, e.Unbounded, e.TotalUnknown = lo, true, true
		e.AtLeast, e.Tail, e.Reason = last.Count, tailCounts(fin), EstimateNoBound
		if lo > 0 {
			e.Reason = EstimateLowerBound
		}
		return e, nil
	}
	rank := q * total
	for i, b := range fin {
		if b.Count < rank || b.Count == 0 {
			continue
		}
		if i == 0 {
			e.Hi = b.UpperBound
			if !near(b.UpperBound, s.firstBound()) {
				e.Reason, e.LadderFirst = EstimateFirstShown, s.firstBound()
				return e, nil
			}
			e.Value, e.Interpolated = b.UpperBound*rank/b.Count, true
			return e, nil
		}
		p := fin[i-1]
		e.Lo, e.Hi = p.UpperBound, b.UpperBound
		e.Value = p.UpperBound + (b.UpperBound-p.UpperBound)*(rank-p.Count)/(b.Count-p.Count)
		e.Interpolated = true
		if !near(b.UpperBound, 2*p.UpperBound) {
			e.Reason, e.GapFrom = EstimateGap, p.UpperBound
		}
		return e, nil
	}
	e.Lo, e.Unbounded = last.UpperBound, true
	e.Reason, e.AbovePct = EstimateAboveLadder, 100*(total-last.Count)/total
	return e, nil
}

// tailCounts is what finite buckets without a total still prove: at
// least how many observations lie above the first bucket shown, and above
// the highest bucket that does not hold them all (more may lie above the
// last bucket). None when they prove none. etcd-io/etcd#5870's excerpt:
// at least 223 over 0.064 s and 1 over 4.096 s.
func tailCounts(fin []Bucket) []TailCount {
	last := fin[len(fin)-1]
	var out []TailCount
	if n := last.Count - fin[0].Count; n > 0 {
		out = append(out, TailCount{n, fin[0].UpperBound})
	}
	for i := len(fin) - 2; i > 0; i-- {
		if fin[i].Count < last.Count {
			out = append(out, TailCount{last.Count - fin[i].Count, fin[i].UpperBound})
			break
		}
	}
	return out
}

// Quantile returns the q-quantile in seconds where Estimate interpolates
// it; otherwise an error wrapping ErrIncompleteLadder (the buckets shown
// cannot place it) or ErrBeyondLadder (above the highest finite bucket),
// with the estimate that could not be a value (an *EstimateError).
func (s Series) Quantile(q float64) (float64, error) {
	e, err := s.Estimate(q)
	if err != nil {
		return 0, err
	}
	if e.Interpolated {
		return e.Value, nil
	}
	if e.Unbounded && e.Lo > 0 && !e.TotalUnknown {
		return 0, &EstimateError{Err: ErrBeyondLadder, Estimate: e}
	}
	return 0, &EstimateError{Err: ErrIncompleteLadder, Estimate: e}
}

// EstimateError: a quantile that is a bound, not a value: Err is
// ErrBeyondLadder or ErrIncompleteLadder, Estimate says why (its Reason;
// render words it).
type EstimateError struct {
	Err      error
	Estimate Estimate
}

func (e *EstimateError) Error() string { return e.Err.Error() }
func (e *EstimateError) Unwrap() error { return e.Err }

// Delta returns end − start for the same series: the observations made
// between two scrapes. A series absent at start (it appears once the
// first observation is made) is taken whole. If any count fell (etcd
// restarted), Delta returns end whole and reset = true.
func Delta(start *Series, end Series) (d Series, reset bool) {
	if start == nil {
		return end, false
	}
	d = end
	d.Buckets = make([]Bucket, len(end.Buckets))
	copy(d.Buckets, end.Buckets)
	if end.Count < start.Count || end.Sum < start.Sum {
		return end, true
	}
	prev := map[float64]float64{}
	for _, b := range start.Buckets {
		prev[b.UpperBound] = b.Count
	}
	for i := range d.Buckets {
		p := prev[d.Buckets[i].UpperBound]
		if d.Buckets[i].Count < p {
			return end, true
		}
		d.Buckets[i].Count -= p
	}
	d.Count -= start.Count
	d.Sum -= start.Sum
	return d, false
}

// DeltaScrapes pairs the series of two scrapes by Key and returns their
// deltas, in end's order; resets lists the keys whose counts fell.
func DeltaScrapes(start, end Scrape) (deltas []Series, resets []Key) {
	byKey := map[Key]*Series{}
	for i := range start.Series {
		byKey[start.Series[i].Key] = &start.Series[i]
	}
	for _, e := range end.Series {
		d, reset := Delta(byKey[e.Key], e)
		if reset {
			resets = append(resets, e.Key)
		}
		deltas = append(deltas, d)
	}
	return deltas, resets
}
