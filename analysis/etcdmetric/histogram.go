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

// ErrIncompleteLadder is wrapped by Quantile when the buckets are not
// etcd's full ladder (an excerpt, or a ladder with gaps): interpolating
// there would invent numbers, so only sum/count (the mean) are usable.
var ErrIncompleteLadder = errors.New("incomplete bucket ladder")

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
	if !near(b[0].UpperBound, FirstBound) {
		return fmt.Errorf("%w: first bucket le=%g, etcd's starts at %g", ErrIncompleteLadder, b[0].UpperBound, FirstBound)
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

// Quantile returns the q-quantile in seconds by linear interpolation
// inside the bucket that holds it, as Prometheus's histogram_quantile
// does (lower bound 0 for the first bucket; the highest finite bound when
// it falls in +Inf). It refuses incomplete ladders and empty series.
func (s Series) Quantile(q float64) (float64, error) {
	if err := s.Ladder(); err != nil {
		return 0, err
	}
	b := s.Buckets
	total := b[len(b)-1].Count
	if total <= 0 {
		return 0, fmt.Errorf("no observations")
	}
	rank := q * total
	lower, prev := 0.0, 0.0
	for i, bk := range b {
		if bk.Count >= rank && bk.Count > prev {
			if math.IsInf(bk.UpperBound, 1) {
				return b[i-1].UpperBound, nil
			}
			return lower + (bk.UpperBound-lower)*(rank-prev)/(bk.Count-prev), nil
		}
		lower, prev = bk.UpperBound, bk.Count
	}
	return b[len(b)-2].UpperBound, nil
}

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
