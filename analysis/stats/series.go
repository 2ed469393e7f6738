package stats

import (
	"math/bits"
	"slices"
)

// fio's completion-latency histogram (fio stat.h: FIO_IO_U_PLAT_BITS 6,
// FIO_IO_U_PLAT_VAL 64, FIO_IO_U_PLAT_GROUP_NR 29): values below 128 in
// bins of one, then 64 bins per power of two up to 2^34 (17 s in ns); a
// bin's value is its midpoint, so a binned quantile is within half a bin,
// 1/128 (0.8%), of an exact one. fio computes its clat_ns percentiles from
// these bins, so a binned etcdscope quantile is what fio would report for
// the same values.
const (
	platBits  = 6
	platVal   = 1 << platBits
	platGroup = 29
	platNR    = platGroup * platVal // 1856 bins
)

// ExactLimit is how many values a Series keeps for exact order statistics
// (512 KiB each); past it the Series bins them as fio does. A group of an
// fsync report has six series: at most 3 MiB of exact values, then a fixed
// 15 KiB histogram each, however long the trace runs.
const ExactLimit = 1 << 16

// platIndex is fio's plat_val_to_idx.
func platIndex(v uint64) int {
	msb := 0
	if v > 0 {
		msb = bits.Len64(v) - 1
	}
	if msb <= platBits {
		return int(v)
	}
	errBits := msb - platBits
	idx := (errBits+1)<<platBits + int(v>>errBits)&(platVal-1)
	return min(idx, platNR-1)
}

// platValue is fio's plat_idx_to_val: the midpoint of bin idx.
func platValue(idx int) int64 {
	if idx < platVal<<1 {
		return int64(idx)
	}
	errBits := idx>>platBits - 1
	base := uint64(1) << (errBits + platBits)
	k := uint64(idx % platVal)
	return int64(base + (k<<errBits + (1<<errBits)/2))
}

// Series accumulates non-negative values (ns) for a Summary in bounded
// memory: Count, Sum, Min and Max are always exact; the quantiles are
// exact order statistics for the first ExactLimit values and fio's binned
// ones after that (Summary.Binned says which), or sooner if the Series is
// bound to a Budget that is spent. Negative values count as 0. The zero
// value is ready to use. Not safe for concurrent use.
type Series struct {
	// The exact values, in the order added: full chunks of seriesChunk
	// values, then vals. Growing by chunks copies no value and leaves no
	// garbage; one slice grown by append copied each value about once
	// more and freed the old arrays for the GC, ~4% of etcdscope fsync's
	// CPU at 10k fsync/s in a series' first ExactLimit values
	// (bench/findings.md section 26).
	chunks     [][]int64
	vals       []int64
	bins       []uint64 // nil until the series outgrows ExactLimit
	count, sum int64
	minV, maxV int64
	budget     *Budget // nil: bounded by ExactLimit alone
}

// Budget bounds the exact values the Series bound to it hold together
// (Series.Bind): ExactLimit a series times the series a report holds was
// hundreds of MiB (16 device-mapper groups of 65,535 calls each: 505-562
// MiB, their levels' rows included). A Series that finds the budget spent
// bins its values as fio does, as past ExactLimit: its quantiles are then
// within half a bin, 1/128 (0.8%), and Summary.Binned says so. A binned
// or folded Series gives its values back. Not safe for concurrent use.
type Budget struct{ left int64 }

// NewBudget returns a budget of n exact values.
func NewBudget(n int64) *Budget { return &Budget{left: n} }

// Left is how many exact values the budget has left.
func (b *Budget) Left() int64 { return b.left }

// take spends one value of b, if any is left; a nil budget always has one.
func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

// give returns n values to b (a nil budget takes none).
func (b *Budget) give(n int) {
	if b != nil {
		b.left += int64(n)
	}
}

// Bind charges the exact values s keeps from now on to b.
func (s *Series) Bind(b *Budget) { s.budget = b }

// Add records one value.
func (s *Series) Add(v int64) {
	v = max(v, 0)
	if s.count == 0 || v < s.minV {
		s.minV = v
	}
	s.maxV = max(s.maxV, v)
	s.count++
	s.sum += v
	if s.bins != nil {
		s.bins[platIndex(uint64(v))]++
		return
	}
	if s.exact() < ExactLimit && s.budget.take() {
		if len(s.vals) == seriesChunk {
			s.chunks = append(s.chunks, s.vals)
			s.vals = make([]int64, 0, seriesChunk)
		}
		s.vals = append(s.vals, v)
		return
	}
	s.bin()
	s.bins[platIndex(uint64(v))]++
}

// bin moves s's exact values into fio's bins and gives them back to its
// budget.
func (s *Series) bin() {
	s.bins = make([]uint64, platNR)
	for _, c := range s.chunks {
		for _, x := range c {
			s.bins[platIndex(uint64(x))]++
		}
	}
	for _, x := range s.vals {
		s.bins[platIndex(uint64(x))]++
	}
	s.budget.give(s.exact())
	s.chunks, s.vals = nil, nil
}

// seriesChunk is how many exact values a Series keeps in one array (32
// KiB): the first grows by append up to it, the next are made full size.
const seriesChunk = 4096

// exact is how many exact values s holds.
func (s *Series) exact() int { return len(s.chunks)*seriesChunk + len(s.vals) }

// appendExact appends s's exact values to dst in the order added.
func (s *Series) appendExact(dst []int64) []int64 {
	for _, c := range s.chunks {
		dst = append(dst, c...)
	}
	return append(dst, s.vals...)
}

// Summary returns the values' summary. It does not change the series.
func (s *Series) Summary() Summary {
	if s.count == 0 {
		return Summary{}
	}
	if s.bins == nil {
		return Summarize(s.appendExact(make([]int64, 0, s.exact())))
	}
	out := Summary{Count: s.count, Sum: s.sum, Min: s.minV, Max: s.maxV, Binned: true}
	qs := [3]struct {
		q   float64
		dst *int64
	}{{0.50, &out.P50}, {0.90, &out.P90}, {0.99, &out.P99}}
	// fio's calc_clat_percentiles: the first bin whose running count
	// reaches q·n, as its midpoint; kept inside the exact [Min, Max].
	var run uint64
	j := 0
	for i, n := range s.bins {
		run += n
		for j < len(qs) && float64(run) >= qs[j].q*float64(s.count) {
			*qs[j].dst = min(max(platValue(i), s.minV), s.maxV)
			j++
		}
		if j == len(qs) {
			break
		}
	}
	return out
}

// Clone returns a copy of s that shares no memory with it, bound to no
// budget.
func (s *Series) Clone() Series {
	c := *s
	c.budget = nil
	c.chunks = nil
	for _, ch := range s.chunks {
		c.chunks = append(c.chunks, slices.Clone(ch))
	}
	c.vals = slices.Clone(s.vals)
	c.bins = slices.Clone(s.bins)
	return c
}

// Merge adds o's values to s, as if each had been added to s (Count, Sum,
// Min and Max exact; the quantiles binned once the two together outgrow
// ExactLimit, or when either is binned already). o is unchanged.
func (s *Series) Merge(o *Series) {
	if o.count == 0 {
		return
	}
	if o.bins == nil {
		for _, c := range o.chunks {
			for _, v := range c {
				s.Add(v)
			}
		}
		for _, v := range o.vals {
			s.Add(v)
		}
		return
	}
	if s.count == 0 || o.minV < s.minV {
		s.minV = o.minV
	}
	s.maxV = max(s.maxV, o.maxV)
	s.count += o.count
	s.sum += o.sum
	if s.bins == nil {
		s.bin()
	}
	for i, n := range o.bins {
		s.bins[i] += n
	}
}

// Absorb merges o into s (Merge) and empties o, whose exact values go
// back to its budget first: a folded series' values are spent again.
func (s *Series) Absorb(o *Series) {
	o.budget.give(o.exact())
	o.budget = nil
	s.Merge(o)
	*o = Series{}
}

// Count is how many values were added.
func (s *Series) Count() int64 { return s.count }
